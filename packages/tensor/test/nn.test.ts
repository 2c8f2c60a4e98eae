import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { checkOp, expectClose, randomArray, randomTensor } from "./helpers.js";

function rowsRef(x: Float64Array, n: number, f: (row: Float64Array) => Float64Array): Float64Array {
  const out = new Float64Array(x.length);
  for (let o = 0; o < x.length; o += n) out.set(f(x.subarray(o, o + n)), o);
  return out;
}
const softmax64 = (r: Float64Array) => {
  const m = Math.max(...r);
  const e = r.map((v) => Math.exp(v - m));
  const s = e.reduce((a, b) => a + b, 0);
  return e.map((v) => v / s);
};

describe("softmax family", () => {
  it("the js softmaxRows kernel (probabilities + logsumexp, in place allowed) against float64", () => {
    const rows = 4;
    const vocab = 37;
    const logits = Float32Array.from(randomArray(rows * vocab, -9, 9));
    const probs = new Float32Array(rows * vocab).fill(Number.NaN);
    const lse = new Float32Array(rows);
    T.withBackend("js", () => T.kernel("softmaxRows")(logits, probs, lse, rows, vocab));
    const x64 = Float64Array.from(logits);
    expectClose(probs, rowsRef(x64, vocab, softmax64), 1e-6, 1e-9);
    for (let r = 0; r < rows; r++) {
      const row = x64.subarray(r * vocab, (r + 1) * vocab);
      const m = Math.max(...row);
      expect(lse[r]).toBeCloseTo(m + Math.log(row.reduce((a, v) => a + Math.exp(v - m), 0)), 5);
    }
    const inPlace = logits.slice();
    T.withBackend("js", () => T.kernel("softmaxRows")(inPlace, inPlace, new Float32Array(rows), rows, vocab));
    expect(inPlace).toEqual(probs);
    const rowScale = Float32Array.from([2, -0.5, 0, 3]);
    const scaled = new Float32Array(rows * vocab);
    T.withBackend("js", () => T.kernel("softmaxRows")(logits, scaled, new Float32Array(rows), rows, vocab, rowScale));
    const want = rowsRef(x64, vocab, softmax64).map((v, i) => v * rowScale[Math.floor(i / vocab)]);
    expectClose(scaled, want, 1e-6, 1e-9);
  });

  it("softmax and logSoftmax over the last axis", () => {
    checkOp({ inputs: [randomTensor([3, 6], -3, 3)], op: (x) => T.softmax(x), ref: (x) => rowsRef(x, 6, softmax64) });
    checkOp({
      inputs: [randomTensor([3, 6], -3, 3)],
      op: (x) => T.logSoftmax(x),
      ref: (x) => rowsRef(x, 6, (r) => softmax64(r).map(Math.log)),
    });
  });
  it("softmax over a middle axis", () => {
    checkOp({
      inputs: [randomTensor([2, 3, 2], -2, 2)],
      op: (x) => T.softmax(x, 1),
      ref: (x) => {
        const out = new Float64Array(12);
        for (let a = 0; a < 2; a++)
          for (let c = 0; c < 2; c++) {
            const col = Float64Array.from([0, 1, 2], (b) => x[a * 6 + b * 2 + c]);
            for (const [b, v] of softmax64(col).entries()) out[a * 6 + b * 2 + c] = v;
          }
        return out;
      },
    });
  });
});

describe("RMSNorm", () => {
  for (const zeroCentered of [false, true]) {
    it(`weight·x̂ ${zeroCentered ? "(1+w) zero-centred" : "(w)"}`, () => {
      const eps = 1e-6;
      checkOp({
        inputs: [randomTensor([3, 8], -2, 2), randomTensor([8], 0.5, 1.5)],
        op: (x, w) => T.rmsNorm(x, w, { eps, zeroCentered }),
        ref: (x, w) =>
          rowsRef(x, 8, (r) => {
            const s = 1 / Math.sqrt(r.reduce((a, v) => a + v * v, 0) / 8 + eps);
            return r.map((v, i) => v * s * (zeroCentered ? 1 + w[i] : w[i]));
          }),
      });
    });
  }
});

describe.each(["js", "wasm"])("RoPE (rotate-half), %s kernels", (backend) => {
  beforeAll(async () => {
    if (backend === "wasm") await T.initBackend("wasm", { threads: 1, activate: false });
  });
  afterAll(() => {
    if (backend === "wasm") T.disposeWasmBackend();
  });

  const cases: [number, number, boolean][] = [
    [8, 8, true],
    [4, 8, true],
    [8, 8, false],
    [10, 16, false],
  ];
  for (const [rotaryDim, D, perBatch] of cases) {
    it(`rotaryDim ${rotaryDim} of head dim ${D}, ${perBatch ? "per-batch" : "shared"} positions`, () => {
      const [B, H, Tn] = [2, 2, 3];
      const invFreq = T.ropeInvFreq(rotaryDim, 10000);
      const positions = Int32Array.from(perBatch ? [0, 1, 2, 5, 6, 7] : [3, 4, 9]);
      T.withBackend(backend, () =>
        checkOp({
          inputs: [randomTensor([B, H, Tn, D])],
          op: (x) => T.rope(x, positions, invFreq, { rotaryDim }),
          ref: (x) => {
            const out = Float64Array.from(x);
            const half = rotaryDim / 2;
            for (let b = 0; b < B; b++)
              for (let h = 0; h < H; h++)
                for (let t = 0; t < Tn; t++) {
                  const o = ((b * H + h) * Tn + t) * D;
                  for (let i = 0; i < half; i++) {
                    const a = positions[perBatch ? b * Tn + t : t] * invFreq[i];
                    out[o + i] = x[o + i] * Math.cos(a) - x[o + i + half] * Math.sin(a);
                    out[o + i + half] = x[o + i + half] * Math.cos(a) + x[o + i] * Math.sin(a);
                  }
                }
            return out;
          },
        }),
      );
    });
  }
});

describe.each(["js", "wasm"])("ropeHeads (RoPE fused with the head permute), %s kernels", (backend) => {
  beforeAll(async () => {
    if (backend === "wasm") await T.initBackend("wasm", { threads: 1, activate: false });
  });
  afterAll(() => {
    if (backend === "wasm") T.disposeWasmBackend();
  });

  for (const [rotaryDim, D, perBatch] of [
    [8, 8, false],
    [6, 10, true],
  ] as [number, number, boolean][]) {
    it(`x [B, T, H, D] → [B, H, T, D], rotaryDim ${rotaryDim} of ${D}, ${perBatch ? "per-batch" : "shared"} positions`, () => {
      const [B, Tn, H] = [2, 3, 2];
      const invFreq = T.ropeInvFreq(rotaryDim, 10000);
      const positions = Int32Array.from(perBatch ? [0, 1, 2, 5, 6, 7] : [3, 4, 9]);
      T.withBackend(backend, () => {
        checkOp({
          inputs: [randomTensor([B, Tn, H, D])],
          op: (x) => T.ropeHeads(x, positions, invFreq, { rotaryDim }),
          ref: (x) => {
            const out = new Float64Array(x.length);
            const half = rotaryDim / 2;
            for (let b = 0; b < B; b++)
              for (let h = 0; h < H; h++)
                for (let t = 0; t < Tn; t++) {
                  const o = ((b * H + h) * Tn + t) * D;
                  const src = ((b * Tn + t) * H + h) * D;
                  for (let i = 0; i < D; i++) out[o + i] = x[src + i];
                  for (let i = 0; i < half; i++) {
                    const a = positions[perBatch ? b * Tn + t : t] * invFreq[i];
                    out[o + i] = x[src + i] * Math.cos(a) - x[src + i + half] * Math.sin(a);
                    out[o + i + half] = x[src + i + half] * Math.cos(a) + x[src + i] * Math.sin(a);
                  }
                }
            return out;
          },
        });
        // the same values as the two-op composition
        const x = randomTensor([B, Tn, H, D]);
        const fused = T.ropeHeads(x, positions, invFreq, { rotaryDim });
        const composed = T.rope(T.permute(x, [0, 2, 1, 3]), positions, invFreq, { rotaryDim });
        expect(fused.shape).toEqual([B, H, Tn, D]);
        expect(Array.from(fused.toFloat32Array())).toEqual(Array.from(composed.toFloat32Array()));
      });
    });
  }

  it("names the expected layout in its shape error", () => {
    expect(() => T.ropeHeads(T.zeros([2, 3, 4]), [0, 1, 2], T.ropeInvFreq(4, 10000))).toThrow(
      /ropeHeads: expected x \[B, T, H, D\]/,
    );
  });
});

describe("RoPE cos/sin tables", () => {
  it("a reused table follows positions and invFreq changed in place", () => {
    const x = T.randn([1, 2, 3, 8], { rng: new T.Rng(5) });
    const positions = Int32Array.from([0, 1, 2]);
    const invFreq = T.ropeInvFreq(8, 10000);
    const fresh = () => T.rope(x, Int32Array.from(positions), Float32Array.from(invFreq)).toFloat32Array();
    const first = T.rope(x, positions, invFreq).toFloat32Array();
    expect(Array.from(T.rope(x, positions, invFreq).toFloat32Array())).toEqual(Array.from(first));
    positions[2] = 9;
    const moved = T.rope(x, positions, invFreq).toFloat32Array();
    expect(Array.from(moved)).toEqual(Array.from(fresh()));
    expect(Array.from(moved)).not.toEqual(Array.from(first));
    invFreq[1] *= 2;
    const rescaled = T.rope(x, positions, invFreq).toFloat32Array();
    expect(Array.from(rescaled)).toEqual(Array.from(fresh()));
    expect(Array.from(rescaled)).not.toEqual(Array.from(moved));
  });
});

function attentionRef(
  q: Float64Array,
  k: Float64Array,
  v: Float64Array,
  B: number,
  H: number,
  Hkv: number,
  tq: number,
  tk: number,
  D: number,
  causal: boolean,
  mask: Uint8Array | null,
) {
  const out = new Float64Array(B * H * tq * D);
  const scale = 1 / Math.sqrt(D);
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++) {
      const kh = Math.floor(h / (H / Hkv));
      for (let i = 0; i < tq; i++) {
        const scores: number[] = [];
        const keys: number[] = [];
        for (let j = 0; j < tk; j++) {
          if (causal && j > i + tk - tq) continue;
          if (mask && !mask[b * tk + j]) continue;
          let s = 0;
          for (let c = 0; c < D; c++) s += q[((b * H + h) * tq + i) * D + c] * k[((b * Hkv + kh) * tk + j) * D + c];
          scores.push(s * scale);
          keys.push(j);
        }
        if (keys.length === 0) continue;
        const p = softmax64(Float64Array.from(scores));
        for (let c = 0; c < D; c++) {
          let s = 0;
          for (const [n, j] of keys.entries()) s += p[n] * v[((b * Hkv + kh) * tk + j) * D + c];
          out[((b * H + h) * tq + i) * D + c] = s;
        }
      }
    }
  return out;
}

describe("attention", () => {
  const cases = [
    { name: "causal MHA", B: 1, H: 2, Hkv: 2, tq: 5, tk: 5, D: 4, causal: true, pad: false },
    { name: "causal GQA 4:2 with left padding", B: 2, H: 4, Hkv: 2, tq: 6, tk: 6, D: 4, causal: true, pad: true },
    { name: "KV-cache decode (tq < tk)", B: 2, H: 2, Hkv: 1, tq: 2, tk: 7, D: 4, causal: true, pad: false },
    { name: "bidirectional with padding", B: 2, H: 2, Hkv: 2, tq: 4, tk: 4, D: 3, causal: false, pad: true },
  ];
  for (const c of cases) {
    it(`${c.name}: forward and backward`, () => {
      const mask = c.pad
        ? Uint8Array.from({ length: c.B * c.tk }, (_, i) => (Math.floor(i / c.tk) === 1 && i % c.tk < 2 ? 0 : 1))
        : null;
      checkOp({
        inputs: [
          randomTensor([c.B, c.H, c.tq, c.D]),
          randomTensor([c.B, c.Hkv, c.tk, c.D]),
          randomTensor([c.B, c.Hkv, c.tk, c.D]),
        ],
        op: (q, k, v) => T.attention(q, k, v, { causal: c.causal, keyMask: mask }),
        ref: (q, k, v) => attentionRef(q, k, v, c.B, c.H, c.Hkv, c.tq, c.tk, c.D, c.causal, mask),
      });
    });
  }
  it("rejects head counts that do not group", () => {
    expect(() =>
      T.attention(randomTensor([1, 3, 2, 4]), randomTensor([1, 2, 2, 4]), randomTensor([1, 2, 2, 4])),
    ).toThrow(/not a multiple/);
  });
});

describe("SwiGLU, cross-entropy, gathers", () => {
  it("swiglu = silu(gate)·up", () => {
    checkOp({
      inputs: [randomTensor([4, 5], -3, 3), randomTensor([4, 5])],
      op: T.swiglu,
      ref: (g, u) => g.map((v, i) => (v / (1 + Math.exp(-v))) * u[i]),
    });
  });

  for (const reduction of ["mean", "sum", "none"] as const) {
    it(`fused cross-entropy with ignore_index, reduction ${reduction}`, () => {
      const targets = T.tensor([2, -100, 0, 4, -100, 1], [6], "i32");
      checkOp({
        inputs: [randomTensor([6, 5], -3, 3)],
        op: (x) => T.crossEntropy(x, targets, { reduction }),
        ref: (x) => {
          const losses: number[] = [];
          for (let r = 0; r < 6; r++) {
            const t = targets.dataSync()[r];
            const row = x.subarray(r * 5, r * 5 + 5);
            losses.push(t === -100 ? 0 : -Math.log(softmax64(row)[t]));
          }
          const valid = Array.from(targets.dataSync()).filter((t) => t !== -100).length;
          const total = losses.reduce((a, b) => a + b, 0);
          return reduction === "none"
            ? Float64Array.from(losses)
            : Float64Array.of(reduction === "sum" ? total : total / valid);
        },
      });
    });
  }

  it("tokenLogProbs equals gathered log-softmax", () => {
    const logits = randomTensor([4, 7], -2, 2, false);
    const targets = T.tensor([1, 6, 0, 3], [4], "i32");
    const lp = T.tokenLogProbs(logits, targets);
    const ref = T.gather(T.logSoftmax(logits), 1, T.reshape(targets, [4, 1]));
    expectClose(lp.toFloat32Array(), ref.toFloat32Array(), 1e-5, 1e-6);
  });

  it("cross-entropy rejects targets out of range", () => {
    expect(() => T.crossEntropy(randomTensor([2, 3]), T.tensor([0, 3], [2], "i32"))).toThrow(T.IndexError);
    expect(() => T.crossEntropy(randomTensor([2, 3]), T.tensor([0, 1], [2]))).toThrow(/targets must be i32/);
  });

  it("embedding gather and scatter-add gradient", () => {
    const ids = T.tensor([[3, 0, 3]], [1, 3], "i32");
    checkOp({
      inputs: [randomTensor([5, 4])],
      op: (w) => T.embedding(w, ids),
      ref: (w) => Float64Array.from({ length: 12 }, (_, i) => w[ids.dataSync()[Math.floor(i / 4)] * 4 + (i % 4)]),
    });
    expect(() => T.embedding(randomTensor([5, 4]), T.tensor([5], [1], "i32"))).toThrow(
      /index 5 at position 0 is outside \[0, 5\)/,
    );
  });

  it("scatterAdd (index_add_) and gather", () => {
    const ids = T.tensor([1, 1, 3], [3], "i32");
    checkOp({
      inputs: [randomTensor([4, 2]), randomTensor([3, 2])],
      op: (base, src) => T.scatterAdd(base, ids, src),
      ref: (base, src) => {
        const out = Float64Array.from(base);
        for (let i = 0; i < 3; i++) for (let j = 0; j < 2; j++) out[ids.dataSync()[i] * 2 + j] += src[i * 2 + j];
        return out;
      },
    });
    const index = T.tensor(
      [
        [2, 0],
        [1, 1],
      ],
      [2, 2],
      "i32",
    );
    checkOp({
      inputs: [randomTensor([2, 3])],
      op: (x) => T.gather(x, 1, index),
      ref: (x) => Float64Array.from([x[2], x[0], x[4], x[4]]),
    });
  });
});

describe("dropout", () => {
  it("is reproducible from (seed, offset), scales by 1/(1-p), and differs across offsets", () => {
    const x = T.ones([1000]);
    const a = T.dropout(x, 0.25, { seed: 7, offset: 0 });
    const b = T.dropout(x, 0.25, { seed: 7, offset: 0 });
    const c = T.dropout(x, 0.25, { seed: 7, offset: 1000 });
    expect(Array.from(a.dataSync())).toEqual(Array.from(b.dataSync()));
    expect(Array.from(a.dataSync())).not.toEqual(Array.from(c.dataSync()));
    const kept = Array.from(a.dataSync()).filter((v) => v !== 0);
    expect(kept.every((v) => Math.abs(v - 1 / 0.75) < 1e-6)).toBe(true);
    expect(Math.abs(kept.length / 1000 - 0.75)).toBeLessThan(0.05);
    const w = randomTensor([50]);
    const y = T.dropout(w, 0.5, { seed: 3 });
    T.backward(T.sum(y));
    const mask = Array.from(y.dataSync(), (v, i) => (v === 0 ? 0 : 2 * (w.dataSync()[i] !== 0 ? 1 : 0)));
    expectClose(w.grad!.toFloat32Array(), mask, 1e-6, 1e-6);
    expect(T.dropout(w, 0.5, { seed: 3, training: false })).toBe(w);
  });
});

describe("random inputs are fresh", () => {
  it("helper never yields zeros", () => {
    expect(Array.from(randomArray(1000)).some((v) => v === 0)).toBe(false);
  });
});

// raggedDecodeAttention (the batching scheduler's decode attention): every sequence's query row over its own
// cache buffer, read in place. Checked against a float64 reference, against `attention` run per sequence on
// the same backend (bit for bit on wasm: the kernel does what attn_fwd does for one query row), and for
// row independence (a row's bits do not depend on the other rows or on its buffer's capacity).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { randomArray } from "./helpers.js";

interface Seq {
  /** Keys and values [1, Hkv, capacity, D]. */
  keys: Float32Array;
  values: Float32Array;
  capacity: number;
  length: number;
}

const H = 4;
const Hkv = 2;
const D = 24;

function makeSeqs(lengths: number[], seed: number): Seq[] {
  return lengths.map((length, b) => {
    const capacity = length + 16 * ((b % 3) + (length === 0 ? 1 : 0));
    const n = Hkv * capacity * D;
    return {
      keys: randomArray(n, -1, 1, seed + 2 * b),
      values: randomArray(n, -1, 1, seed + 2 * b + 1),
      capacity,
      length,
    };
  });
}

/** float64 softmax attention of one query row per sequence, GQA head h → kv head h / (H / Hkv). */
function reference(q: Float32Array, seqs: Seq[], scale: number): Float64Array {
  const out = new Float64Array(seqs.length * H * D);
  for (const [b, s] of seqs.entries())
    for (let h = 0; h < H; h++) {
      if (s.length === 0) continue;
      const base = Math.floor(h / (H / Hkv)) * s.capacity * D;
      const qo = (b * H + h) * D;
      const scores = Array.from({ length: s.length }, (_, j) => {
        let dot = 0;
        for (let c = 0; c < D; c++) dot += q[qo + c] * s.keys[base + j * D + c];
        return dot * scale;
      });
      const mx = Math.max(...scores);
      const p = scores.map((x) => Math.exp(x - mx));
      const sum = p.reduce((a, x) => a + x, 0);
      for (let j = 0; j < s.length; j++)
        for (let c = 0; c < D; c++) out[qo + c] += (p[j] / sum) * s.values[base + j * D + c];
    }
  return out;
}

function caches(seqs: Seq[], nulls: ReadonlySet<number> = new Set()): (T.RaggedKV | null)[] {
  return seqs.map((s, b) =>
    nulls.has(b)
      ? null
      : {
          keys: new T.Tensor(s.keys, [1, Hkv, s.capacity, D]),
          values: new T.Tensor(s.values, [1, Hkv, s.capacity, D]),
          length: s.length,
        },
  );
}

/** The path the scheduler took before: `attention` of each row alone over a contiguous copy of its prefix. */
function perSequence(q: T.Tensor, seqs: Seq[]): Float32Array {
  const rows = seqs.map((s, b) => {
    if (s.length === 0) return T.zeros([1, H, 1, D]);
    const kv = caches([s])[0] as T.RaggedKV;
    return T.attention(
      T.narrow(q, 0, b, b + 1),
      T.narrow(kv.keys, 2, 0, s.length),
      T.narrow(kv.values, 2, 0, s.length),
    );
  });
  return T.concat(rows, 0).toFloat32Array();
}

const lengths = [5, 1, 0, 37, 64, 130, 9, 2];
const seqs = makeSeqs(lengths, 100);
const qData = randomArray(lengths.length * H * D, -1, 1, 7);

for (const backend of ["js", "wasm"] as const) {
  describe(`raggedDecodeAttention on ${backend}`, () => {
    beforeAll(async () => {
      if (backend !== "js") await T.initBackend(backend, { threads: 2 });
      T.setBackend(backend);
    });
    afterAll(() => T.setBackend("js"));

    it("matches a float64 reference, with capacities past the lengths, GQA and an empty sequence", () => {
      const q = new T.Tensor(qData, [lengths.length, H, 1, D]);
      const out = T.noGrad(() => T.raggedDecodeAttention(q, caches(seqs))).toFloat32Array();
      const ref = reference(qData, seqs, 1 / Math.sqrt(D));
      for (let i = 0; i < ref.length; i++) expect(Math.abs(out[i] - ref[i])).toBeLessThan(2e-6);
      // The empty sequence's rows are zeros.
      expect([...out.subarray(2 * H * D, 3 * H * D)].every((x) => x === 0)).toBe(true);
    });

    it("gives each row the bits it gets alone, whatever shares the call", () => {
      const q = new T.Tensor(qData, [lengths.length, H, 1, D]);
      const all = T.noGrad(() => T.raggedDecodeAttention(q, caches(seqs))).toFloat32Array();
      for (const b of [0, 3, 5]) {
        const alone = T.noGrad(() =>
          T.raggedDecodeAttention(
            new T.Tensor(qData.slice(b * H * D, (b + 1) * H * D), [1, H, 1, D]),
            caches([seqs[b]]),
          ),
        ).toFloat32Array();
        expect(alone).toEqual(all.subarray(b * H * D, (b + 1) * H * D));
      }
      // A padding row (null) does not change the others, and gets zeros.
      const padded = T.noGrad(() => T.raggedDecodeAttention(q, caches(seqs, new Set([1, 4])))).toFloat32Array();
      for (let b = 0; b < lengths.length; b++) {
        const row = padded.subarray(b * H * D, (b + 1) * H * D);
        if (b === 1 || b === 4) expect(row.every((x) => x === 0)).toBe(true);
        else expect(row).toEqual(all.subarray(b * H * D, (b + 1) * H * D));
      }
    });

    it(
      backend === "wasm"
        ? "equals attention run per sequence bit for bit (same arithmetic as attn_fwd for one query row)"
        : "equals attention run per sequence",
      () => {
        const q = new T.Tensor(qData, [lengths.length, H, 1, D]);
        const out = T.noGrad(() => T.raggedDecodeAttention(q, caches(seqs))).toFloat32Array();
        const old = T.noGrad(() => perSequence(q, seqs));
        if (backend === "wasm") expect(out).toEqual(old);
        else for (let i = 0; i < out.length; i++) expect(Math.abs(out[i] - old[i])).toBeLessThan(1e-6);
      },
    );

    it("skips each row's first `start` positions (left padding) in place: equals attention over [start, length)", () => {
      // Odd sizes and starts, including start = length (nothing visible: zeros) and start 0.
      const starts = [2, 0, 0, 36, 17, 129, 9, 1];
      const q = new T.Tensor(qData, [lengths.length, H, 1, D]);
      const withStart = caches(seqs).map((c, b) => (c ? { ...c, start: starts[b] } : null));
      const out = T.noGrad(() => T.raggedDecodeAttention(q, withStart)).toFloat32Array();
      const shifted = seqs.map((s, b) => {
        const n = s.length - starts[b];
        const part = (x: Float32Array) => {
          const y = new Float32Array(Hkv * s.capacity * D);
          for (let h = 0; h < Hkv; h++)
            y.set(x.subarray((h * s.capacity + starts[b]) * D, (h * s.capacity + s.length) * D), h * s.capacity * D);
          return y;
        };
        return { keys: part(s.keys), values: part(s.values), capacity: s.capacity, length: n };
      });
      const ref = reference(qData, shifted, 1 / Math.sqrt(D));
      for (let i = 0; i < ref.length; i++) expect(Math.abs(out[i] - ref[i])).toBeLessThan(2e-6);
      // The same bits as the kernel run on a copy of the visible positions alone.
      expect(out).toEqual(T.noGrad(() => T.raggedDecodeAttention(q, caches(shifted))).toFloat32Array());
      expect(() =>
        T.raggedDecodeAttention(
          q,
          withStart.map((c) => (c ? { ...c, start: c.length + 1 } : null)),
        ),
      ).toThrow(/start \d+ is outside \[0, length/);
    });
  });
}

describe("raggedDecodeAttention input checks", () => {
  const q = new T.Tensor(qData.slice(0, 2 * H * D), [2, H, 1, D]);
  const two = caches(seqs.slice(0, 2));
  it("names what is wrong", () => {
    expect(() => T.raggedDecodeAttention(q, two.slice(0, 1))).toThrow(/1 caches for a batch of 2/);
    expect(() => T.raggedDecodeAttention(T.reshape(q, [2, H, D]), two)).toThrow(/q must be \[B, H, 1, D\]/);
    const tooLong = [{ ...(two[0] as T.RaggedKV), length: seqs[0].capacity + 1 }, two[1]];
    expect(() => T.raggedDecodeAttention(q, tooLong)).toThrow(/outside \[0, capacity/);
    const wrongDim = [{ ...(two[0] as T.RaggedKV), keys: T.zeros([1, Hkv, 4, D + 1]) }, two[1]];
    expect(() => T.raggedDecodeAttention(q, wrongDim)).toThrow(T.ShapeError);
    const g = new T.Tensor(qData.slice(0, 2 * H * D), [2, H, 1, D]);
    g.requiresGrad = true;
    expect(() => T.raggedDecodeAttention(g, two)).toThrow(/inference only/);
    expect(T.noGrad(() => T.raggedDecodeAttention(g, two)).shape).toEqual([2, H, 1, D]);
  });
});

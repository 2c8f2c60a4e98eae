// WebGPU kernels against the js reference kernels on fresh random inputs, odd shapes included
// (sizes that are not multiples of the GEMM tile, the row workgroup or the attention tiles).
import { afterAll, describe, expect, it } from "vitest";
import type { AttentionShape, MatmulShape, RopeShape } from "../../src/backend.js";
import { jsKernels as js } from "../../src/backends/js/index.js";
import * as G from "../../src/backends/webgpu/kernels/generic.js";
import * as K from "../../src/backends/webgpu/kernels/index.js";
import type { GpuArray, HostArray, WebGPURuntime } from "../../src/backends/webgpu/runtime.js";
import { randomArray } from "../helpers.js";
import { openWebGPU, reportMissing } from "./setup.js";

const suite = await openWebGPU();

/** Elementwise |a − b| ≤ atol + rtol·|b|, equal infinities allowed; names the worst index. */
function close(actual: ArrayLike<number>, expected: ArrayLike<number>, rtol: number, atol: number, what: string) {
  expect(actual.length, `${what}: length`).toBe(expected.length);
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i];
    const e = expected[i];
    if (a === e) continue;
    const ok = Math.abs(a - e) <= atol + rtol * Math.abs(e);
    if (!ok) throw new Error(`${what}: mismatch at ${i}: webgpu ${a} js ${e} (rtol ${rtol}, atol ${atol})`);
  }
}

function toBf16(x: Float32Array): Uint16Array {
  const bits = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const out = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = (bits[i] + 0x7fff + ((bits[i] >> 16) & 1)) >>> 16;
  return out;
}

if (!reportMissing(suite)) {
  const rt = suite.runtime as WebGPURuntime;
  afterAll(() => rt.destroy());
  const up = (a: HostArray, dtype: GpuArray["dtype"] = "f32") => rt.upload(a, dtype);
  const read = async (a: GpuArray) => (await rt.read(a)) as Float32Array;

  describe(`webgpu kernels on ${rt.info.adapterName}`, () => {
    const matmulCases: MatmulShape[] = [
      { batch: 1, m: 67, n: 45, k: 33 },
      { batch: 3, m: 70, n: 129, k: 17, transA: true, transB: true },
      { batch: 2, m: 5, n: 7, k: 100, transA: true },
      { batch: 2, m: 65, n: 66, k: 131, transB: true, accumulate: true },
      { batch: 4, m: 9, n: 13, k: 11, batchStrideA: 0 },
      { batch: 1, m: 1, n: 300, k: 64, transB: true },
    ];
    for (const shape of matmulCases) {
      it(`matmul ${JSON.stringify(shape)}`, async () => {
        const { batch, m, n, k } = shape;
        const sA = shape.batchStrideA ?? m * k;
        const a = randomArray(sA === 0 ? m * k : batch * m * k);
        const b = randomArray(batch * k * n);
        const init = randomArray(batch * m * n);
        const ref = init.slice();
        js.matmul(a, b, ref, shape);
        const out = up(init);
        K.gpuMatmul(rt, up(a), up(b), out, shape);
        close(await read(out), ref, 1e-4, 1e-5, "matmul");
      });
    }

    it("matmul with bf16 and f16 B packed two per word (odd k·n, transposed and not)", async () => {
      for (const transB of [false, true]) {
        const shape = { batch: 2, m: 37, n: 29, k: 19, transB };
        const a = randomArray(2 * 37 * 19);
        const bBits = toBf16(randomArray(2 * 19 * 29));
        const ref = new Float32Array(2 * 37 * 29);
        js.matmulBf16B(a, bBits, ref, shape);
        const out = rt.alloc("f32", ref.length);
        K.gpuMatmul(rt, up(a), up(bBits, "bf16"), out, shape);
        close(await read(out), ref, 1e-4, 1e-5, "matmul bf16");
        // f16: widen on the host for the reference.
        const bF = randomArray(2 * 19 * 29);
        const f16 = new Uint16Array(bF.length);
        const wide = new Float32Array(bF.length);
        for (let i = 0; i < bF.length; i++) {
          f16[i] = f32ToF16(bF[i]);
          wide[i] = f16ToF32(f16[i]);
        }
        const ref16 = new Float32Array(ref.length);
        js.matmul(a, wide, ref16, shape);
        const out16 = rt.alloc("f32", ref.length);
        K.gpuMatmul(rt, up(a), up(f16, "f16"), out16, shape);
        close(await read(out16), ref16, 1e-4, 1e-5, "matmul f16");
      }
    });

    it("matmul in f16 arithmetic (shader-f16) stays within f16 precision", async () => {
      if (!rt.info.shaderF16) return expect(rt.info.shaderF16).toBe(false);
      const shape = { batch: 1, m: 70, n: 40, k: 64 };
      const a = randomArray(70 * 64);
      const b = randomArray(64 * 40);
      const ref = new Float32Array(70 * 40);
      js.matmul(a, b, ref, shape);
      const out = rt.alloc("f32", ref.length);
      K.gpuMatmul(rt, up(a), up(b), out, shape, { f16Math: true });
      close(await read(out), ref, 2e-2, 5e-2, "matmul f16 math");
    });

    it("matmul, cross-entropy, softmax and embedding rows chunk operands larger than one storage binding", async () => {
      // A runtime binding at most 64 KiB reaches every array below through several windows.
      const small = await openWebGPU({ maxStorageBindingBytes: 64 << 10 });
      const srt = small.runtime as WebGPURuntime;
      try {
        for (const shape of [
          { batch: 1, m: 40, n: 1500, k: 24, transB: true },
          { batch: 1, m: 70, n: 33, k: 700 },
          { batch: 3, m: 50, n: 200, k: 9, transA: true },
        ]) {
          const { batch, m, n, k } = shape;
          const a = randomArray(batch * m * k);
          const bBits = toBf16(randomArray(batch * k * n));
          const ref = new Float32Array(batch * m * n);
          js.matmulBf16B(a, bBits, ref, shape);
          const out = srt.alloc("f32", ref.length);
          K.gpuMatmul(srt, srt.upload(a, "f32"), srt.upload(bBits, "bf16"), out, shape);
          close((await srt.read(out)) as Float32Array, ref, 1e-4, 1e-5, `chunked matmul ${JSON.stringify(shape)}`);
        }
        const rows = 7;
        const vocab = 5003; // 20 KB per row: three rows per window
        const logits = randomArray(rows * vocab, -5, 5);
        const targets = Int32Array.from({ length: rows }, (_, i) => (i * 1013) % vocab);
        const [loss, lse] = [new Float32Array(rows), new Float32Array(rows)];
        const dl = new Float32Array(rows * vocab);
        const gradLoss = randomArray(rows);
        js.crossEntropyForward(logits, targets, loss, lse, rows, vocab, -100);
        js.crossEntropyBackward(logits, targets, lse, gradLoss, dl, rows, vocab, -100);
        const gl = srt.upload(logits, "f32");
        const gt = srt.upload(targets, "i32");
        const [gloss, glse, gdl] = [srt.alloc("f32", rows), srt.alloc("f32", rows), srt.alloc("f32", rows * vocab)];
        K.gpuCrossEntropyForward(srt, gl, gt, gloss, glse, rows, vocab, -100);
        K.gpuCrossEntropyBackward(srt, gl, gt, glse, srt.upload(gradLoss, "f32"), gdl, rows, vocab, -100);
        close((await srt.read(gloss)) as Float32Array, loss, 1e-5, 1e-5, "chunked ce loss");
        close((await srt.read(gdl)) as Float32Array, dl, 1e-4, 1e-6, "chunked ce dlogits");
        const probs = new Float32Array(rows * vocab);
        js.softmaxRows(logits, probs, lse, rows, vocab);
        K.gpuSoftmaxRows(srt, gl, gl, glse, rows, vocab);
        close((await srt.read(gl)) as Float32Array, probs, 1e-5, 1e-7, "chunked softmax in place");
        // Embedding tables larger than one binding: lookups and their scatter-add gradient in row windows.
        const tableRows = 300;
        const d = 70; // 300 × 70 f32 = 84 KB (two windows); as bf16 42 KB (one)
        const ids = Int32Array.from([299, 0, 150, 299, 7, 233, 150]);
        for (const dtype of ["f32", "bf16"] as const) {
          const values = randomArray(tableRows * d);
          const table = dtype === "f32" ? values : toBf16(values);
          const shape = { count: ids.length, rowLen: d, tableRows, dtype };
          const want = new Float32Array(ids.length * d);
          js.gatherRows(table, ids, want, shape);
          const got = srt.alloc("f32", ids.length * d);
          G.gpuGatherRows(srt, srt.upload(table, dtype), srt.upload(ids, "i32"), got, shape);
          close((await srt.read(got)) as Float32Array, want, 0, 0, `chunked gatherRows ${dtype}`);
        }
        const src = randomArray(ids.length * d);
        const base = randomArray(tableRows * d);
        const want = base.slice();
        js.scatterAddRows(src, ids, want, ids.length, d);
        const out = srt.upload(base, "f32");
        G.gpuScatterAddRows(srt, srt.upload(src, "f32"), srt.upload(ids, "i32"), out, ids.length, d);
        close((await srt.read(out)) as Float32Array, want, 1e-6, 1e-6, "chunked scatterAddRows");
      } finally {
        srt.destroy();
      }
    });

    for (const [rows, dim, zc] of [
      [7, 33, false],
      [130, 300, true],
    ] as const) {
      it(`rmsNorm fwd/bwd rows=${rows} dim=${dim} zeroCentered=${zc}`, async () => {
        const x = randomArray(rows * dim);
        const w = randomArray(dim);
        const g = randomArray(rows * dim);
        const out = new Float32Array(rows * dim);
        const rstd = new Float32Array(rows);
        js.rmsNorm(x, w, out, rstd, dim, 1e-6, zc);
        const dx = new Float32Array(rows * dim);
        const dw = new Float32Array(dim);
        js.rmsNormBackward(x, w, rstd, g, dx, dw, dim, zc);
        const [gx, gw, gg] = [up(x), up(w), up(g)];
        const [gout, grstd, gdx, gdw] = [
          rt.alloc("f32", rows * dim),
          rt.alloc("f32", rows),
          rt.alloc("f32", rows * dim),
          rt.alloc("f32", dim),
        ];
        K.gpuRmsNorm(rt, gx, gw, gout, grstd, dim, 1e-6, zc);
        K.gpuRmsNormBackward(rt, gx, gw, grstd, gg, gdx, gdw, dim, zc);
        close(await read(gout), out, 1e-5, 1e-6, "rmsNorm out");
        close(await read(grstd), rstd, 1e-5, 1e-6, "rmsNorm rstd");
        close(await read(gdx), dx, 1e-4, 1e-5, "rmsNorm dx");
        close(await read(gdw), dw, 1e-4, 1e-5, "rmsNorm dw");
      });
    }

    const ropeCases: RopeShape[] = [
      { batch: 2, heads: 3, seq: 5, headDim: 8, rotaryDim: 8, perBatch: false },
      { batch: 2, heads: 3, seq: 7, headDim: 10, rotaryDim: 6, perBatch: true, headsLast: true },
      { batch: 1, heads: 4, seq: 9, headDim: 12, rotaryDim: 4, perBatch: false, headsLast: true },
    ];
    for (const shape of ropeCases) {
      it(`rope fwd/bwd ${JSON.stringify(shape)}`, async () => {
        const { batch: B, heads: H, seq: T, headDim: D, rotaryDim, perBatch } = shape;
        const n = B * H * T * D;
        const cosRows = (perBatch ? B * T : T) * (rotaryDim / 2);
        const x = randomArray(n);
        const cos = randomArray(cosRows);
        const sin = randomArray(cosRows);
        const dOut = randomArray(n);
        const out = new Float32Array(n);
        const dx = new Float32Array(n);
        js.ropeForward(x, cos, sin, out, shape);
        js.ropeBackward(dOut, cos, sin, dx, shape);
        const [gc, gs] = [up(cos), up(sin)];
        const gout = rt.alloc("f32", n);
        const gdx = rt.alloc("f32", n);
        K.gpuRopeForward(rt, up(x), gc, gs, gout, shape);
        K.gpuRopeBackward(rt, up(dOut), gc, gs, gdx, shape);
        close(await read(gout), out, 1e-6, 1e-6, "rope out");
        close(await read(gdx), dx, 1e-6, 1e-6, "rope dx");
        if (!shape.headsLast) {
          // In place (out = x), as the reference allows.
          const gx = up(x);
          K.gpuRopeForward(rt, gx, gc, gs, gx, shape);
          close(await read(gx), out, 1e-6, 1e-6, "rope in place");
        }
      });
    }

    it("swiglu fwd/bwd (1,001 elements)", async () => {
      const n = 1001;
      const [g, u, d] = [randomArray(n, -4, 4), randomArray(n), randomArray(n)];
      const [out, sig, dg, du] = [0, 0, 0, 0].map(() => new Float32Array(n));
      js.swigluForward(g, u, out, sig);
      js.swigluBackward(g, u, sig, d, dg, du);
      const [gg, gu, gd] = [up(g), up(u), up(d)];
      const [o2, s2, dg2, du2] = [0, 0, 0, 0].map(() => rt.alloc("f32", n));
      K.gpuSwigluForward(rt, gg, gu, o2, s2);
      K.gpuSwigluBackward(rt, gg, gu, s2, gd, dg2, du2);
      close(await read(o2), out, 1e-5, 1e-6, "swiglu out");
      close(await read(s2), sig, 1e-5, 1e-6, "swiglu sig");
      close(await read(dg2), dg, 1e-5, 1e-6, "swiglu dgate");
      close(await read(du2), du, 1e-5, 1e-6, "swiglu dup");
    });

    it("adamw three steps (70,001 elements)", async () => {
      const n = 70001;
      const p = randomArray(n);
      const m = new Float32Array(n);
      const v = new Float32Array(n);
      const [gp, gm, gv] = [up(p), up(m), up(v)];
      for (let t = 1; t <= 3; t++) {
        const g = randomArray(n);
        const step = {
          beta1: 0.9,
          beta2: 0.999,
          eps: 1e-8,
          stepSize: 1e-2 / (1 - 0.9 ** t),
          bc2Sqrt: Math.sqrt(1 - 0.999 ** t),
          decay: 1 - 1e-2 * 0.1,
        };
        js.adamwUpdate(p, g, m, v, step);
        K.gpuAdamwUpdate(rt, gp, up(g), gm, gv, step);
      }
      close(await read(gp), p, 1e-5, 1e-6, "adamw param");
      close(await read(gm), m, 1e-5, 1e-6, "adamw m");
      close(await read(gv), v, 1e-5, 1e-7, "adamw v");
    });

    it("cross-entropy fwd/bwd with ignored rows (vocab 1,001)", async () => {
      const rows = 9;
      const vocab = 1001;
      const logits = randomArray(rows * vocab, -5, 5);
      const targets = Int32Array.from({ length: rows }, (_, i) => (i === 3 ? -100 : (i * 337) % vocab));
      const gradLoss = randomArray(rows);
      const [loss, lse] = [new Float32Array(rows), new Float32Array(rows)];
      const dl = new Float32Array(rows * vocab);
      js.crossEntropyForward(logits, targets, loss, lse, rows, vocab, -100);
      js.crossEntropyBackward(logits, targets, lse, gradLoss, dl, rows, vocab, -100);
      const [gl, gt] = [up(logits), up(targets, "i32")];
      const [gloss, glse, gdl] = [rt.alloc("f32", rows), rt.alloc("f32", rows), rt.alloc("f32", rows * vocab)];
      K.gpuCrossEntropyForward(rt, gl, gt, gloss, glse, rows, vocab, -100);
      K.gpuCrossEntropyBackward(rt, gl, gt, glse, up(gradLoss), gdl, rows, vocab, -100);
      close(await read(gloss), loss, 1e-5, 1e-5, "ce loss");
      close(await read(glse), lse, 1e-5, 1e-5, "ce lse");
      close(await read(gdl), dl, 1e-4, 1e-6, "ce dlogits");
    });

    it("softmaxRows with row scales, separate and in place", async () => {
      const rows = 5;
      const vocab = 777;
      const logits = randomArray(rows * vocab, -6, 6);
      const scale = randomArray(rows);
      const probs = new Float32Array(rows * vocab);
      const lse = new Float32Array(rows);
      js.softmaxRows(logits, probs, lse, rows, vocab, scale);
      const gl = up(logits);
      const [gp, glse] = [rt.alloc("f32", rows * vocab), rt.alloc("f32", rows)];
      K.gpuSoftmaxRows(rt, gl, gp, glse, rows, vocab, up(scale));
      close(await read(gp), probs, 1e-5, 1e-7, "softmax probs");
      close(await read(glse), lse, 1e-5, 1e-5, "softmax lse");
      K.gpuSoftmaxRows(rt, gl, gl, glse, rows, vocab, up(scale));
      close(await read(gl), probs, 1e-5, 1e-7, "softmax in place");
    });

    for (const reverse of [false, true]) {
      it(`klDivergenceRows reverse=${reverse} with teacher rows and gradient scales`, async () => {
        const rows = 6;
        const vocab = 513;
        const shape = { rows, vocab, scale: 0.7, reverse };
        const student = randomArray(rows * vocab, -4, 4);
        const teacher = randomArray(4 * vocab, -4, 4);
        const teacherRows = Int32Array.from([3, 0, 1, 2, 2, 0]);
        const gs = randomArray(rows);
        const grad = new Float32Array(rows * vocab);
        const [loss, ls, lt] = [new Float32Array(rows), new Float32Array(rows), new Float32Array(rows)];
        js.klDivergenceRows(student, teacher, teacherRows, grad, loss, ls, lt, shape, gs);
        const ggrad = rt.alloc("f32", rows * vocab);
        const [gloss, gls, glt] = [rt.alloc("f32", rows), rt.alloc("f32", rows), rt.alloc("f32", rows)];
        K.gpuKlDivergenceRows(
          rt,
          up(student),
          up(teacher),
          up(teacherRows, "i32"),
          ggrad,
          gloss,
          gls,
          glt,
          shape,
          up(gs),
        );
        close(await read(gloss), loss, 1e-3, 2e-5, "kl loss");
        close(await read(gls), ls, 1e-5, 1e-5, "kl lseS");
        close(await read(glt), lt, 1e-5, 1e-5, "kl lseT");
        close(await read(ggrad), grad, 1e-3, 1e-6, "kl grad");
        // Without gradient and teacher rows.
        const [l2, ls2, lt2] = [new Float32Array(rows), new Float32Array(rows), new Float32Array(rows)];
        const t2 = randomArray(rows * vocab, -4, 4);
        js.klDivergenceRows(student, t2, null, null, l2, ls2, lt2, shape);
        K.gpuKlDivergenceRows(rt, up(student), up(t2), null, null, gloss, gls, glt, shape);
        close(await read(gloss), l2, 1e-3, 2e-5, "kl loss (no grad)");
      });
    }

    const attentionCases: (AttentionShape & { mask: boolean })[] = [
      { batch: 2, heads: 4, kvHeads: 2, tq: 13, tk: 13, headDim: 8, scale: 0.35, causal: true, mask: false },
      { batch: 2, heads: 2, kvHeads: 1, tq: 70, tk: 70, headDim: 16, scale: 0.25, causal: true, mask: true },
      { batch: 1, heads: 3, kvHeads: 3, tq: 5, tk: 37, headDim: 12, scale: 0.3, causal: true, mask: false },
      { batch: 2, heads: 2, kvHeads: 2, tq: 9, tk: 9, headDim: 6, scale: 0.4, causal: false, mask: true },
    ];
    for (const { mask, ...shape } of attentionCases) {
      it(`attention fwd/bwd ${JSON.stringify({ ...shape, mask })}`, async () => {
        const { batch: B, heads: H, kvHeads: Hkv, tq, tk, headDim: D } = shape;
        const q = randomArray(B * H * tq * D);
        const k = randomArray(B * Hkv * tk * D);
        const v = randomArray(B * Hkv * tk * D);
        const dOut = randomArray(B * H * tq * D);
        let keyMask: Uint8Array | null = null;
        if (mask) {
          keyMask = new Uint8Array(B * tk).fill(1);
          for (let j = 0; j < 3; j++) keyMask[j] = 0; // left padding of batch 0: its first queries see nothing
          keyMask[tk + 4] = 0;
        }
        const out = new Float32Array(B * H * tq * D);
        const lse = new Float32Array(B * H * tq);
        js.attentionForward(q, k, v, keyMask, out, lse, shape);
        const [dq, dk, dv] = [new Float32Array(q.length), new Float32Array(k.length), new Float32Array(v.length)];
        js.attentionBackward(q, k, v, keyMask, out, lse, dOut, dq, dk, dv, shape);
        const [gq, gk, gv] = [up(q), up(k), up(v)];
        const gm = keyMask ? up(keyMask, "u8") : null;
        const [gout, glse] = [rt.alloc("f32", out.length), rt.alloc("f32", lse.length)];
        K.gpuAttentionForward(rt, gq, gk, gv, gm, gout, glse, shape);
        const [gdq, gdk, gdv] = [rt.alloc("f32", q.length), rt.alloc("f32", k.length), rt.alloc("f32", v.length)];
        K.gpuAttentionBackward(rt, gq, gk, gv, gm, gout, glse, up(dOut), gdq, gdk, gdv, shape);
        close(await read(gout), out, 1e-4, 1e-5, "attention out");
        close(await read(glse), lse, 1e-5, 1e-5, "attention lse");
        close(await read(gdq), dq, 1e-3, 1e-5, "attention dq");
        close(await read(gdk), dk, 1e-3, 1e-5, "attention dk");
        close(await read(gdv), dv, 1e-3, 1e-5, "attention dv");
      });
    }

    it("pool reuses released buffers and counts live bytes", () => {
      const before = rt.liveBytes;
      const a = rt.alloc("f32", 1000);
      expect(rt.liveBytes - before).toBeGreaterThanOrEqual(4000);
      rt.release(a);
      rt.flush();
      expect(rt.liveBytes).toBe(before);
      const b = rt.alloc("f32", 1000);
      expect(b.buffer).toBe(a.buffer);
      rt.release(b);
    });
  });
}

function f32ToF16(x: number): number {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  const mant = u & 0x7fffff;
  if (exp <= 0) return sign | (Math.round((mant | 0x800000) / 2 ** (14 - exp)) >> 0);
  return sign | (exp << 10) | Math.round(mant / 8192);
}

function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

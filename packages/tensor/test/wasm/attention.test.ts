// Fused attention against a float64 reference that materialises the score matrix.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ShapeError } from "../../src/errors.js";
import type { AttentionShape as BackendAttentionShape } from "../../src/backend.js";
import { makeTiledAttention } from "../../src/backends/attention-gemm.js";
import { type AttentionShape, type WasmKernels, createWasmKernels } from "../../src/wasm/index.js";
import { expectDecodeBitsOfForward } from "./decode-bits.js";
import { randomF32, rng } from "./reference.js";

const SEED = Date.now() % 1_000_000;
const next = rng(SEED);

function attentionRef(q: Float32Array, k: Float32Array, v: Float32Array, dout: Float32Array, s: AttentionShape) {
  const { batch, heads, tq, tk, dim } = s;
  const kvHeads = s.kvHeads ?? heads;
  const scale = s.scale ?? 1 / Math.sqrt(dim);
  const out = new Float64Array(batch * heads * tq * dim);
  const lse = new Float64Array(batch * heads * tq);
  const dq = new Float64Array(out.length);
  const dk = new Float64Array(batch * kvHeads * tk * dim);
  const dv = new Float64Array(dk.length);
  for (let b = 0; b < batch; b++)
    for (let h = 0; h < heads; h++) {
      const kv = b * kvHeads + Math.floor(h / (heads / kvHeads));
      const qo = (b * heads + h) * tq * dim;
      const ko = kv * tk * dim;
      for (let i = 0; i < tq; i++) {
        const visible = (j: number) => !s.causal || j <= i + tk - tq;
        const sc = new Float64Array(tk).fill(Number.NEGATIVE_INFINITY);
        for (let j = 0; j < tk; j++) {
          if (!visible(j)) continue;
          let d = 0;
          for (let c = 0; c < dim; c++) d += q[qo + i * dim + c] * k[ko + j * dim + c];
          sc[j] = d * scale;
        }
        const mx = Math.max(...sc);
        const row = (b * heads + h) * tq + i;
        if (mx === Number.NEGATIVE_INFINITY) {
          lse[row] = Number.NEGATIVE_INFINITY;
          continue;
        }
        let sum = 0;
        for (let j = 0; j < tk; j++) sum += Math.exp(sc[j] - mx);
        lse[row] = mx + Math.log(sum);
        const p = Array.from(sc, (x) => Math.exp(x - lse[row]));
        for (let j = 0; j < tk; j++) for (let c = 0; c < dim; c++) out[qo + i * dim + c] += p[j] * v[ko + j * dim + c];
        // backward with the textbook formulas: dP = dO·Vᵀ, dS = P ∘ (dP − Σ_j P dP)
        const dp = p.map((_, j) => {
          let d = 0;
          for (let c = 0; c < dim; c++) d += dout[qo + i * dim + c] * v[ko + j * dim + c];
          return d;
        });
        const pdp = p.reduce((acc, pj, j) => acc + pj * dp[j], 0);
        for (let j = 0; j < tk; j++) {
          const ds = p[j] * (dp[j] - pdp) * scale;
          for (let c = 0; c < dim; c++) {
            dq[qo + i * dim + c] += ds * k[ko + j * dim + c];
            dk[ko + j * dim + c] += ds * q[qo + i * dim + c];
            dv[ko + j * dim + c] += p[j] * dout[qo + i * dim + c];
          }
        }
      }
    }
  return { out, lse, dq, dk, dv };
}

function maxAbs(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let e = 0;
  for (let i = 0; i < want.length; i++) {
    if (want[i] === got[i]) continue; // equal infinities
    e = Math.max(e, Math.abs(got[i] - want[i]));
  }
  return e;
}

const cases: AttentionShape[] = [
  { batch: 1, heads: 1, tq: 1, tk: 1, dim: 1 },
  { batch: 1, heads: 2, tq: 5, tk: 5, dim: 5, causal: true },
  { batch: 2, heads: 4, kvHeads: 2, tq: 3, tk: 7, dim: 8, causal: true }, // GQA, queries at the end of the keys
  { batch: 1, heads: 3, kvHeads: 1, tq: 6, tk: 9, dim: 6, scale: 0.3 },
  { batch: 1, heads: 1, tq: 4, tk: 2, dim: 4, causal: true }, // the first rows see no key
  { batch: 2, heads: 4, tq: 32, tk: 32, dim: 16, causal: true }, // large enough to split across threads
  { batch: 1, heads: 2, kvHeads: 1, tq: 70, tk: 75, dim: 9, causal: true }, // two query blocks of the GEMM path
  { batch: 1, heads: 1, tq: 70, tk: 3, dim: 4, causal: true }, // a whole query block that sees no key
  { batch: 1, heads: 1, tq: 3, tk: 2100, dim: 3, causal: true }, // keys cross the GEMM's NC = 2048 block
  { batch: 1, heads: 2, tq: 5, tk: 6, dim: 300 }, // head size crosses the GEMM's KC = 256 block
];

describe.each([1, 2])("wasm fused attention, threads=%i", (threads) => {
  let kernels: WasmKernels;
  beforeAll(async () => {
    kernels = await createWasmKernels({ threads });
  });
  afterAll(() => kernels.dispose());

  for (const shape of cases)
    it(`forward + backward ${JSON.stringify(shape)} (seed ${SEED})`, () => {
      const kvHeads = shape.kvHeads ?? shape.heads;
      const qLen = shape.batch * shape.heads * shape.tq * shape.dim;
      const kvLen = shape.batch * kvHeads * shape.tk * shape.dim;
      const q = randomF32(qLen, next, 2);
      const k = randomF32(kvLen, next, 2);
      const v = randomF32(kvLen, next);
      const dout = randomF32(qLen, next);
      const out = new Float32Array(qLen).fill(Number.NaN);
      const lse = new Float32Array(qLen / shape.dim).fill(Number.NaN);
      kernels.attentionForward(q, k, v, out, lse, shape);
      const dq = new Float32Array(qLen).fill(Number.NaN);
      const dk = new Float32Array(kvLen).fill(Number.NaN);
      const dv = new Float32Array(kvLen).fill(Number.NaN);
      kernels.attentionBackward(q, k, v, out, dout, lse, dq, dk, dv, shape);
      const want = attentionRef(q, k, v, dout, shape);
      expect(maxAbs(lse, want.lse)).toBeLessThan(1e-5);
      expect(maxAbs(out, want.out)).toBeLessThan(1e-5);
      expect(maxAbs(dq, want.dq)).toBeLessThan(1e-4);
      expect(maxAbs(dk, want.dk)).toBeLessThan(1e-4);
      expect(maxAbs(dv, want.dv)).toBeLessThan(1e-5);
    });

  it(`decode rows (attentionDecodeRagged) have attentionForward's bits: odd and > 256 head sizes, > 256 keys (seed ${SEED})`, () => {
    expectDecodeBitsOfForward(kernels, SEED + threads);
  });

  it("rejects kvHeads that do not divide heads and short arrays", () => {
    const a = new Float32Array(64);
    expect(() =>
      kernels.attentionForward(a, a, a, a, a, { batch: 1, heads: 3, kvHeads: 2, tq: 2, tk: 2, dim: 2 }),
    ).toThrow(/kvHeads=2 must divide heads=3/);
    expect(() =>
      kernels.attentionForward(a, new Float32Array(3), a, a, a, { batch: 1, heads: 1, tq: 2, tk: 2, dim: 2 }),
    ).toThrow(ShapeError);
  });
});

// The native backend's attention: products on a GEMM (here wasm's; BLAS in the backend), softmax, exp and dS
// in the module's tile kernels, on arrays resident in the module's memory.
describe("GEMM-tiled attention with the module's softmax tiles", () => {
  let kernels: WasmKernels;
  beforeAll(async () => {
    kernels = await createWasmKernels({ threads: 1 });
  });
  afterAll(() => kernels.dispose());

  const resident = (src: ArrayLike<number> | number) => {
    const n = typeof src === "number" ? src : src.length;
    const a = new Float32Array(kernels.wasmHeap.buffer(), kernels.wasmHeap.alloc(n * 4, false), n);
    if (typeof src === "number") a.fill(Number.NaN);
    else a.set(src);
    return a;
  };

  for (const shape of cases)
    for (const tileElements of [64, 1 << 18])
      it(`forward + backward ${JSON.stringify(shape)}, tiles of ${tileElements} (seed ${SEED})`, () => {
        const kvHeads = shape.kvHeads ?? shape.heads;
        const qLen = shape.batch * shape.heads * shape.tq * shape.dim;
        const kvLen = shape.batch * kvHeads * shape.tk * shape.dim;
        const q = resident(randomF32(qLen, next, 2));
        const k = resident(randomF32(kvLen, next, 2));
        const v = resident(randomF32(kvLen, next));
        const dout = resident(randomF32(qLen, next));
        const out = resident(qLen);
        const lse = resident(qLen / shape.dim);
        const dq = resident(qLen);
        const dk = resident(kvLen);
        const dv = resident(kvLen);
        const s: BackendAttentionShape = {
          batch: shape.batch,
          heads: shape.heads,
          kvHeads,
          tq: shape.tq,
          tk: shape.tk,
          headDim: shape.dim,
          scale: shape.scale ?? 1 / Math.sqrt(shape.dim),
          causal: shape.causal ?? false,
        };
        const tiled = makeTiledAttention(kernels.matmul.bind(kernels), kernels.attentionTiles, tileElements);
        expect(tiled.forward(q, k, v, out, lse, s)).toBe(true);
        expect(tiled.backward(q, k, v, out, lse, dout, dq, dk, dv, s)).toBe(true);
        const want = attentionRef(q, k, v, dout, shape);
        expect(maxAbs(lse, want.lse)).toBeLessThan(1e-5);
        expect(maxAbs(out, want.out)).toBeLessThan(1e-5);
        expect(maxAbs(dq, want.dq)).toBeLessThan(1e-4);
        expect(maxAbs(dk, want.dk)).toBeLessThan(1e-4);
        expect(maxAbs(dv, want.dv)).toBeLessThan(1e-5);
      });

  // With a worker, each tile's softmax / exp / dS runs there while this thread runs the neighbouring tiles'
  // products (here the module's GEMM, which runs these small ones on the calling thread): the products and the
  // dk/dv sums keep their order, so every output must equal the one-thread run bit for bit.
  it("with two threads the tiles overlap the products and give the one-thread bits", async () => {
    const two = await createWasmKernels({ threads: 2 });
    try {
      const shape = { batch: 2, heads: 4, kvHeads: 2, tq: 40, tk: 40, dim: 16, causal: true };
      const kvHeads = shape.kvHeads;
      const qLen = shape.batch * shape.heads * shape.tq * shape.dim;
      const kvLen = shape.batch * kvHeads * shape.tk * shape.dim;
      const inputs = [
        randomF32(qLen, next, 2),
        randomF32(kvLen, next, 2),
        randomF32(kvLen, next),
        randomF32(qLen, next),
      ];
      const s: BackendAttentionShape = { ...shape, headDim: shape.dim, scale: 0.25 };
      const run = (kk: WasmKernels, tileElements: number) => {
        const res = (src: ArrayLike<number> | number) => {
          const n = typeof src === "number" ? src : src.length;
          const a = new Float32Array(kk.wasmHeap.buffer(), kk.wasmHeap.alloc(n * 4, false), n);
          if (typeof src === "number") a.fill(Number.NaN);
          else a.set(src);
          return a;
        };
        const [q, k, v, dout] = inputs.map(res);
        const [out, lse, dq, dk, dv] = [res(qLen), res(qLen / shape.dim), res(qLen), res(kvLen), res(kvLen)];
        const tiled = makeTiledAttention(kk.matmul.bind(kk), kk.attentionTiles, tileElements);
        expect(tiled.forward(q, k, v, out, lse, s)).toBe(true);
        expect(tiled.backward(q, k, v, out, lse, dout, dq, dk, dv, s)).toBe(true);
        return { out, lse, dq, dk, dv, ref: attentionRef(q, k, v, dout, shape) };
      };
      for (const tileElements of [16 * 40, 1 << 18]) {
        const one = run(kernels, tileElements);
        const both = run(two, tileElements);
        for (const key of ["out", "lse", "dq", "dk", "dv"] as const)
          expect(Array.from(both[key]), `${key}, tiles of ${tileElements}`).toEqual(Array.from(one[key]));
        expect(maxAbs(both.out, one.ref.out)).toBeLessThan(1e-5);
        expect(maxAbs(both.dk, one.ref.dk)).toBeLessThan(1e-4);
      }
    } finally {
      two.dispose();
    }
  });

  it("declines (returns false, writes nothing) when an array is not resident", () => {
    const tiled = makeTiledAttention(kernels.matmul.bind(kernels), kernels.attentionTiles);
    const s = { batch: 1, heads: 1, kvHeads: 1, tq: 2, tk: 2, headDim: 2, scale: 1, causal: true };
    const out = new Float32Array(4).fill(7);
    expect(tiled.forward(resident(4), resident(4), resident(4), out, resident(2), s)).toBe(false);
    expect(Array.from(out)).toEqual([7, 7, 7, 7]);
  });
});

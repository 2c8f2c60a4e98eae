import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ShapeError } from "../../src/errors.js";
import { type MatmulShape, type WasmKernels, createWasmKernels } from "../../src/wasm/index.js";
import { fromBf16Bits, matmulRef, randomF32, relError, rng, toBf16Bits } from "./reference.js";

const SEED = Date.now() % 1_000_000;
const next = rng(SEED);

function run(kernels: WasmKernels, shape: MatmulShape, bf16 = false) {
  const { batch, m, n, k } = shape;
  const sa = shape.batchStrideA ?? m * k;
  const sb = shape.batchStrideB ?? k * n;
  const aLen = sa * (batch - 1) + m * k;
  const bLen = sb * (batch - 1) + k * n;
  const a = randomF32(aLen, next);
  let b = randomF32(bLen, next);
  const init = randomF32(batch * m * n, next);
  const out = shape.accumulate ? init.slice() : new Float32Array(batch * m * n).fill(Number.NaN);
  if (bf16) {
    const bits = toBf16Bits(b);
    b = fromBf16Bits(bits);
    kernels.matmulBf16B(a, bits, out, shape);
  } else {
    kernels.matmul(a, b, out, shape);
  }
  const want = matmulRef(a, b, shape);
  if (shape.accumulate) for (let i = 0; i < want.length; i++) want[i] += init[i];
  return relError(out, want);
}

/**
 * Σ x[j]·y[j] in f32 as the module's `$dot` forms it: two 4-lane accumulators over blocks of 8, a 4-wide
 * tail into the first, the lanes of their sum added pairwise, then the scalar tail in order.
 */
function simdDot(x: Float32Array, y: Float32Array): number {
  const f = Math.fround;
  const dim = x.length;
  const d8 = dim & ~7;
  const d4 = dim & ~3;
  const acc0 = [0, 0, 0, 0];
  const acc1 = [0, 0, 0, 0];
  for (let j = 0; j < d8; j += 8)
    for (let l = 0; l < 4; l++) {
      acc0[l] = f(acc0[l] + f(x[j + l] * y[j + l]));
      acc1[l] = f(acc1[l] + f(x[j + 4 + l] * y[j + 4 + l]));
    }
  for (let j = d8; j < d4; j += 4) for (let l = 0; l < 4; l++) acc0[l] = f(acc0[l] + f(x[j + l] * y[j + l]));
  const v = acc0.map((a, l) => f(a + acc1[l]));
  let s = f(f(v[0] + v[1]) + f(v[2] + v[3]));
  for (let j = d4; j < dim; j++) s = f(s + f(x[j] * y[j]));
  return s;
}

const sizes: [number, number, number][] = [
  [1, 1, 1],
  [3, 5, 7],
  [4, 8, 4],
  [5, 9, 3],
  [17, 33, 65],
  [130, 70, 300], // crosses KC = 256 (two k blocks) and MC = 128
  [64, 2050, 9], // crosses NC = 2048
];

describe.each([1, 2])("wasm matmul, threads=%i", (threads) => {
  let kernels: WasmKernels;
  beforeAll(async () => {
    kernels = await createWasmKernels({ threads, relaxedSimd: false });
  });
  afterAll(() => kernels.dispose());

  it("reports its configuration", () => {
    expect(kernels.threads).toBe(threads);
    expect(kernels.relaxedSimd).toBe(false);
  });

  for (const [m, n, k] of sizes)
    for (const transA of [false, true])
      for (const transB of [false, true])
        it(`${m}x${n}x${k} transA=${transA} transB=${transB} (seed ${SEED})`, () => {
          expect(run(kernels, { batch: 1, m, n, k, transA, transB })).toBeLessThan(1e-4);
        });

  it(`large enough to split across threads: 96x200x160 (seed ${SEED})`, () => {
    expect(run(kernels, { batch: 1, m: 96, n: 200, k: 160 })).toBeLessThan(1e-4);
    expect(run(kernels, { batch: 1, m: 96, n: 200, k: 160, transA: true, transB: true })).toBeLessThan(1e-4);
  });

  it(`few output rows (the GEMV path): columns or rows split across threads (seed ${SEED})`, () => {
    for (const transA of [false, true])
      for (const transB of [false, true]) {
        expect(run(kernels, { batch: 1, m: 1, n: 2051, k: 1100, transA, transB })).toBeLessThan(1e-4);
        expect(run(kernels, { batch: 8, m: 2, n: 301, k: 500, transA, transB, batchStrideB: 0 })).toBeLessThan(1e-4);
        expect(run(kernels, { batch: 1, m: 3, n: 700, k: 1400, transA, transB, accumulate: true }, true)).toBeLessThan(
          1e-4,
        );
      }
  });

  it(`batched, with broadcast A or B and transposes (seed ${SEED})`, () => {
    expect(run(kernels, { batch: 3, m: 7, n: 6, k: 5 })).toBeLessThan(1e-4);
    expect(run(kernels, { batch: 4, m: 9, n: 13, k: 11, batchStrideA: 0 })).toBeLessThan(1e-4);
    expect(run(kernels, { batch: 4, m: 9, n: 13, k: 11, batchStrideB: 0, transB: true })).toBeLessThan(1e-4);
    expect(run(kernels, { batch: 5, m: 3, n: 40, k: 21, batchStrideA: 0, transA: true })).toBeLessThan(1e-4);
    // many small matrices, split across threads by global row (the split falls inside batch 50)
    expect(run(kernels, { batch: 101, m: 3, n: 64, k: 120 })).toBeLessThan(1e-4);
  });

  it(`strided batches (padding between matrices) (seed ${SEED})`, () => {
    expect(run(kernels, { batch: 3, m: 5, n: 6, k: 7, batchStrideA: 40, batchStrideB: 50 })).toBeLessThan(1e-4);
  });

  it(`accumulate adds into out (seed ${SEED})`, () => {
    expect(run(kernels, { batch: 1, m: 13, n: 17, k: 300, accumulate: true })).toBeLessThan(1e-4);
    expect(run(kernels, { batch: 2, m: 5, n: 3, k: 2, accumulate: true, transA: true, batchStrideB: 0 })).toBeLessThan(
      1e-4,
    );
  });

  it(`bf16 B, all transposes and batching (seed ${SEED})`, () => {
    for (const transA of [false, true])
      for (const transB of [false, true]) {
        expect(run(kernels, { batch: 1, m: 3, n: 5, k: 7, transA, transB }, true)).toBeLessThan(1e-4);
        expect(run(kernels, { batch: 2, m: 33, n: 20, k: 270, transA, transB }, true)).toBeLessThan(1e-4);
      }
    expect(run(kernels, { batch: 3, m: 8, n: 16, k: 9, batchStrideB: 0, accumulate: true }, true)).toBeLessThan(1e-4);
  });

  it(`GEMV rows (m < 4, B stored transposed) sum in the fixed order of the SIMD dot: bit-exact (seed ${SEED})`, () => {
    // Four output columns per pass share the A row; each column's sum must still be the one a single dot forms
    // (decode results may not depend on how many columns a pass takes, or on n mod 4).
    for (const bf16 of [false, true])
      for (const [m, n, k] of [
        [1, 1, 1],
        [1, 7, 13],
        [2, 9, 31],
        [3, 258, 257],
        [1, 131, 1030],
      ])
        for (const accumulate of [false, true]) {
          const a = randomF32(m * k, next);
          let b = randomF32(n * k, next);
          const bits = toBf16Bits(b);
          if (bf16) b = fromBf16Bits(bits);
          const init = randomF32(m * n, next);
          const out = accumulate ? init.slice() : new Float32Array(m * n).fill(Number.NaN);
          const shape = { batch: 1, m, n, k, transB: true, accumulate };
          if (bf16) kernels.matmulBf16B(a, bits, out, shape);
          else kernels.matmul(a, b, out, shape);
          const want = new Float32Array(m * n);
          for (let i = 0; i < m; i++)
            for (let j = 0; j < n; j++) {
              const d = simdDot(a.subarray(i * k, (i + 1) * k), b.subarray(j * k, (j + 1) * k));
              want[i * n + j] = accumulate ? Math.fround(init[i * n + j] + d) : d;
            }
          expect(Array.from(out)).toEqual(Array.from(want));
        }
  });

  it("bf16 B is widened exactly (bits << 16)", () => {
    const bits = new Uint16Array([0x3f80, 0xc000, 0x4049, 0x0000]); // 1, -2, 3.140625, 0
    const out = new Float32Array(4);
    kernels.matmulBf16B(new Float32Array([1]), bits, out, { batch: 1, m: 1, n: 4, k: 1 });
    expect(Array.from(out)).toEqual([1, -2, 3.140625, 0]);
  });

  it("k = 0 gives zeros (or leaves out unchanged with accumulate); empty outputs are fine", () => {
    const out = new Float32Array([5, 5, 5, 5]);
    kernels.matmul(new Float32Array(0), new Float32Array(0), out, { batch: 1, m: 2, n: 2, k: 0, accumulate: true });
    expect(Array.from(out)).toEqual([5, 5, 5, 5]);
    kernels.matmul(new Float32Array(0), new Float32Array(0), out, { batch: 1, m: 2, n: 2, k: 0 });
    expect(Array.from(out)).toEqual([0, 0, 0, 0]);
    kernels.matmul(new Float32Array(3), new Float32Array(0), new Float32Array(0), { batch: 1, m: 3, n: 0, k: 1 });
  });

  it("propagates IEEE specials (NaN, inf) instead of hiding them", () => {
    const out = new Float32Array(2);
    kernels.matmul(new Float32Array([Number.NaN, 1]), new Float32Array([1, 2, 3, 4]), out, {
      batch: 1,
      m: 1,
      n: 2,
      k: 2,
    });
    expect(Number.isNaN(out[0]) && Number.isNaN(out[1])).toBe(true);
  });

  it("rejects arrays that are too short or bad sizes with ShapeError", () => {
    const a = new Float32Array(6);
    expect(() => kernels.matmul(a, new Float32Array(5), new Float32Array(4), { batch: 1, m: 2, n: 2, k: 3 })).toThrow(
      /matmul: B has 5 elements, needs at least 6/,
    );
    expect(() => kernels.matmul(a, new Float32Array(6), new Float32Array(3), { batch: 1, m: 2, n: 2, k: 3 })).toThrow(
      ShapeError,
    );
    expect(() => kernels.matmul(a, a, new Float32Array(4), { batch: 1, m: 2.5, n: 2, k: 3 })).toThrow(
      /m must be a non-negative integer/,
    );
    expect(() =>
      kernels.matmul(new Float32Array(6), new Float32Array(12), new Float32Array(8), { batch: 2, m: 2, n: 2, k: 3 }),
    ).toThrow(/A has 6 elements, needs at least 12/);
  });
});

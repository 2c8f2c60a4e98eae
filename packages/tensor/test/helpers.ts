// Test helpers: float64 references and finite-difference gradient checks.
import { expect } from "vitest";
import { Rng, Tensor, backward, noGrad } from "../src/index.js";

let seedCounter = 1000;

/** Index of the first element whose bits differ (-1: none); toEqual on 100k-element arrays is slow. */
export function firstDifference(x: Float32Array, y: Float32Array): number {
  if (x.length !== y.length) return 0;
  const a = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const b = new Uint32Array(y.buffer, y.byteOffset, y.length);
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return i;
  return -1;
}

/** Fresh random f32 values (never zeros), uniform in [lo, hi). */
export function randomArray(n: number, lo = -1, hi = 1, seed = seedCounter++): Float32Array {
  const u = new Rng(seed).uniform(n);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = lo + (hi - lo) * u[i];
  return out;
}

export function randomTensor(shape: number[], lo = -1, hi = 1, grad = true): Tensor {
  const t = new Tensor(
    randomArray(
      shape.reduce((a, b) => a * b, 1),
      lo,
      hi,
    ),
    shape,
  );
  t.requiresGrad = grad;
  return t;
}

export function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, rtol = 1e-5, atol = 1e-6): void {
  expect(actual.length).toBe(expected.length);
  let worst = 0;
  let worstAt = -1;
  for (let i = 0; i < actual.length; i++) {
    const err = Math.abs(actual[i] - expected[i]) - (atol + rtol * Math.abs(expected[i]));
    if (!(err <= worst)) {
      worst = Number.isNaN(err) ? Number.POSITIVE_INFINITY : err;
      worstAt = i;
    }
  }
  if (worstAt >= 0) {
    throw new Error(
      `mismatch at ${worstAt}: actual ${actual[worstAt]} expected ${expected[worstAt]} (rtol ${rtol}, atol ${atol})`,
    );
  }
}

export type RefFn = (...inputs: Float64Array[]) => Float64Array;

/**
 * Checks an op against a float64 reference (forward) and its gradients against central
 * finite differences of the float64 reference for L = Σ out·r with random r.
 */
export function checkOp(options: {
  inputs: Tensor[];
  op: (...inputs: Tensor[]) => Tensor;
  ref: RefFn;
  rtol?: number;
  atol?: number;
  gradRtol?: number;
  gradAtol?: number;
  eps?: number;
}): void {
  const { inputs, op, ref } = options;
  for (const t of inputs) t.grad = null;
  const out = op(...inputs);
  const ins64 = inputs.map((t) => Float64Array.from(t.toFloat32Array()));
  const expected = ref(...ins64);
  expectClose(out.toFloat32Array(), expected, options.rtol ?? 1e-5, options.atol ?? 1e-6);
  if (!inputs.some((t) => t.requiresGrad)) return;
  const r = randomArray(out.size, -1, 1);
  backward(out, new Tensor(r, out.shape));
  const eps = options.eps ?? 1e-6;
  const loss = (xs: Float64Array[]) => {
    const y = ref(...xs);
    let s = 0;
    for (let i = 0; i < y.length; i++) s += y[i] * r[i];
    return s;
  };
  inputs.forEach((t, k) => {
    if (!t.requiresGrad) return;
    const numeric = new Float64Array(t.size);
    for (let i = 0; i < t.size; i++) {
      const plus = ins64.map((a) => a.slice());
      const minus = ins64.map((a) => a.slice());
      plus[k][i] += eps;
      minus[k][i] -= eps;
      numeric[i] = (loss(plus) - loss(minus)) / (2 * eps);
    }
    expect(t.grad, `input ${k} has no gradient`).not.toBeNull();
    let scale = 0;
    for (const v of numeric) scale = Math.max(scale, Math.abs(v));
    expectClose(
      t.grad!.toFloat32Array(),
      numeric,
      options.gradRtol ?? 1e-3,
      (options.gradAtol ?? 1e-4) * Math.max(1, scale),
    );
  });
}

/** Row-major index helpers for references. */
export function idx(shape: number[], ...coords: number[]): number {
  let o = 0;
  for (let i = 0; i < shape.length; i++) o = o * shape[i] + coords[i];
  return o;
}

export { noGrad };

// The float64 product both native suites check BLAS (whole and split between threads) against.
import type * as T from "../../src/index.js";

/** float64 op(A)·op(B) (+ the initial out when accumulating) per batch. */
export function matmulReference(
  a: Float32Array,
  b: Float32Array,
  initial: Float32Array,
  s: T.MatmulShape,
): Float64Array {
  const { batch, m, n, k } = s;
  const sa = s.batchStrideA ?? m * k;
  const sb = s.batchStrideB ?? k * n;
  const out = new Float64Array(batch * m * n);
  for (let p = 0; p < batch; p++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let acc = s.accumulate ? initial[p * m * n + i * n + j] : 0;
        for (let l = 0; l < k; l++) {
          const av = a[p * sa + (s.transA ? l * m + i : i * k + l)];
          const bv = b[p * sb + (s.transB ? j * k + l : l * n + j)];
          acc += av * bv;
        }
        out[p * m * n + i * n + j] = acc;
      }
  return out;
}

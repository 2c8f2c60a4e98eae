// Plain-JS cache-blocked matmul for the benchmark baseline (js-stack spec §2: 4-row register block,
// KB = 128, NB = 256). Row-major C[m][n] = A[m][k] · B[k][n]; m must be a multiple of 4.

const KB = 128;
const NB = 256;

export function jsBlockedMatmul(a: Float32Array, b: Float32Array, c: Float32Array, m: number, n: number, k: number) {
  c.fill(0, 0, m * n);
  for (let kk = 0; kk < k; kk += KB) {
    const kEnd = Math.min(k, kk + KB);
    for (let jj = 0; jj < n; jj += NB) {
      const jEnd = Math.min(n, jj + NB);
      for (let i = 0; i < m; i += 4) {
        const c0 = i * n;
        const c1 = c0 + n;
        const c2 = c1 + n;
        const c3 = c2 + n;
        for (let p = kk; p < kEnd; p++) {
          const a0 = a[i * k + p];
          const a1 = a[(i + 1) * k + p];
          const a2 = a[(i + 2) * k + p];
          const a3 = a[(i + 3) * k + p];
          const bp = p * n;
          for (let j = jj; j < jEnd; j++) {
            const bv = b[bp + j];
            c[c0 + j] += a0 * bv;
            c[c1 + j] += a1 * bv;
            c[c2 + j] += a2 * bv;
            c[c3 + j] += a3 * bv;
          }
        }
      }
    }
  }
}

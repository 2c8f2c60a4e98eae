import type { MatmulShape } from "../../kernel-contract.js";

/** Reference matmul: packs op(B) to [k][n] per batch, then an i-p-j loop (contiguous inner loop). */
export function matmulJs(a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape): void {
  const { batch, m, n, k } = shape;
  const transA = shape.transA ?? false;
  const transB = shape.transB ?? false;
  const strideA = shape.batchStrideA ?? m * k;
  const strideB = shape.batchStrideB ?? k * n;
  const packedB = transB ? new Float32Array(k * n) : null;
  const rowA = new Float32Array(k);
  for (let bi = 0; bi < batch; bi++) {
    const aOff = bi * strideA;
    const bOff = bi * strideB;
    const oOff = bi * m * n;
    let bk: Float32Array;
    let bBase: number;
    if (packedB) {
      for (let j = 0; j < n; j++) for (let p = 0; p < k; p++) packedB[p * n + j] = b[bOff + j * k + p];
      bk = packedB;
      bBase = 0;
    } else {
      bk = b;
      bBase = bOff;
    }
    for (let i = 0; i < m; i++) {
      if (transA) for (let p = 0; p < k; p++) rowA[p] = a[aOff + p * m + i];
      else for (let p = 0; p < k; p++) rowA[p] = a[aOff + i * k + p];
      const o = oOff + i * n;
      if (!shape.accumulate) out.fill(0, o, o + n);
      for (let p = 0; p < k; p++) {
        const av = rowA[p];
        if (av === 0) continue;
        const br = bBase + p * n;
        for (let j = 0; j < n; j++) out[o + j] += av * bk[br + j];
      }
    }
  }
}

/** B as bf16 bits: widen per batch, then the f32 kernel. */
export function matmulBf16BJs(a: Float32Array, bBits: Uint16Array, out: Float32Array, shape: MatmulShape): void {
  const wide = new Float32Array(bBits.length);
  const wideBits = new Uint32Array(wide.buffer);
  for (let i = 0; i < bBits.length; i++) wideBits[i] = bBits[i] << 16;
  matmulJs(a, wide, out, shape);
}

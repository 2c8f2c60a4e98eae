// Float64 references and seeded inputs for the WASM kernel tests.

/** mulberry32: small seeded PRNG so a failing seed can be replayed. */
export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomF32(n: number, next: () => number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (next() * 2 - 1) * scale;
  return out;
}

export interface RefShape {
  batch: number;
  m: number;
  n: number;
  k: number;
  transA?: boolean;
  transB?: boolean;
  batchStrideA?: number;
  batchStrideB?: number;
}

/** C[b] = A[b]·B[b] in float64, reading A/B with the same layout rules as the kernel. */
export function matmulRef(a: ArrayLike<number>, b: ArrayLike<number>, s: RefShape): Float64Array {
  const { batch, m, n, k } = s;
  const sa = s.batchStrideA ?? m * k;
  const sb = s.batchStrideB ?? k * n;
  const c = new Float64Array(batch * m * n);
  for (let t = 0; t < batch; t++)
    for (let i = 0; i < m; i++)
      for (let j = 0; j < n; j++) {
        let acc = 0;
        for (let p = 0; p < k; p++) {
          const av = a[t * sa + (s.transA ? p * m + i : i * k + p)];
          const bv = b[t * sb + (s.transB ? j * k + p : p * n + j)];
          acc += av * bv;
        }
        c[(t * m + i) * n + j] = acc;
      }
  return c;
}

/** max |got − want| / max(max |want|, 1e-30): the relative error used by every GEMM assertion. */
export function relError(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let err = 0;
  let scale = 1e-30;
  for (let i = 0; i < want.length; i++) {
    err = Math.max(err, Math.abs(got[i] - want[i]));
    scale = Math.max(scale, Math.abs(want[i]));
  }
  if (got.length !== want.length) return Number.POSITIVE_INFINITY;
  return err / scale;
}

/** Rounds f32 values to bfloat16 (round-to-nearest-even) and returns the bit patterns. */
export function toBf16Bits(x: Float32Array): Uint16Array {
  const u32 = new Uint32Array(x.buffer, x.byteOffset, x.length);
  const out = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const v = u32[i];
    out[i] = (v + 0x7fff + ((v >>> 16) & 1)) >>> 16;
  }
  return out;
}

export function fromBf16Bits(bits: Uint16Array): Float32Array {
  const u32 = new Uint32Array(bits.length);
  for (let i = 0; i < bits.length; i++) u32[i] = bits[i] << 16;
  return new Float32Array(u32.buffer);
}

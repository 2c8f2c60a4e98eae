import type { RopeShape } from "../../kernel-contract.js";

/**
 * Rotate-half RoPE (transformers apply_rotary_pos_emb): for each row of x [B][H][T][D] and i < half =
 * rotaryDim/2, y[i] = x[i]·cos − x[i+half]·sin and y[i+half] = x[i+half]·cos + x[i]·sin, with cos/sin
 * of row t (or b·T + t when perBatch); dims ≥ rotaryDim pass through. sign = −1 rotates by −θ, the
 * transpose, which is the backward. `out` may be `x` unless shape.headsLast (see RopeShape).
 */
function ropeRowsJs(
  src: Float32Array,
  cos: Float32Array,
  sin: Float32Array,
  dst: Float32Array,
  shape: RopeShape,
  sign: 1 | -1,
): void {
  const { batch: B, heads: H, seq: T, headDim: D, rotaryDim, perBatch } = shape;
  const half = rotaryDim >> 1;
  // With headsLast the forward reads [B][T][H][D] and the backward writes it; the other side is [B][H][T][D].
  const srcBthd = shape.headsLast === true && sign === 1;
  const dstBthd = shape.headsLast === true && sign === -1;
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let t = 0; t < T; t++) {
        const bhtd = ((b * H + h) * T + t) * D;
        const bthd = ((b * T + t) * H + h) * D;
        const o = srcBthd ? bthd : bhtd;
        const p = dstBthd ? bthd : bhtd;
        const r = (perBatch ? b * T + t : t) * half;
        for (let i = 0; i < half; i++) {
          const x1 = src[o + i];
          const x2 = src[o + i + half];
          const c = cos[r + i];
          const s = sign * sin[r + i];
          dst[p + i] = x1 * c - x2 * s;
          dst[p + i + half] = x2 * c + x1 * s;
        }
        if (dst !== src) for (let i = 2 * half; i < D; i++) dst[p + i] = src[o + i];
      }
}

export function ropeForwardJs(
  x: Float32Array,
  cos: Float32Array,
  sin: Float32Array,
  out: Float32Array,
  shape: RopeShape,
): void {
  ropeRowsJs(x, cos, sin, out, shape, 1);
}

export function ropeBackwardJs(
  dOut: Float32Array,
  cos: Float32Array,
  sin: Float32Array,
  dx: Float32Array,
  shape: RopeShape,
): void {
  ropeRowsJs(dOut, cos, sin, dx, shape, -1);
}

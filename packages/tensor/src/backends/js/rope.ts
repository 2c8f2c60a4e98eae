import type { RopeShape } from "../../backend.js";

/**
 * Rotate-half RoPE (transformers apply_rotary_pos_emb): for each row of x [B][H][T][D] and i < half =
 * rotaryDim/2, y[i] = x[i]·cos − x[i+half]·sin and y[i+half] = x[i+half]·cos + x[i]·sin, with cos/sin
 * of row t (or b·T + t when perBatch); dims ≥ rotaryDim pass through. sign = −1 rotates by −θ, the
 * transpose, which is the backward. `out` may be `x`.
 */
function ropeRowsJs(
  x: Float32Array,
  cos: Float32Array,
  sin: Float32Array,
  out: Float32Array,
  shape: RopeShape,
  sign: 1 | -1,
): void {
  const { batch: B, heads: H, seq: T, headDim: D, rotaryDim, perBatch } = shape;
  const half = rotaryDim >> 1;
  if (out !== x) out.set(x.subarray(0, B * H * T * D));
  for (let b = 0; b < B; b++)
    for (let h = 0; h < H; h++)
      for (let t = 0; t < T; t++) {
        const o = ((b * H + h) * T + t) * D;
        const r = (perBatch ? b * T + t : t) * half;
        for (let i = 0; i < half; i++) {
          const x1 = x[o + i];
          const x2 = x[o + i + half];
          const c = cos[r + i];
          const s = sign * sin[r + i];
          out[o + i] = x1 * c - x2 * s;
          out[o + i + half] = x2 * c + x1 * s;
        }
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

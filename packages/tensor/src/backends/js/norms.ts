/** RMSNorm rows of `dim`: out = x·rstd·w (or (1+w) zero-centred, Qwen3.5); rstd saved for backward. */
export function rmsNormJs(
  x: Float32Array,
  w: Float32Array,
  out: Float32Array,
  rstd: Float32Array,
  dim: number,
  eps: number,
  zeroCentered: boolean,
): void {
  const rows = x.length / dim;
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[o + i] * x[o + i];
    const s = 1 / Math.sqrt(ss / dim + eps);
    rstd[r] = s;
    if (zeroCentered) for (let i = 0; i < dim; i++) out[o + i] = x[o + i] * s * (1 + w[i]);
    else for (let i = 0; i < dim; i++) out[o + i] = x[o + i] * s * w[i];
  }
}

/**
 * RMSNorm backward. With x̂ = x·rstd and gw = g·w': dx = rstd·(gw − x̂·mean(gw·x̂)), dw = Σ_rows g·x̂.
 */
export function rmsNormBackwardJs(
  x: Float32Array,
  w: Float32Array,
  rstd: Float32Array,
  g: Float32Array,
  dx: Float32Array,
  dw: Float32Array | null,
  dim: number,
  zeroCentered: boolean,
): void {
  const rows = x.length / dim;
  dw?.fill(0);
  for (let r = 0; r < rows; r++) {
    const o = r * dim;
    const s = rstd[r];
    let dot = 0;
    for (let i = 0; i < dim; i++) {
      const wi = zeroCentered ? 1 + w[i] : w[i];
      const xh = x[o + i] * s;
      dot += g[o + i] * wi * xh;
      if (dw) dw[i] += g[o + i] * xh;
    }
    const mean = dot / dim;
    for (let i = 0; i < dim; i++) {
      const wi = zeroCentered ? 1 + w[i] : w[i];
      dx[o + i] = s * (g[o + i] * wi - x[o + i] * s * mean);
    }
  }
}

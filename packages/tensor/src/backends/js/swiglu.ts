/** SwiGLU forward: out = g·σ(g)·u, saving σ(g). */
export function swigluForwardJs(g: Float32Array, u: Float32Array, out: Float32Array, sig: Float32Array): void {
  for (let i = 0; i < g.length; i++) {
    const s = 1 / (1 + Math.exp(-g[i]));
    sig[i] = s;
    out[i] = g[i] * s * u[i];
  }
}

/** SwiGLU backward from the saved σ: dg = d·u·σ·(1 + g·(1 − σ)), du = d·g·σ. */
export function swigluBackwardJs(
  g: Float32Array,
  u: Float32Array,
  sig: Float32Array,
  d: Float32Array,
  dg: Float32Array,
  du: Float32Array,
): void {
  for (let i = 0; i < g.length; i++) {
    const s = sig[i];
    du[i] = d[i] * g[i] * s;
    dg[i] = d[i] * u[i] * s * (1 + g[i] * (1 - s));
  }
}

import type { AdamWStep } from "../../kernel-contract.js";

/**
 * torch.optim.AdamW single-tensor step: p ← p·decay; m ← m + (g − m)(1 − β1) (lerp);
 * v ← β2·v + (1 − β2)·g²; p ← p − stepSize·m / (√v / √bc2 + eps).
 */
export function adamwUpdateJs(p: Float32Array, g: Float32Array, m: Float32Array, v: Float32Array, h: AdamWStep): void {
  const { beta1, beta2, eps, stepSize, bc2Sqrt, decay } = h;
  for (let j = 0; j < p.length; j++) {
    p[j] *= decay;
    const gj = g[j];
    m[j] += (gj - m[j]) * (1 - beta1);
    v[j] = v[j] * beta2 + (1 - beta2) * gj * gj;
    p[j] -= (stepSize * m[j]) / (Math.sqrt(v[j]) / bc2Sqrt + eps);
  }
}

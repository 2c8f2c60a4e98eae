// Token reductions shared by the distillation losses, as per-token weights so one weighted
// sum covers them all: TRL GKD "batchmean" (Σ / unmasked tokens), a plain sum, SDFT's
// mean-per-sequence-then-mean, or Σ / numItems for gradient accumulation.
import { type Tensor, mul, reshape, sum, tensor } from "@kiln/tensor";
import { LossInputError, LossOptionError } from "./errors.js";

export type TokenReduction = "token_mean" | "sum" | "sequence_mean";

export interface ReductionOptions {
  /** Default "token_mean". "sequence_mean" needs per-token values shaped [B, T]. */
  reduction?: TokenReduction;
  /** Divide the masked sum by this count instead (the accumulation step's token total). */
  numItems?: number;
}

/** Per-token weights for the chosen reduction (0 outside the mask). */
export function reductionWeights(
  op: string,
  mask: Uint8Array,
  shape: readonly number[],
  options: ReductionOptions,
): Float32Array {
  const n = mask.length;
  const w = new Float32Array(n);
  let count = 0;
  for (let i = 0; i < n; i++) count += mask[i];
  if (options.numItems !== undefined) {
    if (!(options.numItems > 0) || !Number.isFinite(options.numItems))
      throw new LossOptionError(`${op}: numItems must be a positive number, got ${options.numItems}`);
    for (let i = 0; i < n; i++) w[i] = mask[i] / options.numItems;
    return w;
  }
  const reduction = options.reduction ?? "token_mean";
  if (reduction === "sum") {
    for (let i = 0; i < n; i++) w[i] = mask[i];
  } else if (reduction === "token_mean") {
    for (let i = 0; i < n; i++) w[i] = mask[i] / count; // 0/0 = NaN with no tokens, like torch
  } else if (reduction === "sequence_mean") {
    if (shape.length < 2)
      throw new LossInputError(
        `${op}: reduction "sequence_mean" needs per-token values shaped [B, T], got rank ${shape.length}`,
      );
    const T = shape[shape.length - 1];
    const B = n / T;
    let valid = 0;
    for (let b = 0; b < B; b++) {
      let c = 0;
      for (let t = 0; t < T; t++) c += mask[b * T + t];
      if (c > 0) valid++;
    }
    for (let b = 0; b < B; b++) {
      let c = 0;
      for (let t = 0; t < T; t++) c += mask[b * T + t];
      for (let t = 0; t < T; t++) w[b * T + t] = c > 0 ? mask[b * T + t] / c / valid : 0;
    }
  } else {
    throw new LossOptionError(`${op}: reduction must be token_mean, sum or sequence_mean; got ${String(reduction)}`);
  }
  return w;
}

/** Σ_i w_i·x_i as a differentiable scalar. */
export function weightedSum(x: Tensor, weights: Float32Array): Tensor {
  return sum(mul(reshape(x, [x.size]), tensor(weights, [weights.length])));
}

import type { Tensor } from "@kiln/tensor";

/**
 * What every loss returns: a scalar to backpropagate and plain numbers to log.
 * Metric names follow TRL where the meaning is the same (`rewards/margins`, `mean_token_accuracy`).
 */
export interface LossResult {
  loss: Tensor;
  metrics: Record<string, number>;
}

/** Mask-like inputs: a 0/1 tensor (f32 or i32), a typed array or a boolean/number array. */
export type MaskLike =
  | { readonly data: ArrayLike<number>; readonly size: number }
  | ArrayLike<number>
  | readonly boolean[];

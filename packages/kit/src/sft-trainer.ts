// The SFT micro-batch shape the collators produce (training runs through trainer/trainer.ts).
import type { Tensor } from "@kiln/tensor";

export interface SftBatch {
  /** i32 [B, T] */
  inputIds: Tensor;
  /** i32 [B, T], −100 where no loss applies (prompt, padding); shifted inside the loss. */
  labels: Tensor;
  /** [B, T] 1 = token, 0 = padding. */
  attentionMask?: Tensor;
}

// Label helpers for causal-LM losses (transformers loss_utils: labels shifted left by one,
// padded with the ignore index; TRL SFT: −100 on prompt/non-assistant tokens and padding).
import { Tensor } from "@kiln/tensor";
import { LossInputError } from "./errors.js";
import { fmt, maskValues } from "./inputs.js";
import type { MaskLike } from "./result.js";

/**
 * Next-token targets: out[..., t] = labels[..., t + 1], the last position gets `ignoreIndex`.
 * Shifting labels instead of logits keeps the logits untouched (no [T−1, V] copy).
 */
export function shiftLabels(labels: Tensor, ignoreIndex = -100): Tensor {
  if (labels.dtype !== "i32")
    throw new LossInputError(`shiftLabels: labels must be i32, got ${labels.dtype} ${fmt(labels.shape)}`);
  if (labels.rank < 1) throw new LossInputError("shiftLabels: labels need a sequence axis, got a scalar");
  const T = labels.shape[labels.rank - 1];
  const src = labels.dataSync() as Int32Array;
  const out = new Int32Array(src.length);
  for (let o = 0; o < src.length; o += T) {
    for (let t = 0; t + 1 < T; t++) out[o + t] = src[o + t + 1];
    if (T > 0) out[o + T - 1] = ignoreIndex;
  }
  return new Tensor(out, labels.shape, "i32");
}

/**
 * Labels from token ids and a 0/1 loss mask (completion-only or assistant-only mask from the
 * chat template): ids where the mask is set, `ignoreIndex` elsewhere.
 */
export function labelsFromMask(inputIds: Tensor, mask: MaskLike | Tensor, ignoreIndex = -100): Tensor {
  if (inputIds.dtype !== "i32") throw new LossInputError(`labelsFromMask: inputIds must be i32, got ${inputIds.dtype}`);
  const m = maskValues("labelsFromMask", "mask", mask, inputIds.size);
  const ids = inputIds.dataSync() as Int32Array;
  const out = new Int32Array(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = m[i] ? ids[i] : ignoreIndex;
  return new Tensor(out, inputIds.shape, "i32");
}

export interface CountTargetsOptions {
  /** Count after the next-token shift (the first label of each row is never a target). Default true. */
  shift?: boolean;
  ignoreIndex?: number;
}

/**
 * Number of target tokens in `labels`: pass the sum over every micro-batch of an accumulation
 * step as `numItemsInBatch` so that accumulated gradients equal one large batch
 * (transformers Trainer `num_items_in_batch`).
 */
export function countTargetTokens(labels: Tensor, options: CountTargetsOptions = {}): number {
  if (labels.dtype !== "i32") throw new LossInputError(`countTargetTokens: labels must be i32, got ${labels.dtype}`);
  const ignoreIndex = options.ignoreIndex ?? -100;
  const shift = options.shift ?? true;
  const T = labels.rank === 0 ? 1 : labels.shape[labels.rank - 1];
  const d = labels.dataSync() as Int32Array;
  let n = 0;
  for (let i = 0; i < d.length; i++) {
    if (shift && i % T === 0) continue;
    if (d[i] !== ignoreIndex) n++;
  }
  return n;
}

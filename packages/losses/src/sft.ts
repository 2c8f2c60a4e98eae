// SFT objective: masked next-token cross-entropy (transformers ForCausalLMLoss, TRL SFTTrainer;
// docs/NUMERICS.md §3.1).
import { type Tensor, mul, noGrad, reshape, sum } from "@kiln/tensor";
import { LossInputError, LossOptionError } from "./errors.js";
import { type Logits, isChunkedLogits, logitsLayout } from "./chunked-logits.js";
import { fmt } from "./inputs.js";
import { shiftLabels } from "./labels.js";
import type { LossResult } from "./result.js";
import { tokenLogProbs } from "./token-log-probs.js";
import { tokenAccuracy, tokenEntropy } from "./token-stats.js";

export interface SftLossOptions {
  /** Label value that marks prompt, non-assistant and padding positions. Default −100. */
  ignoreIndex?: number;
  /**
   * true (default): `labels` are aligned with the input ids and shifted here (logits[t]
   * predicts labels[t+1]), as transformers does. false: labels are already next-token targets.
   */
  shift?: boolean;
  /**
   * "mean" (default): mean over this batch's target tokens. "sum": the plain sum. Ignored when
   * `numItemsInBatch` is set.
   */
  reduction?: "mean" | "sum";
  /**
   * Target tokens in the whole gradient-accumulation step (see `countTargetTokens`): the loss is
   * sum / numItemsInBatch, so accumulated micro-batch gradients equal one large batch.
   */
  numItemsInBatch?: number;
  /** Also log the mean policy entropy over target tokens (one extra pass over the logits). */
  entropy?: boolean;
  /** Rows per chunk in the fused log-prob kernel. */
  chunkRows?: number;
}

/**
 * Masked next-token cross-entropy of `logits` [B, T, V] (or [T, V]) against `labels` [B, T]
 * (i32, `ignoreIndex` where no loss applies). Metrics: `loss`, `num_tokens`,
 * `mean_token_accuracy`, and `entropy` when asked.
 */
export function sftLoss(logits: Logits, labels: Tensor, options: SftLossOptions = {}): LossResult {
  const op = "sftLoss";
  const ignoreIndex = options.ignoreIndex ?? -100;
  const { rows, vocab, lead } = logitsLayout(op, "logits", logits);
  if (labels.size !== rows || labels.dtype !== "i32") {
    throw new LossInputError(
      `${op}: labels ${labels.dtype} ${fmt(labels.shape)} must be i32 with one label per logits row (${fmt([...lead, vocab])})`,
    );
  }
  const targets = (options.shift ?? true) ? shiftLabels(labels, ignoreIndex) : labels;
  const td = targets.dataSync() as Int32Array;
  let count = 0;
  for (let i = 0; i < rows; i++) if (td[i] !== ignoreIndex) count++;
  let denom: number;
  if (options.numItemsInBatch !== undefined) {
    const n = options.numItemsInBatch;
    if (!(n > 0) || !Number.isFinite(n))
      throw new LossOptionError(`${op}: numItemsInBatch must be a positive number, got ${n}`);
    denom = n;
  } else {
    const reduction = options.reduction ?? "mean";
    if (reduction !== "mean" && reduction !== "sum")
      throw new LossOptionError(`${op}: reduction must be "mean" or "sum", got ${String(reduction)}`);
    // torch (and so TRL) gives 0/0 = NaN for a mean over zero targets, which poisons every later
    // step once it reaches the weights. Here such a batch is a no-op: loss 0, zero gradient, and
    // `num_tokens: 0` in the metrics so that the caller can see it (documented in the README).
    denom = reduction === "sum" || count === 0 ? 1 : count;
  }
  const flatLogits = isChunkedLogits(logits) ? logits : reshape(logits, [rows, vocab]);
  const flatTargets = reshape(targets, [rows]);
  // backward(loss) sends fround(−1/denom) to every row: the forward pre-scales the softmax by it.
  const logps = tokenLogProbs(flatLogits, flatTargets, {
    ignoreIndex,
    chunkRows: options.chunkRows,
    expectedGradient: Number.isFinite(1 / denom) ? -1 / denom : undefined,
  });
  // With no targets every log-prob is 0; scaling by +0 (not −1) keeps the value +0 rather than −0.
  const loss = mul(sum(logps), count === 0 ? 0 : -1 / denom);
  const metrics: Record<string, number> = noGrad(() => {
    const m: Record<string, number> = { loss: loss.item(), num_tokens: count };
    // Without targets accuracy and entropy are undefined: left out rather than logged as NaN.
    if (count === 0) return m;
    m.mean_token_accuracy = tokenAccuracy(flatLogits, flatTargets, ignoreIndex).accuracy;
    if (options.entropy) {
      const mask = new Uint8Array(rows);
      for (let i = 0; i < rows; i++) mask[i] = td[i] !== ignoreIndex ? 1 : 0;
      m.entropy = tokenEntropy(flatLogits, { mask }).mean;
    }
    return m;
  });
  return { loss, metrics };
}

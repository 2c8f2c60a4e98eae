// Per-sequence log-probabilities for preference losses (TRL dpo_trainer: logits shifted by
// one, prompt and padding excluded, summed over completion tokens — docs/NUMERICS.md §3.2).
import { type Tensor, div, reshape, sum, tensor } from "@kiln/tensor";
import { LossInputError } from "./errors.js";
import { type Logits, isChunkedLogits, logitsLayout } from "./chunked-logits.js";
import { fmt, indexData, maskValues } from "./inputs.js";
import type { MaskLike } from "./result.js";
import { tokenLogProbs } from "./token-log-probs.js";

export interface SequenceLogProbsOptions {
  /** Divide each sum by its number of completion tokens (IPO, sigmoid_norm). Default false. */
  average?: boolean;
  chunkRows?: number;
}

export interface SequenceLogProbs {
  /** [B]: Σ over completion tokens of log p(input_ids[t+1] | ≤ t) (or the mean with `average`). */
  logps: Tensor;
  /** Completion tokens counted per sequence. */
  tokens: Float32Array;
}

/**
 * logits [B, T, V], inputIds [B, T] (i32), completionMask [B, T] (1 on completion tokens).
 * Token t+1 is scored by logits[t] and counts when completionMask[t+1] is set.
 */
export function sequenceLogProbs(
  logits: Logits,
  inputIds: Tensor,
  completionMask: MaskLike | Tensor,
  options: SequenceLogProbsOptions = {},
): SequenceLogProbs {
  const op = "sequenceLogProbs";
  const { rows, vocab, lead } = logitsLayout(op, "logits", logits);
  if (lead.length !== 2) throw new LossInputError(`${op}: logits must be [B, T, V], got ${fmt([...lead, vocab])}`);
  const [B, T] = lead;
  const ids = indexData(op, "inputIds", inputIds, rows);
  const mask = maskValues(op, "completionMask", completionMask, rows);
  const targets = new Int32Array(rows).fill(-1);
  const tokens = new Float32Array(B);
  for (let b = 0; b < B; b++) {
    for (let t = 0; t + 1 < T; t++) {
      const next = b * T + t + 1;
      if (!mask[next]) continue;
      targets[b * T + t] = ids[next];
      tokens[b]++;
    }
  }
  const flat = isChunkedLogits(logits) ? logits : reshape(logits, [rows, vocab]);
  const lp = tokenLogProbs(flat, tensor(targets, [rows], "i32"), {
    ignoreIndex: -1,
    chunkRows: options.chunkRows,
  });
  let logps = sum(reshape(lp, [B, T]), 1);
  if (options.average) {
    const denom = Float32Array.from(tokens, (n) => Math.max(n, 1));
    logps = div(logps, tensor(denom, [B]));
  }
  return { logps, tokens };
}

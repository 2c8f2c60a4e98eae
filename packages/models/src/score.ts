// Teacher scoring: log-probs of given continuation tokens in one forward pass per batch.
import { Tensor, narrow, noGrad } from "@kiln/tensor";
import type { CausalLM } from "./causal-lm.js";
import { headTokenLogProbs } from "./chunked-head.js";
import { GenerationError } from "./errors.js";

export interface ScoreItem {
  promptIds: readonly number[];
  completionIds: readonly number[];
}

/**
 * log p(completion_t | prompt, completion_<t) for each item, all items in one left-padded
 * forward. Completions are right-aligned, so only the last (longest completion) positions go
 * through the vocabulary projection, and those in row chunks.
 */
export function scoreCompletions(model: CausalLM, items: readonly ScoreItem[]): number[][] {
  if (items.length === 0) return [];
  const V = model.config.vocabSize;
  for (const [i, it] of items.entries()) {
    if (it.promptIds.length === 0)
      throw new GenerationError(`score: item ${i} has an empty prompt (the first token has no context)`);
    for (const id of [...it.promptIds, ...it.completionIds]) {
      if (!(Number.isInteger(id) && id >= 0 && id < V))
        throw new GenerationError(`score: item ${i} has token ${id} outside [0, ${V})`);
    }
  }
  const C = Math.max(...items.map((it) => it.completionIds.length));
  if (C === 0) return items.map(() => []);
  const B = items.length;
  const L = Math.max(...items.map((it) => it.promptIds.length + it.completionIds.length));
  const ids = new Int32Array(B * L);
  const mask = new Uint8Array(B * L);
  // Logits kept: positions L−C−1 … L−2 predict the last C positions.
  const targets = new Int32Array(B * C).fill(-100);
  items.forEach((it, b) => {
    const seq = [...it.promptIds, ...it.completionIds];
    ids.set(seq, b * L + L - seq.length);
    mask.fill(1, b * L + L - seq.length, (b + 1) * L);
    const n = it.completionIds.length;
    targets.set(it.completionIds, b * C + C - n);
  });
  return noGrad(() => {
    // The head runs in row chunks (headTokenLogProbs): no [B, C, V] logits for long completions.
    const hidden = model.hiddenStates(new Tensor(ids, [B, L], "i32"), { attentionMask: mask, logitsToKeep: C + 1 });
    const lp = headTokenLogProbs(
      model.lmHead,
      narrow(hidden, 1, 0, C),
      new Tensor(targets, [B, C], "i32"),
    ).toFloat32Array();
    return items.map((it, b) => Array.from(lp.subarray(b * C + C - it.completionIds.length, (b + 1) * C)));
  });
}

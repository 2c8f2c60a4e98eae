// Teacher scoring: log-probs of given continuation tokens in one forward pass per batch.
import { Tensor, narrow, noGrad, reshape, tokenLogProbs } from "@kiln/tensor";
import type { CausalLM } from "./causal-lm.js";
import { GenerationError } from "./errors.js";

export interface ScoreItem {
  promptIds: readonly number[];
  completionIds: readonly number[];
}

/**
 * log p(completion_t | prompt, completion_<t) for each item, all items in one right-padded
 * forward (causal attention never looks right, so the padding needs no mask for real tokens).
 */
export function scoreCompletions(model: CausalLM, items: readonly ScoreItem[]): number[][] {
  if (items.length === 0) return [];
  const V = model.config.vocabSize;
  for (const [i, it] of items.entries()) {
    if (it.promptIds.length === 0) throw new GenerationError(`score: item ${i} has an empty prompt (the first token has no context)`);
    for (const id of [...it.promptIds, ...it.completionIds]) {
      if (!(Number.isInteger(id) && id >= 0 && id < V)) throw new GenerationError(`score: item ${i} has token ${id} outside [0, ${V})`);
    }
  }
  const B = items.length;
  const L = Math.max(...items.map((it) => it.promptIds.length + it.completionIds.length));
  const ids = new Int32Array(B * L);
  const mask = new Uint8Array(B * L);
  const targets = new Int32Array(B * (L - 1)).fill(-100);
  items.forEach((it, b) => {
    const seq = [...it.promptIds, ...it.completionIds];
    ids.set(seq, b * L);
    mask.fill(1, b * L, b * L + seq.length);
    for (let t = it.promptIds.length; t < seq.length; t++) targets[b * (L - 1) + t - 1] = seq[t];
  });
  return noGrad(() => {
    if (L < 2) return items.map(() => []);
    const logits = model.forward(new Tensor(ids, [B, L], "i32"), { attentionMask: mask });
    const shifted = reshape(narrow(logits, 1, 0, L - 1), [B * (L - 1), V]);
    const lp = tokenLogProbs(shifted, new Tensor(targets, [B * (L - 1)], "i32")).toFloat32Array();
    return items.map((it, b) => {
      const p = it.promptIds.length;
      return Array.from({ length: it.completionIds.length }, (_, j) => lp[b * (L - 1) + p - 1 + j]);
    });
  });
}

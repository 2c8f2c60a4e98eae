// Teacher scoring: log-probs of given continuation tokens in one forward pass per batch.
import { Tensor, narrow } from "@kiln/tensor";
import type { CausalLM } from "./causal-lm.js";
import { headTokenLogProbs } from "./chunked-head.js";
import { GenerationError } from "./errors.js";
import { type HostReads, readAsync, readSync } from "./host-read.js";

export interface ScoreItem {
  promptIds: readonly number[];
  completionIds: readonly number[];
}

function checkItems(op: string, model: CausalLM, items: readonly ScoreItem[]): void {
  const V = model.config.vocabSize;
  for (const [i, it] of items.entries()) {
    if (it.promptIds.length === 0)
      throw new GenerationError(`${op}: item ${i} has an empty prompt (the first token has no context)`);
    for (const id of [...it.promptIds, ...it.completionIds]) {
      if (!(Number.isInteger(id) && id >= 0 && id < V))
        throw new GenerationError(`${op}: item ${i} has token ${id} outside [0, ${V})`);
    }
  }
}

/**
 * log p(completion_t | prompt, completion_<t) for each item, all items in one left-padded
 * forward. Completions are right-aligned, so only the last (longest completion) positions go
 * through the vocabulary projection, and those in row chunks. Synchronous: js and wasm; on a backend
 * whose memory the host cannot read without waiting (WebGPU) a SyncReadError names `scoreCompletionsAsync`.
 */
export function scoreCompletions(model: CausalLM, items: readonly ScoreItem[]): number[][] {
  return readSync("scoreCompletions", "scoreCompletionsAsync", () => scoreSteps(model, items));
}

/** `scoreCompletions` on every backend. */
export async function scoreCompletionsAsync(model: CausalLM, items: readonly ScoreItem[]): Promise<number[][]> {
  return readAsync(() => scoreSteps(model, items));
}

function* scoreSteps(model: CausalLM, items: readonly ScoreItem[]): HostReads<number[][]> {
  if (items.length === 0) return [];
  checkItems("score", model, items);
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
  // The head runs in row chunks (headTokenLogProbs): no [B, C, V] logits for long completions.
  const hidden = model.hiddenStates(new Tensor(ids, [B, L], "i32"), { attentionMask: mask, logitsToKeep: C + 1 });
  const lp: Float32Array = yield headTokenLogProbs(
    model.lmHead,
    narrow(hidden, 1, 0, C),
    new Tensor(targets, [B, C], "i32"),
  );
  return items.map((it, b) => Array.from(lp.subarray(b * C + C - it.completionIds.length, (b + 1) * C)));
}

/** A position's k most likely tokens under the model, most likely first. */
export interface TopLogprobs {
  tokenIds: number[];
  logprobs: number[];
}

/**
 * scoreCompletions plus, per completion position, the model's `k` most likely tokens with their
 * log-probs (what vLLM's `prompt_logprobs: k` returns): the teacher side of a top-k distillation
 * (docs/NUMERICS.md §3.3). The head runs over `chunkRows` positions at a time; only k values per position
 * are kept. Synchronous: js and wasm; elsewhere a SyncReadError names `scoreCompletionsTopKAsync`.
 */
export function scoreCompletionsTopK(
  model: CausalLM,
  items: readonly ScoreItem[],
  k: number,
  options: { chunkRows?: number } = {},
): { logprobs: number[][]; top: TopLogprobs[][] } {
  return readSync("scoreCompletionsTopK", "scoreCompletionsTopKAsync", () => topKSteps(model, items, k, options));
}

/** `scoreCompletionsTopK` on every backend. */
export async function scoreCompletionsTopKAsync(
  model: CausalLM,
  items: readonly ScoreItem[],
  k: number,
  options: { chunkRows?: number } = {},
): Promise<{ logprobs: number[][]; top: TopLogprobs[][] }> {
  return readAsync(() => topKSteps(model, items, k, options));
}

function* topKSteps(
  model: CausalLM,
  items: readonly ScoreItem[],
  k: number,
  options: { chunkRows?: number },
): HostReads<{ logprobs: number[][]; top: TopLogprobs[][] }> {
  const V = model.config.vocabSize;
  if (!(Number.isInteger(k) && k >= 1 && k <= V))
    throw new GenerationError(`scoreCompletionsTopK: k must be an integer in [1, ${V}], got ${k}`);
  checkItems("scoreCompletionsTopK", model, items);
  const C = Math.max(0, ...items.map((it) => it.completionIds.length));
  const logprobs: number[][] = items.map(() => []);
  const top: TopLogprobs[][] = items.map(() => []);
  if (C === 0) return { logprobs, top };
  const B = items.length;
  const L = Math.max(...items.map((it) => it.promptIds.length + it.completionIds.length));
  const ids = new Int32Array(B * L);
  const mask = new Uint8Array(B * L);
  items.forEach((it, b) => {
    const seq = [...it.promptIds, ...it.completionIds];
    ids.set(seq, b * L + L - seq.length);
    mask.fill(1, b * L + L - seq.length, (b + 1) * L);
  });
  const chunk = options.chunkRows ?? Math.max(1, Math.floor((4 << 20) / V));
  const hidden = model.hiddenStates(new Tensor(ids, [B, L], "i32"), { attentionMask: mask, logitsToKeep: C + 1 });
  for (let b = 0; b < B; b++) {
    const n = items[b].completionIds.length;
    // Row C − n + j of this item's kept positions predicts completion token j.
    const rows = narrow(narrow(hidden, 0, b, b + 1), 1, C - n, C);
    for (let s = 0; s < n; s += chunk) {
      const e = Math.min(s + chunk, n);
      const logits = model.lmHead.forward(narrow(rows, 1, s, e));
      const z: Float32Array = yield logits;
      logits.dispose();
      for (let r = 0; r < e - s; r++) {
        const lse = rowLogSumExp(z, r * V, V);
        logprobs[b].push(z[r * V + items[b].completionIds[s + r]] - lse);
        top[b].push(rowTopK(z, r * V, V, k, lse));
      }
    }
  }
  return { logprobs, top };
}

function rowLogSumExp(z: Float32Array, o: number, V: number): number {
  let mx = Number.NEGATIVE_INFINITY;
  for (let v = 0; v < V; v++) if (z[o + v] > mx) mx = z[o + v];
  let sum = 0;
  for (let v = 0; v < V; v++) sum += Math.exp(z[o + v] - mx);
  return mx + Math.log(sum);
}

function rowTopK(z: Float32Array, o: number, V: number, k: number, lse: number): TopLogprobs {
  // Insertion into a descending buffer; ties keep the lower id first.
  const best: number[] = [];
  for (let v = 0; v < V; v++) {
    const x = z[o + v];
    if (best.length === k && x <= z[o + best[k - 1]]) continue;
    let pos = best.length < k ? best.length : k - 1;
    if (best.length < k) best.push(v);
    while (pos > 0 && z[o + best[pos - 1]] < x) {
      best[pos] = best[pos - 1];
      pos--;
    }
    best[pos] = v;
  }
  return { tokenIds: best, logprobs: best.map((v) => z[o + v] - lse) };
}

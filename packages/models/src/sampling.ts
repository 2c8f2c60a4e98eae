// Next-token selection from one row of logits, in transformers' order (generation/utils.py
// _get_logits_processor): repetition penalty, then temperature, top-k, top-p, min-p, then a draw.
import { GenerationError } from "./errors.js";

export interface SamplingParams {
  /** 0 (or `greedy`) picks the argmax. Default 1. */
  temperature?: number;
  greedy?: boolean;
  /** Keep the k most likely tokens (0 / undefined: off). */
  topK?: number;
  /** Keep the smallest set of most likely tokens whose probability reaches p (1: off). */
  topP?: number;
  /** Drop tokens whose probability is below minP × the top probability (0: off). */
  minP?: number;
  /** CTRL-style penalty on tokens already in the prompt or completion (1: off). */
  repetitionPenalty?: number;
}

export function checkSamplingParams(p: SamplingParams): void {
  const bad = (name: string, rule: string, v: unknown) =>
    new GenerationError(`sampling: ${name} = ${String(v)} must be ${rule}`);
  if (p.temperature !== undefined && !(p.temperature >= 0)) throw bad("temperature", "≥ 0", p.temperature);
  if (p.topK !== undefined && !(Number.isInteger(p.topK) && p.topK >= 0))
    throw bad("topK", "a non-negative integer", p.topK);
  if (p.topP !== undefined && !(p.topP > 0 && p.topP <= 1)) throw bad("topP", "in (0, 1]", p.topP);
  if (p.minP !== undefined && !(p.minP >= 0 && p.minP <= 1)) throw bad("minP", "in [0, 1]", p.minP);
  if (p.repetitionPenalty !== undefined && !(p.repetitionPenalty > 0))
    throw bad("repetitionPenalty", "> 0", p.repetitionPenalty);
}

/** transformers RepetitionPenaltyLogitsProcessor: positive logits divided, negative multiplied. In place. */
export function applyRepetitionPenalty(logits: Float32Array, seen: Iterable<number>, penalty: number): void {
  if (penalty === 1) return;
  for (const id of new Set(seen)) {
    const v = logits[id];
    logits[id] = v < 0 ? v * penalty : v / penalty;
  }
}

export function argmaxOf(x: Float32Array): number {
  let best = 0;
  for (let i = 1; i < x.length; i++) if (x[i] > x[best]) best = i;
  return best;
}

/** log-softmax of one row (float64 accumulation). */
export function logSoftmaxRow(x: Float32Array): Float32Array {
  let m = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < x.length; i++) if (x[i] > m) m = x[i];
  let s = 0;
  for (let i = 0; i < x.length; i++) s += Math.exp(x[i] - m);
  const lse = m + Math.log(s);
  const out = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = x[i] - lse;
  return out;
}

/** The n largest entries, best first: [index, value]. */
export function topEntries(x: Float32Array, n: number): [number, number][] {
  const k = Math.min(n, x.length);
  const best: [number, number][] = [];
  for (let i = 0; i < x.length; i++) {
    const v = x[i];
    if (best.length === k && v <= best[k - 1][1]) continue;
    let j = best.length === k ? k - 1 : best.length;
    if (best.length < k) best.push([i, v]);
    while (j > 0 && best[j - 1][1] < v) {
      best[j] = best[j - 1];
      j--;
    }
    best[j] = [i, v];
  }
  return best;
}

/**
 * Pick a token from processed logits (repetition penalty already applied). `u` is a uniform
 * draw in [0, 1); unused when greedy.
 */
export function sampleFromLogits(logits: Float32Array, p: SamplingParams, u: number): number {
  const temperature = p.temperature ?? 1;
  if (p.greedy || temperature === 0) return argmaxOf(logits);
  // Candidates: all tokens, or the top-k (ties with the k-th kept, as transformers' `<` test does).
  let cand: [number, number][];
  if (p.topK && p.topK > 0 && p.topK < logits.length) {
    const top = topEntries(logits, p.topK);
    const kth = top[top.length - 1][1];
    cand = [];
    for (let i = 0; i < logits.length; i++) if (logits[i] >= kth) cand.push([i, logits[i]]);
    cand.sort((a, b) => b[1] - a[1]);
  } else {
    cand = Array.from(logits, (v, i) => [i, v] as [number, number]);
    if ((p.topP ?? 1) < 1) cand.sort((a, b) => b[1] - a[1]);
  }
  let m = Number.NEGATIVE_INFINITY;
  for (const [, v] of cand) if (v > m) m = v;
  const probs = new Float64Array(cand.length);
  let total = 0;
  for (let i = 0; i < cand.length; i++) total += probs[i] = Math.exp((cand[i][1] - m) / temperature);
  for (let i = 0; i < probs.length; i++) probs[i] /= total;
  let keep = cand.length;
  const topP = p.topP ?? 1;
  if (topP < 1) {
    // Sorted descending: keep through the token where the cumulative mass reaches top_p.
    let cum = 0;
    for (let i = 0; i < probs.length; i++) {
      cum += probs[i];
      if (cum >= topP) {
        keep = i + 1;
        break;
      }
    }
  }
  const minP = p.minP ?? 0;
  let maxProb = 0;
  for (let i = 0; i < keep; i++) if (probs[i] > maxProb) maxProb = probs[i];
  let mass = 0;
  const mask = new Uint8Array(keep);
  for (let i = 0; i < keep; i++) {
    if (minP > 0 && probs[i] < minP * maxProb) continue;
    mask[i] = 1;
    mass += probs[i];
  }
  let target = u * mass;
  let last = -1;
  for (let i = 0; i < keep; i++) {
    if (!mask[i]) continue;
    last = i;
    target -= probs[i];
    if (target < 0) return cand[i][0];
  }
  return cand[last][0];
}

// Logged health signals over logits (no gradient): per-token entropy of the policy and
// argmax accuracy. One streaming pass per row, no [N × V] temporaries.
import { type Tensor, narrow, reshape } from "@kiln/tensor";
import { type Logits, forEachLogitChunk, isChunkedLogits, logitsLayout } from "./chunked-logits.js";
import { LossInputError, LossOptionError } from "./errors.js";
import { indexData, logitRows, maskValues } from "./inputs.js";
import type { MaskLike } from "./result.js";

export interface EntropyOptions {
  /** Rows to include (others get 0 and are excluded from the mean). */
  mask?: MaskLike | Tensor;
  /** Entropy of softmax(logits / temperature). Default 1. */
  temperature?: number;
}

/**
 * Entropy H = logsumexp(z) − Σ softmax(z)·z per row of `logits` [..., V] (TRL's `entropy`
 * metric, averaged over masked tokens). Returns per-row values and their masked mean.
 */
export function tokenEntropy(logits: Logits, options: EntropyOptions = {}): { perToken: Float32Array; mean: number } {
  const op = "tokenEntropy";
  if (isChunkedLogits(logits)) {
    const { rows } = logitsLayout(op, "logits", logits);
    const mask = maskValues(op, "mask", options.mask, rows);
    const perToken = new Float32Array(rows);
    let total = 0;
    let count = 0;
    forEachLogitChunk(op, logits, (chunk, s, e) => {
      const part = tokenEntropy(chunk, { ...options, mask: mask.subarray(s, e) }).perToken;
      perToken.set(part, s);
      for (let i = s; i < e; i++) {
        if (!mask[i]) continue;
        total += perToken[i];
        count++;
      }
    });
    return { perToken, mean: count > 0 ? total / count : Number.NaN };
  }
  const { rows, vocab } = logitRows(op, "logits", logits);
  const mask = maskValues(op, "mask", options.mask, rows);
  const temperature = options.temperature ?? 1;
  if (!(temperature > 0) || !Number.isFinite(temperature))
    throw new LossOptionError(`${op}: temperature must be a positive finite number, got ${temperature}`);
  const inv = 1 / temperature;
  const ld = logits.dataSync() as Float32Array;
  const perToken = new Float32Array(rows);
  let total = 0;
  let count = 0;
  for (let r = 0; r < rows; r++) {
    if (!mask[r]) continue;
    const o = r * vocab;
    let m = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < vocab; j++) if (ld[o + j] > m) m = ld[o + j];
    m *= inv;
    let s = 0;
    let sz = 0;
    for (let j = 0; j < vocab; j++) {
      const z = ld[o + j] * inv - m;
      const e = Math.exp(z);
      s += e;
      sz += e * z;
    }
    // H = log s − Σ e·z / s with z shifted by the max (shift-invariant).
    const h = Math.log(s) - sz / s;
    perToken[r] = h;
    total += h;
    count++;
  }
  return { perToken, mean: count > 0 ? total / count : Number.NaN };
}

/**
 * Argmax accuracy over non-ignored targets (TRL `mean_token_accuracy`; ties go to the lowest
 * id like torch.argmax). `targets` must already be aligned with the logits rows (shifted).
 */
export function tokenAccuracy(
  logits: Logits,
  targets: Tensor,
  ignoreIndex = -100,
): { correct: number; total: number; accuracy: number } {
  const op = "tokenAccuracy";
  if (isChunkedLogits(logits)) {
    const { rows } = logitsLayout(op, "logits", logits);
    indexData(op, "targets", targets, rows);
    const flat = reshape(targets, [rows]);
    let correct = 0;
    let total = 0;
    forEachLogitChunk(op, logits, (chunk, s, e) => {
      const part = tokenAccuracy(chunk, narrow(flat, 0, s, e), ignoreIndex);
      correct += part.correct;
      total += part.total;
    });
    return { correct, total, accuracy: total > 0 ? correct / total : Number.NaN };
  }
  const { rows, vocab } = logitRows(op, "logits", logits);
  const td = indexData(op, "targets", targets, rows);
  const ld = logits.dataSync() as Float32Array;
  let correct = 0;
  let total = 0;
  for (let r = 0; r < rows; r++) {
    const t = td[r];
    if (t === ignoreIndex) continue;
    if (!(t >= 0 && t < vocab)) throw new LossInputError(`${op}: target ${t} at row ${r} is outside [0, ${vocab})`);
    total++;
    // argmax == t ⇔ no earlier logit ≥ z_t and no later logit > z_t. Scanning for a
    // counterexample stops at the first one, which for most wrong rows comes early.
    const o = r * vocab;
    const zt = ld[o + t];
    let hit = true;
    for (let j = o; j < o + t; j++) {
      if (ld[j] >= zt) {
        hit = false;
        break;
      }
    }
    if (hit) {
      for (let j = o + t + 1; j < o + vocab; j++) {
        if (ld[j] > zt) {
          hit = false;
          break;
        }
      }
    }
    if (hit) correct++;
  }
  return { correct, total, accuracy: total > 0 ? correct / total : Number.NaN };
}

// Distillation losses built on the per-token divergences: the full-vocabulary (or top-k)
// divergence of TRL GKD / SDFT full_logits, and SDFT's sampled-token reverse-KL surrogate.
import { Tensor, noGrad, record } from "@kiln/tensor";
import { LossInputError, LossOptionError } from "./errors.js";
import { type Logits, logitsLayout } from "./chunked-logits.js";
import { fmt, maskValues } from "./inputs.js";
import { type ReductionOptions, reductionWeights, weightedSum } from "./reduce.js";
import type { LossResult, MaskLike } from "./result.js";
import { type TokenDivergenceOptions, tokenDivergence } from "./divergence.js";

export interface DistillationOptions extends TokenDivergenceOptions, ReductionOptions {}

/**
 * Token-level distillation of student logits [B, T, V] (or [N, V]) towards teacher logits:
 * per-token divergence (default generalized JSD, β = 0.5), reduced over masked tokens
 * (default: Σ / number of masked tokens, TRL GKD "batchmean"). The caller aligns rows: pass
 * logits already shifted, and the mask of completion tokens (or `teacherRows`). Either side may
 * be `ChunkedLogits`; a chunked teacher is projected a chunk at a time and never kept for the
 * backward (`tokenDivergence`). Metrics: loss, divergence (mean per masked token), num_tokens.
 */
export function distillationLoss(student: Logits, teacher: Logits, options: DistillationOptions = {}): LossResult {
  const op = "distillationLoss";
  const { rows, lead } = logitsLayout(op, "student logits", student);
  const mask = maskValues(op, "mask", options.mask, rows);
  const weights = reductionWeights(op, mask, lead, options);
  // backward(loss) sends each row exactly its weight: the forward pre-scales the gradient by it.
  let finite = true;
  for (let i = 0; i < weights.length; i++) if (!Number.isFinite(weights[i])) finite = false;
  const perToken = tokenDivergence(student, teacher, {
    ...options,
    mask,
    expectedGradient: options.expectedGradient ?? (finite ? weights : undefined),
  });
  const loss = weightedSum(perToken, weights);
  const metrics = noGrad(() => {
    const d = perToken.dataSync() as Float32Array;
    let total = 0;
    let count = 0;
    for (let i = 0; i < rows; i++) {
      if (!mask[i]) continue;
      total += d[i];
      count++;
    }
    return { loss: loss.item(), divergence: count > 0 ? total / count : Number.NaN, num_tokens: count };
  });
  return { loss, metrics };
}

export interface SampledTokenKlInputs {
  /** [N] or [B, T] log S(y_t) of the student for its sampled tokens (requires grad). */
  studentLogps: Tensor;
  /** Same shape: log P(y_t) of the teacher. */
  teacherLogps: Tensor;
  /** Log-probs of the policy that sampled y (off-policy correction); omit when on-policy. */
  oldLogps?: Tensor;
  mask?: MaskLike | Tensor;
}

export interface SampledTokenKlOptions extends ReductionOptions {
  /** Cap c of the importance weight min(exp(clip(log S − log S_old, −20, 20)), c). Default 2 (TRL). */
  isClip?: number;
}

/**
 * Sampled-token reverse-KL surrogate (TRL SDFT `sampled_token`): ℓ_t = sg(log S − log P)·log S,
 * whose gradient is the REINFORCE estimate of ∇KL(S‖P); optionally times the capped, detached
 * importance weight. The loss value is the surrogate; metric `reverse_kl` is the plain estimate
 * mean(log S − log P) over masked tokens.
 */
export function sampledTokenKl(inputs: SampledTokenKlInputs, options: SampledTokenKlOptions = {}): LossResult {
  const op = "sampledTokenKl";
  const sT = inputs.studentLogps;
  const n = sT.size;
  const check = (name: string, t: Tensor): Float32Array => {
    if (t.dtype !== "f32" || t.size !== n)
      throw new LossInputError(`${op}: ${name} must be f32 with ${n} elements, got ${t.dtype} ${fmt(t.shape)}`);
    return t.dataSync() as Float32Array;
  };
  const s = check("studentLogps", sT);
  const p = check("teacherLogps", inputs.teacherLogps);
  const old = inputs.oldLogps ? check("oldLogps", inputs.oldLogps) : null;
  const cap = options.isClip ?? 2;
  if (!(cap > 0)) throw new LossOptionError(`${op}: isClip must be positive, got ${cap}`);
  const mask = maskValues(op, "mask", inputs.mask, n);
  const weights = reductionWeights(op, mask, sT.shape, options);
  const coef = new Float32Array(n); // sg(log S − log P)·w_t, times the reduction weight
  let value = 0;
  let kl = 0;
  let count = 0;
  for (let i = 0; i < n; i++) {
    if (!mask[i]) continue;
    const diff = s[i] - p[i];
    let w = 1;
    if (old) w = Math.min(Math.exp(Math.min(20, Math.max(-20, s[i] - old[i]))), cap);
    coef[i] = diff * w * weights[i];
    value += coef[i] * s[i];
    kl += diff;
    count++;
  }
  const loss = record(new Tensor(Float32Array.of(value), []), "sampledTokenKl", [sT], (g) => {
    const k = (g.dataSync() as Float32Array)[0];
    return [
      new Tensor(
        Float32Array.from(coef, (c) => c * k),
        sT.shape,
      ),
    ];
  });
  return { loss, metrics: { loss: value, reverse_kl: count > 0 ? kl / count : Number.NaN, num_tokens: count } };
}

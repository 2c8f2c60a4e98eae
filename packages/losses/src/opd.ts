// On-policy distillation (Tinker cookbook train_on_policy + rl losses; docs/NUMERICS.md §4):
// per-token advantage from the teacher's log-probs of the student's own samples, then an
// importance-sampled policy-gradient objective against the sampler's log-probs.
import { Tensor, noGrad, record } from "@kiln/tensor";
import { LossInputError, LossOptionError } from "./errors.js";
import { fmt, maskValues } from "./inputs.js";
import type { LossResult, MaskLike } from "./result.js";

export interface OpdAdvantageInputs {
  /** [N] log q_sampler(y_t): log-probs recorded by the sampler when the student generated y. */
  samplerLogps: Tensor;
  /** [N] log p_teacher(y_t) of the same tokens. */
  teacherLogps: Tensor;
  /** [N] 1 on completion (action) tokens. Default: all. */
  mask?: MaskLike | Tensor;
  /** [N] turn number (0-based) of each token, for `turnWeights`. */
  turnIndex?: Tensor | ArrayLike<number>;
}

export interface OpdAdvantageOptions {
  /** KL penalty coefficient λ (Tinker `kl_penalty_coef`). Default 1. */
  klCoef?: number;
  /**
   * Bound each advantage to [−c, c] (ours, docs/NUMERICS.md §4.2: not in the reference,
   * off by default; the seed used 3). Applied before turn weights.
   */
  clamp?: number;
  /** Weight of turn k's tokens (missing turns weigh 1). The seed weighted early turns by 1.5. */
  turnWeights?: readonly number[];
  /**
   * Tinker `kl_discount_factor` γ (default 0 = off): the per-token term becomes
   * Σ_{k≥0} γ^k x_{t+k} within each sequence (last axis of the inputs), before clamp and weights.
   */
  discount?: number;
  /**
   * With a discount, set the advantages of positions outside the mask back to 0. Default false:
   * like the Tinker cookbook (docs/NUMERICS.md §4.1, step 4), the discounted sum runs over the
   * masked vector without re-masking, so a prompt or tool-output token before a completion token
   * carries γ-weighted advantage from it. A policy-gradient loss with the same mask ignores them
   * either way; this matters to code that reads the advantages themselves.
   */
  zeroMaskedAfterDiscount?: boolean;
}

export interface OpdAdvantages {
  /** [N] f32; 0 outside the mask unless a discount carries values there (`zeroMaskedAfterDiscount`). */
  advantages: Tensor;
  metrics: Record<string, number>;
}

function perToken(op: string, name: string, t: Tensor, n: number): Float32Array {
  if (t.dtype !== "f32" || t.size !== n)
    throw new LossInputError(`${op}: ${name} must be f32 with ${n} elements, got ${t.dtype} ${fmt(t.shape)}`);
  return t.dataSync() as Float32Array;
}

/**
 * A_t = −λ·(log q_sampler(y_t) − log p_teacher(y_t)) on masked tokens, optionally clamped to
 * [−c, c] and scaled by per-turn weights. Metric `teacher_kl` = Σ rkl / Σ mask (unclamped).
 */
export function opdAdvantages(inputs: OpdAdvantageInputs, options: OpdAdvantageOptions = {}): OpdAdvantages {
  const op = "opdAdvantages";
  const n = inputs.samplerLogps.size;
  const q = perToken(op, "samplerLogps", inputs.samplerLogps, n);
  const p = perToken(op, "teacherLogps", inputs.teacherLogps, n);
  const mask = maskValues(op, "mask", inputs.mask, n);
  const lambda = options.klCoef ?? 1;
  if (!Number.isFinite(lambda)) throw new LossOptionError(`${op}: klCoef must be finite, got ${lambda}`);
  const c = options.clamp;
  if (c !== undefined && !(c > 0))
    throw new LossOptionError(`${op}: clamp must be a positive bound c (A ∈ [−c, c]), got ${c}`);
  let turns: ArrayLike<number> | undefined;
  if (options.turnWeights) {
    if (inputs.turnIndex === undefined)
      throw new LossInputError(`${op}: turnWeights need turnIndex (the turn of each token)`);
    turns = inputs.turnIndex instanceof Tensor ? inputs.turnIndex.toFloat32Array() : inputs.turnIndex;
    if (turns.length !== n) throw new LossInputError(`${op}: turnIndex has ${turns.length} entries, expected ${n}`);
    for (const w of options.turnWeights)
      if (!Number.isFinite(w)) throw new LossOptionError(`${op}: turnWeights must be finite, got ${w}`);
  }
  const gamma = options.discount ?? 0;
  if (!(gamma >= 0 && gamma < 1)) throw new LossOptionError(`${op}: discount must be in [0, 1), got ${gamma}`);
  // x_t = −λ·mask·rkl, discounted within each sequence when γ > 0.
  const x = new Float64Array(n);
  for (let i = 0; i < n; i++) if (mask[i]) x[i] = -lambda * (q[i] - p[i]);
  if (gamma > 0) {
    const shape = inputs.samplerLogps.shape;
    const T = shape.length > 0 ? shape[shape.length - 1] : 1;
    for (let o = 0; o < n; o += T) for (let t = T - 2; t >= 0; t--) x[o + t] += gamma * x[o + t + 1];
  }
  const adv = new Float32Array(n);
  const keepMasked = gamma > 0 && !(options.zeroMaskedAfterDiscount ?? false);
  const turnWeight = (i: number): number => (turns ? (options.turnWeights?.[turns[i]] ?? 1) : 1);
  const clampTo = (a: number): number => (c === undefined ? a : Math.min(c, Math.max(-c, a)));
  let klSum = 0;
  let count = 0;
  let clamped = 0;
  let sum = 0;
  let sumSq = 0;
  let min = Number.POSITIVE_INFINITY;
  let max = Number.NEGATIVE_INFINITY;
  for (let i = 0; i < n; i++) {
    if (!mask[i]) {
      // Same clamp and turn weight as a masked-in token; kept out of the metrics.
      if (keepMasked) adv[i] = clampTo(x[i]) * turnWeight(i);
      continue;
    }
    const rkl = q[i] - p[i];
    klSum += rkl;
    count++;
    let a = x[i];
    if (c !== undefined && (a > c || a < -c)) {
      a = a > c ? c : -c;
      clamped++;
    }
    if (turns) {
      const k = turns[i];
      const w = options.turnWeights?.[k];
      if (w !== undefined) a *= w;
    }
    adv[i] = a;
    sum += a;
    sumSq += a * a;
    if (a < min) min = a;
    if (a > max) max = a;
  }
  const mean = count > 0 ? sum / count : Number.NaN;
  const metrics: Record<string, number> = {
    teacher_kl: count > 0 ? klSum / count : Number.NaN,
    "advantage/mean": mean,
    "advantage/std": count > 0 ? Math.sqrt(Math.max(0, sumSq / count - mean * mean)) : Number.NaN,
    "advantage/min": count > 0 ? min : Number.NaN,
    "advantage/max": count > 0 ? max : Number.NaN,
    "advantage/clamp_fraction": count > 0 ? clamped / count : Number.NaN,
    num_tokens: count,
  };
  return { advantages: new Tensor(adv, inputs.samplerLogps.shape), metrics };
}

export type PolicyObjective = "importance_sampling" | "ppo" | "cispo";

export interface PolicyGradientInputs {
  /** [N] log πθ(y_t) of the learner (requires grad), e.g. from `tokenLogProbs`. */
  policyLogps: Tensor;
  /** [N] log q_sampler(y_t). */
  samplerLogps: Tensor;
  /** [N] advantages (constants). */
  advantages: Tensor;
  mask?: MaskLike | Tensor;
}

export interface PolicyGradientOptions {
  /** Default "importance_sampling" (Tinker's OPD default). */
  objective?: PolicyObjective;
  /** PPO: ratio clipped to [1 − clipLow, 1 + clipHigh]. Defaults 0.2 / 0.2 (Tinker 0.8 / 1.2). */
  clipLow?: number;
  clipHigh?: number;
  /** CISPO: bounds of the stop-gradient ratio weight. Default [0, 4] (Tinker). */
  cispoBounds?: readonly [number, number];
  /** "sum" over masked tokens (Tinker, default) or "mean" over them. Ignored with `numItems`. */
  reduction?: "sum" | "mean";
  /** Divide the sum by this token count (e.g. the whole accumulation step's). */
  numItems?: number;
}

/**
 * Importance-sampled policy-gradient surrogate with r_t = exp(log πθ − log q):
 * - importance_sampling: −Σ r_t A_t
 * - ppo: −Σ min(r_t A_t, clip(r_t, 1−ε_low, 1+ε_high) A_t) — the gradient is zero exactly where
 *   the clipped term is the smaller one (A > 0 and r > 1+ε_high, or A < 0 and r < 1−ε_low)
 * - cispo: −Σ sg(clip(r_t, lo, hi)) A_t log πθ(y_t)
 * Metrics: ratio/mean|min|max over masked tokens and clip fractions.
 */
export function policyGradientLoss(inputs: PolicyGradientInputs, options: PolicyGradientOptions = {}): LossResult {
  const op = "policyGradientLoss";
  const objective = options.objective ?? "importance_sampling";
  if (!["importance_sampling", "ppo", "cispo"].includes(objective)) {
    throw new LossOptionError(`${op}: objective must be importance_sampling, ppo or cispo; got ${String(objective)}`);
  }
  const epsLow = options.clipLow ?? 0.2;
  const epsHigh = options.clipHigh ?? 0.2;
  if (!(epsLow >= 0 && epsLow <= 1) || !(epsHigh >= 0) || !Number.isFinite(epsHigh)) {
    throw new LossOptionError(`${op}: clipLow must be in [0, 1] and clipHigh ≥ 0, got ${epsLow} / ${epsHigh}`);
  }
  const [cLo, cHi] = options.cispoBounds ?? [0, 4];
  if (!(cLo >= 0 && cHi >= cLo) || !Number.isFinite(cHi))
    throw new LossOptionError(`${op}: cispoBounds must satisfy 0 ≤ lo ≤ hi < ∞, got [${cLo}, ${cHi}]`);
  const lpT = inputs.policyLogps;
  const n = lpT.size;
  const lp = perToken(op, "policyLogps", lpT, n);
  const q = perToken(op, "samplerLogps", inputs.samplerLogps, n);
  const A = perToken(op, "advantages", inputs.advantages, n);
  const mask = maskValues(op, "mask", inputs.mask, n);
  let count = 0;
  for (let i = 0; i < n; i++) count += mask[i];
  let denom = 1;
  if (options.numItems !== undefined) {
    if (!(options.numItems > 0)) throw new LossOptionError(`${op}: numItems must be positive, got ${options.numItems}`);
    denom = options.numItems;
  } else if ((options.reduction ?? "sum") === "mean") denom = count;
  else if (options.reduction !== undefined && options.reduction !== "sum") {
    throw new LossOptionError(`${op}: reduction must be "sum" or "mean", got ${String(options.reduction)}`);
  }
  const dlp = new Float32Array(n);
  let total = 0;
  let rSum = 0;
  let rMin = Number.POSITIVE_INFINITY;
  let rMax = Number.NEGATIVE_INFINITY;
  let clipLowCount = 0;
  let clipHighCount = 0;
  for (let i = 0; i < n; i++) {
    if (!mask[i]) continue;
    const r = Math.exp(lp[i] - q[i]);
    const a = A[i];
    rSum += r;
    if (r < rMin) rMin = r;
    if (r > rMax) rMax = r;
    let l: number;
    let d: number;
    if (objective === "importance_sampling") {
      l = -r * a;
      d = -r * a; // d(r)/d(log πθ) = r
    } else if (objective === "ppo") {
      const lo = 1 - epsLow;
      const hi = 1 + epsHigh;
      const highActive = a > 0 && r > hi;
      const lowActive = a < 0 && r < lo;
      if (highActive || lowActive) {
        l = -(highActive ? hi : lo) * a;
        d = 0;
        if (highActive) clipHighCount++;
        else clipLowCount++;
      } else {
        l = -r * a;
        d = -r * a;
      }
    } else {
      const w = r < cLo ? cLo : r > cHi ? cHi : r;
      if (r < cLo) clipLowCount++;
      if (r > cHi) clipHighCount++;
      l = -w * a * lp[i];
      d = -w * a;
    }
    total += l;
    dlp[i] = d / denom;
  }
  const value = total / denom;
  const loss = record(new Tensor(Float32Array.of(value), []), `pg_${objective}`, [lpT], (g) => {
    const s = (g.dataSync() as Float32Array)[0];
    return [
      new Tensor(
        Float32Array.from(dlp, (v) => v * s),
        lpT.shape,
      ),
    ];
  });
  const metrics: Record<string, number> = {
    loss: value,
    "ratio/mean": count > 0 ? rSum / count : Number.NaN,
    "ratio/min": count > 0 ? rMin : Number.NaN,
    "ratio/max": count > 0 ? rMax : Number.NaN,
  };
  if (objective !== "importance_sampling") {
    metrics.clip_fraction = count > 0 ? (clipLowCount + clipHighCount) / count : Number.NaN;
    metrics["clip_fraction/low"] = count > 0 ? clipLowCount / count : Number.NaN;
    metrics["clip_fraction/high"] = count > 0 ? clipHighCount / count : Number.NaN;
  }
  return { loss, metrics };
}

export interface OpdLossInputs extends OpdAdvantageInputs {
  /** [N] learner log-probs (requires grad). */
  policyLogps: Tensor;
}

/** On-policy distillation in one call: `opdAdvantages` then `policyGradientLoss`, metrics merged. */
export function opdLoss(inputs: OpdLossInputs, options: OpdAdvantageOptions & PolicyGradientOptions = {}): LossResult {
  const { advantages, metrics: advMetrics } = noGrad(() => opdAdvantages(inputs, options));
  const { loss, metrics } = policyGradientLoss(
    { policyLogps: inputs.policyLogps, samplerLogps: inputs.samplerLogps, advantages, mask: inputs.mask },
    options,
  );
  return { loss, metrics: { ...advMetrics, ...metrics } };
}

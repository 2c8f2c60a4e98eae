// One OPD update: learner log-probs of the sampled tokens (with gradient), then @kiln/losses'
// opdLoss — advantage −λ(log q − log p_teacher), clamped to ±c, turn-weighted, and the
// PPO-clipped importance-sampled objective (docs/NUMERICS.md §4.3). With `divergence` the
// update instead fits the teacher's whole top-k distribution at every student position (GKD with
// λ = 1, docs/NUMERICS.md §3.3): the same on-policy data, an exact gradient instead of a one-sample one.
import { type ChunkedLogits, opdLoss, padTokenRows, teacherTopKDivergence, tokenLogProbs } from "@kiln/losses";
import type { Model } from "@kiln/models";
import { Tensor, div, mul, reshape, sum } from "@kiln/tensor";
import { RecipeError } from "../../errors.js";
import type { Objective } from "../trainer.js";
import { type LengthOptions, trainingLogits } from "../training-logits.js";
import { completionTokens, distillationStep, fitToLength } from "./fit.js";

export interface OpdSample {
  episodeId: string;
  turn: number;
  promptIds: number[];
  completionIds: number[];
  /** log q(y_t) recorded by the sampler. */
  samplerLogps: number[];
  /** log p_teacher(y_t) of the same tokens. */
  teacherLogps: number[];
  /**
   * The teacher's most likely tokens at each completion position (recipes' scoreWithTeacher's
   * `topLogprobs`): what the full-distribution objectives (OpdObjectiveOptions.divergence) fit.
   */
  teacherTop?: { tokenIds: number[]; logprobs: number[] }[];
  /**
   * Set on packed samples (packEpisodeTurns): 1 where a completion position is the student's own
   * token, 0 for what the environment and the template put between turns. Absent = all 1.
   */
  trainMask?: number[];
  /** Packed samples: the turn of each completion position. Absent = `turn` for all. */
  turns?: number[];
}

export interface OpdObjectiveOptions {
  /** Advantage clamp c (project choice, docs/NUMERICS.md §4.2; the seed used 3). */
  clamp?: number;
  /** Weight of the first `earlyTurns` turns' tokens (default 1.5 for turn 0). */
  earlyTurnWeight?: number;
  earlyTurns?: number;
  objective?: "importance_sampling" | "ppo" | "cispo";
  clipLow?: number;
  clipHigh?: number;
  klCoef?: number;
  /** "mean" over tokens (default here, so lr does not scale with batch length) or Tinker's "sum". */
  reduction?: "sum" | "mean";
  /**
   * "sampled" (default, the seed's OPD): the per-token advantage −(log q − log p_teacher) of the
   * sampled token. "reverse_kl" / "forward_kl": the divergence to the teacher's top-k
   * distribution (plus a tail bucket) at every completion position, turn-weighted; needs samples
   * scored with `teacherTopK`. Clamp and PPO clipping do not apply to these.
   */
  divergence?: "sampled" | "reverse_kl" | "forward_kl";
  /** Teacher tokens kept per position for the full-distribution objectives (default 20, vLLM's cap). */
  teacherTopK?: number;
}

export function turnWeights(options: OpdObjectiveOptions): number[] {
  return Array.from({ length: options.earlyTurns ?? 1 }, () => options.earlyTurnWeight ?? 1.5);
}

/** Inputs of opdLoss for a micro-batch of samples: right-padded rows, per-token arrays. */
export function opdBatch(samples: readonly OpdSample[], padId = 0) {
  if (samples.length === 0) throw new RecipeError("opdBatch: no samples");
  for (const s of samples) {
    if (s.promptIds.length === 0)
      throw new RecipeError(
        `opdBatch: ${s.episodeId} turn ${s.turn} has an empty prompt (its first token has no context)`,
      );
    if (s.samplerLogps.length !== s.completionIds.length || s.teacherLogps.length !== s.completionIds.length)
      throw new RecipeError(
        `opdBatch: ${s.episodeId} turn ${s.turn}: ${s.completionIds.length} tokens but ${s.samplerLogps.length} sampler and ${s.teacherLogps.length} teacher log-probs`,
      );
  }
  const { B, T, ids, attention } = padTokenRows(
    samples.map((s) => [...s.promptIds, ...s.completionIds]),
    padId,
  );
  const targets = new Int32Array(B * T).fill(-100);
  const sampler = new Float32Array(B * T);
  const teacher = new Float32Array(B * T);
  const mask = new Float32Array(B * T);
  const turn = new Float32Array(B * T);
  const k = Math.max(1, ...samples.map((s) => Math.max(0, ...(s.teacherTop ?? []).map((t) => t.tokenIds.length))));
  const topIds = new Int32Array(B * T * k).fill(-1);
  const topLogps = new Float32Array(B * T * k);
  samples.forEach((s, b) => {
    // Row t of the logits predicts token t+1: completion token j sits at P+j, scored by row P+j−1.
    const P = s.promptIds.length;
    s.completionIds.forEach((id, j) => {
      if (s.trainMask && !s.trainMask[j]) return;
      const r = b * T + P + j - 1;
      targets[r] = id;
      sampler[r] = s.samplerLogps[j];
      teacher[r] = s.teacherLogps[j];
      mask[r] = 1;
      turn[r] = s.turns ? s.turns[j] : s.turn;
      const top = s.teacherTop?.[j];
      if (top) {
        topIds.set(top.tokenIds, r * k);
        topLogps.set(top.logprobs, r * k);
      }
    });
  });
  return { B, T, ids, attention, targets, sampler, teacher, mask, turn, top: { k, ids: topIds, logprobs: topLogps } };
}

/** OPD loss of a micro-batch (gradient flows to whatever trainable tensors the model uses). */
export function opdBatchLoss(
  model: Model,
  samples: readonly OpdSample[],
  options: OpdObjectiveOptions & LengthOptions = {},
  /** Sees the logits (hidden states + head, rows in B·T order) and the completion mask (e.g. to log the entropy). */
  onLogits?: (logits: ChunkedLogits, mask: Float32Array) => void,
) {
  const b = opdBatch(samples);
  const logits = trainingLogits(
    model,
    new Tensor(b.ids, [b.B, b.T], "i32"),
    new Tensor(b.attention, [b.B, b.T], "i32"),
    options,
  );
  onLogits?.(logits, b.mask);
  const divergence = options.divergence ?? "sampled";
  if (divergence !== "sampled") return topKBatchLoss(logits, b, samples, divergence, options);
  const policyLogps = reshape(tokenLogProbs(logits, new Tensor(b.targets, [b.B, b.T], "i32")), [b.B * b.T]);
  return opdLoss(
    {
      policyLogps,
      samplerLogps: new Tensor(b.sampler, [b.B * b.T]),
      teacherLogps: new Tensor(b.teacher, [b.B * b.T]),
      mask: b.mask,
      turnIndex: b.turn,
    },
    {
      clamp: options.clamp ?? 3,
      turnWeights: turnWeights(options),
      objective: options.objective ?? "ppo",
      clipLow: options.clipLow,
      clipHigh: options.clipHigh,
      klCoef: options.klCoef,
      reduction: options.reduction ?? "mean",
    },
  );
}

function topKBatchLoss(
  logits: ChunkedLogits,
  b: ReturnType<typeof opdBatch>,
  samples: readonly OpdSample[],
  kind: "reverse_kl" | "forward_kl",
  options: OpdObjectiveOptions,
) {
  const missing = samples.find((s) => s.teacherTop?.length !== s.completionIds.length);
  if (missing)
    throw new RecipeError(
      `OPD ${kind}: ${missing.episodeId} turn ${missing.turn} has no teacher top-k log-probs per token (score the samples with teacherTopK)`,
    );
  const weights = turnWeights(options);
  const rowWeight = new Float32Array(b.B * b.T);
  let tokens = 0;
  let sampledKl = 0;
  for (let r = 0; r < rowWeight.length; r++) {
    if (!b.mask[r]) continue;
    rowWeight[r] = b.turn[r] < weights.length ? weights[b.turn[r]] : 1;
    tokens++;
    sampledKl += b.sampler[r] - b.teacher[r];
  }
  const perRow = reshape(teacherTopKDivergence(logits, b.top, { kind, mask: b.mask }), [b.B * b.T]);
  const total = sum(mul(perRow, new Tensor(rowWeight, [b.B * b.T])));
  const loss = (options.reduction ?? "mean") === "mean" ? div(total, Math.max(1, tokens)) : total;
  let divergenceMean = 0;
  const values = perRow.dataSync() as Float32Array;
  for (let r = 0; r < values.length; r++) if (b.mask[r]) divergenceMean += values[r];
  return {
    loss,
    metrics: {
      teacher_kl: sampledKl / Math.max(1, tokens),
      divergence: divergenceMean / Math.max(1, tokens),
      "advantage/mean": Number.NaN,
    } as Record<string, number>,
  };
}

/** OPD's PPO-clipped importance-sampled objective on teacher-scored turns. Items: completion tokens. */
export function opdObjective(model: Model, options: OpdObjectiveOptions & LengthOptions = {}): Objective<OpdSample> {
  const fit = (samples: readonly OpdSample[]) =>
    options.maxLength === undefined
      ? samples
      : samples.map((x) =>
          fitToLength(x as OpdSample & Record<string, unknown>, options.maxLength!, [
            "samplerLogps",
            "teacherLogps",
            ...(x.teacherTop ? (["teacherTop"] as const) : []),
            ...(x.trainMask ? (["trainMask", "turns"] as const) : []),
          ]),
        );
  return {
    items: (samples) => completionTokens(fit(samples)),
    loss(all, stepItems) {
      const samples = fit(all);
      const { out, loss, entropy } = distillationStep(completionTokens(samples), stepItems, (onLogits) =>
        opdBatchLoss(model, samples, options, onLogits),
      );
      return {
        loss,
        tokens: samples.reduce((a, s) => a + s.promptIds.length + s.completionIds.length, 0),
        metrics: {
          teacher_kl: out.metrics.teacher_kl,
          ...(out.metrics.divergence !== undefined ? { divergence: out.metrics.divergence } : {}),
          advantage_mean: out.metrics["advantage/mean"],
          clip_fraction: out.metrics.clip_fraction ?? 0,
          entropy,
        },
      };
    },
  };
}

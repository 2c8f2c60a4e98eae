// One OPD update: learner log-probs of the sampled tokens (with gradient), then @kiln/losses'
// opdLoss — advantage −λ(log q − log p_teacher), clamped to ±c, turn-weighted, and the
// PPO-clipped importance-sampled objective (numerics.md §4 "Objectives").
import { type ChunkedLogits, opdLoss, tokenLogProbs } from "@kiln/losses";
import type { Model } from "@kiln/models";
import { Tensor, reshape } from "@kiln/tensor";
import { type LengthOptions, trainingLogits } from "../trainer/training-logits.js";
import { RecipeError } from "./errors.js";
import type { OpdSample } from "./opd-samples.js";

export interface OpdObjectiveOptions {
  /** Advantage clamp c (project choice, numerics.md §4 "Advantage clamp"; the seed used 3). */
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
  const B = samples.length;
  const T = Math.max(...samples.map((s) => s.promptIds.length + s.completionIds.length));
  const ids = new Int32Array(B * T).fill(padId);
  const attention = new Int32Array(B * T);
  const targets = new Int32Array(B * T).fill(-100);
  const sampler = new Float32Array(B * T);
  const teacher = new Float32Array(B * T);
  const mask = new Float32Array(B * T);
  const turn = new Float32Array(B * T);
  samples.forEach((s, b) => {
    const seq = [...s.promptIds, ...s.completionIds];
    ids.set(seq, b * T);
    attention.fill(1, b * T, b * T + seq.length);
    // Row t of the logits predicts token t+1: completion token j sits at P+j, scored by row P+j−1.
    const P = s.promptIds.length;
    s.completionIds.forEach((id, j) => {
      const r = b * T + P + j - 1;
      targets[r] = id;
      sampler[r] = s.samplerLogps[j];
      teacher[r] = s.teacherLogps[j];
      mask[r] = 1;
      turn[r] = s.turn;
    });
  });
  return { B, T, ids, attention, targets, sampler, teacher, mask, turn };
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

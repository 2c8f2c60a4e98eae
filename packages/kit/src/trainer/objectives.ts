// The objectives the recipes train with, as `Objective`s of the one trainer loop. Each scales
// its micro-batch loss by (its items / the step's items), so accumulated micro-batches add up to
// the loss of one large batch: tokens for SFT (transformers' num_items_in_batch), pairs for DPO,
// completion tokens for OPD and self-distillation. Distillation objectives also log the
// student's mean token entropy.
import { countTargetTokens, sftLoss, tokenEntropy } from "@kiln/losses";
import type { LoraAdapter } from "@kiln/lora";
import type { Model } from "@kiln/models";
import { type Tensor, mul, noGrad } from "@kiln/tensor";
import {
  type ChatCodec,
  type Conversation,
  type PreferenceExample,
  conversationBatch,
  preferenceBatch,
} from "../recipes/batches.js";
import { dpoBatchLoss } from "../recipes/dpo-trainer.js";
import { type ConsolidateOptions, type ConsolidationSample, consolidationLoss } from "../recipes/oel.js";
import type { OpdSample } from "../recipes/opd-samples.js";
import { type OpdObjectiveOptions, opdBatchLoss } from "../recipes/opd-update.js";
import type { Objective } from "./trainer.js";
import { type LengthOptions, trainingLogits } from "./training-logits.js";

export type { LengthOptions };

/** Next-token cross-entropy on assistant tokens only. Items: target tokens. */
export function sftObjective(model: Model, codec: ChatCodec, options: LengthOptions = {}): Objective<Conversation> {
  const batches = new Map<readonly Conversation[], ReturnType<typeof conversationBatch>>();
  const batchOf = (examples: readonly Conversation[]) => {
    let b = batches.get(examples);
    if (!b) {
      batches.clear();
      b = conversationBatch(codec, examples, options.maxLength, options.truncationSide);
      batches.set(examples, b);
    }
    return b;
  };
  return {
    items: (examples) => countTargetTokens(batchOf(examples).labels),
    loss(examples, stepItems) {
      const b = batchOf(examples);
      const logits = trainingLogits(model, b.inputIds, b.attentionMask, options);
      const out = sftLoss(logits, b.labels, { numItemsInBatch: stepItems });
      return {
        loss: out.loss,
        tokens: b.inputIds.size,
        metrics: { mean_token_accuracy: out.metrics.mean_token_accuracy ?? 0 },
      };
    },
  };
}

/** DPO (sigmoid by default) against the adapter-off model. Items: pairs. */
export function dpoObjective(
  model: Model,
  adapter: LoraAdapter,
  codec: ChatCodec,
  options: LengthOptions & {
    beta?: number;
    /** A separate frozen reference model (default: the adapter-off model). */
    referenceModel?: Model;
  } = {},
): Objective<PreferenceExample> {
  const { referenceModel, ...forward } = options;
  return {
    items: (examples) => examples.length,
    loss(examples, stepItems) {
      const batch = preferenceBatch(codec, examples, options.maxLength);
      const out = dpoBatchLoss(model, adapter, batch, { beta: options.beta ?? 0.1 }, forward, referenceModel);
      const m = out.metrics;
      return {
        loss: mul(out.loss, examples.length / stepItems),
        tokens: batch.inputIds.size,
        metrics: {
          "rewards/chosen": m["rewards/chosen"],
          "rewards/rejected": m["rewards/rejected"],
          "rewards/margins": m["rewards/margins"],
          "rewards/accuracies": m["rewards/accuracies"],
        },
      };
    },
  };
}

/** Tokens the loss sees: completion tokens, less a packed sample's in-between tokens (trainMask 0). */
function completionTokens(
  samples: readonly { completionIds: readonly number[]; trainMask?: readonly number[] }[],
): number {
  return samples.reduce(
    (a, s) => a + (s.trainMask ? s.trainMask.reduce((m, v) => m + (v ? 1 : 0), 0) : s.completionIds.length),
    0,
  );
}

/**
 * A sample cut to `maxLength` tokens: the prompt loses its start first (keeping one token of
 * context, TRL keep_end), then the completion loses its end along with its per-token log-probs.
 */
export function fitToLength<
  S extends { promptIds: readonly number[]; completionIds: readonly number[] } & Record<string, unknown>,
>(sample: S, maxLength: number, perToken: (keyof S)[] = []): S {
  const total = sample.promptIds.length + sample.completionIds.length;
  if (!(total > maxLength)) return sample;
  const keepCompletion = Math.min(sample.completionIds.length, Math.max(1, maxLength - 1));
  const keepPrompt = Math.max(1, maxLength - keepCompletion);
  const out: Record<string, unknown> = {
    ...sample,
    promptIds: sample.promptIds.slice(sample.promptIds.length - keepPrompt),
    completionIds: sample.completionIds.slice(0, keepCompletion),
  };
  for (const k of perToken) out[k as string] = (sample[k] as readonly number[]).slice(0, keepCompletion);
  return out as S;
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
      const n = completionTokens(samples);
      let entropy = Number.NaN;
      const out = opdBatchLoss(model, samples, options, (logits, mask) => {
        entropy = noGrad(() => tokenEntropy(logits, { mask }).mean);
      });
      return {
        loss: mul(out.loss, n / stepItems),
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

/** Self-distillation: the adapter-on student without memory fitted to the adapter-off model with it. */
export function consolidationObjective(
  model: Model,
  adapter: LoraAdapter,
  options: ConsolidateOptions & LengthOptions = {},
  padId = 0,
): Objective<ConsolidationSample> {
  // The student's row (no memory) is the one cut to maxLength; the teacher keeps its full prompt.
  const fit = (samples: readonly ConsolidationSample[]) =>
    options.maxLength === undefined
      ? samples
      : samples.map((x) => {
          const cut = fitToLength(
            { promptIds: x.studentPromptIds, completionIds: x.completionIds },
            options.maxLength!,
          );
          return { ...x, studentPromptIds: [...cut.promptIds], completionIds: [...cut.completionIds] };
        });
  // The teacher is the adapter-off model: its head projects with the adapter off too.
  const teacher = (ids: Tensor, attention: Tensor) => {
    const logits = adapter.withDisabled(() => trainingLogits(model, ids, attention, options));
    return { ...logits, project: (rows: Tensor) => adapter.withDisabled(() => logits.project(rows)) };
  };
  return {
    items: (samples) => completionTokens(fit(samples)),
    loss(all, stepItems) {
      const samples = fit(all);
      const n = completionTokens(samples);
      let entropy = Number.NaN;
      const out = consolidationLoss(model, teacher, samples, options, padId, (logits, mask) => {
        entropy = noGrad(() => tokenEntropy(logits, { mask }).mean);
      });
      return {
        loss: mul(out.loss, n / stepItems),
        tokens: samples.reduce((a, s) => a + s.studentPromptIds.length + s.completionIds.length, 0),
        metrics: { divergence: out.metrics.loss ?? out.loss.item(), entropy },
      };
    },
  };
}

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

export interface LengthOptions {
  /** Longest row in tokens (SFT keeps the start, DPO the end). */
  maxLength?: number;
  /** Recompute each decoder layer in the backward instead of keeping its activations. */
  gradientCheckpointing?: boolean;
}

/** Next-token cross-entropy on assistant tokens only. Items: target tokens. */
export function sftObjective(model: Model, codec: ChatCodec, options: LengthOptions = {}): Objective<Conversation> {
  const batches = new Map<readonly Conversation[], ReturnType<typeof conversationBatch>>();
  const batchOf = (examples: readonly Conversation[]) => {
    let b = batches.get(examples);
    if (!b) {
      batches.clear();
      b = conversationBatch(codec, examples, options.maxLength);
      batches.set(examples, b);
    }
    return b;
  };
  return {
    items: (examples) => countTargetTokens(batchOf(examples).labels),
    loss(examples, stepItems) {
      const b = batchOf(examples);
      const logits = model.forward(b.inputIds, {
        attentionMask: b.attentionMask,
        checkpointLayers: options.gradientCheckpointing,
      });
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
  options: LengthOptions & { beta?: number } = {},
): Objective<PreferenceExample> {
  return {
    items: (examples) => examples.length,
    loss(examples, stepItems) {
      const batch = preferenceBatch(codec, examples, options.maxLength);
      const out = dpoBatchLoss(model, adapter, batch, { beta: options.beta ?? 0.1 });
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

function completionTokens(samples: readonly { completionIds: readonly number[] }[]): number {
  return samples.reduce((a, s) => a + s.completionIds.length, 0);
}

/** OPD's PPO-clipped importance-sampled objective on teacher-scored turns. Items: completion tokens. */
export function opdObjective(model: Model, options: OpdObjectiveOptions = {}): Objective<OpdSample> {
  return {
    items: completionTokens,
    loss(samples, stepItems) {
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
  options: ConsolidateOptions = {},
  padId = 0,
): Objective<ConsolidationSample> {
  const teacher = (ids: Tensor, attention: Tensor) =>
    adapter.withDisabled(() => model.forward(ids, { attentionMask: attention }));
  return {
    items: completionTokens,
    loss(samples, stepItems) {
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

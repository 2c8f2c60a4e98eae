// DPO on a LoRA adapter: the reference policy is the same model with the adapter disabled
// (TRL, PEFT model without ref_model; docs/NUMERICS.md §3.2), computed under noGrad. The loss and
// its metrics (rewards/chosen|rejected|margins|accuracies) are @kiln/losses' dpoLossFromLogits.
import { dpoLossFromLogits, type DpoOptions } from "@kiln/losses";
import type { LoraAdapter } from "@kiln/lora";
import type { Model } from "@kiln/models";
import { type Tensor, mul, noGrad } from "@kiln/tensor";
import { type ChatCodec, type PreferenceBatch, type PreferenceExample, preferenceBatch } from "../chat-batches.js";
import type { Objective } from "../trainer.js";
import { type LengthOptions, trainingLogits } from "../training-logits.js";

/**
 * One DPO forward: policy logits with the adapter on, reference logits with it off, both as
 * hidden states plus the head (projected `headChunkRows` rows at a time, never [T, V] at once).
 */
export function dpoBatchLoss(
  model: Model,
  adapter: LoraAdapter,
  batch: PreferenceBatch,
  options: DpoOptions = {},
  forward: LengthOptions = {},
  /** A separate frozen reference model (e.g. the base before SFT) instead of the adapter-off model. */
  referenceModel?: Model,
) {
  const policyLogits = trainingLogits(model, batch.inputIds, batch.attentionMask, forward);
  const referenceLogits = () => {
    const { checkpointLayers: _c, gradientCheckpointing: _g, ...plain } = forward;
    if (referenceModel) {
      const ref = noGrad(() => trainingLogits(referenceModel, batch.inputIds, batch.attentionMask, plain));
      return { ...ref, project: (rows: Tensor) => noGrad(() => ref.project(rows)) };
    }
    const ref = adapter.withDisabled(() =>
      noGrad(() => trainingLogits(model, batch.inputIds, batch.attentionMask, plain)),
    );
    return { ...ref, project: (rows: Tensor) => adapter.withDisabled(() => noGrad(() => ref.project(rows))) };
  };
  return dpoLossFromLogits(
    {
      policyLogits,
      inputIds: batch.inputIds,
      completionMask: batch.completionMask,
      reference: { logits: referenceLogits },
    },
    options,
  );
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

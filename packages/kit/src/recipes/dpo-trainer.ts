// DPO on a LoRA adapter (one micro-batch; training runs through trainer/trainer.ts): the reference policy is the same model with the adapter disabled
// (TRL, PEFT model without ref_model; docs/NUMERICS.md §3.2), computed under noGrad. The loss and
// its metrics (rewards/chosen|rejected|margins|accuracies) are @kiln/losses' dpoLossFromLogits.
import { dpoLossFromLogits, type DpoOptions } from "@kiln/losses";
import type { LoraAdapter } from "@kiln/lora";
import type { Model } from "@kiln/models";
import { type Tensor, noGrad } from "@kiln/tensor";
import { type LengthOptions, trainingLogits } from "../trainer/training-logits.js";
import type { PreferenceBatch } from "./batches.js";

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

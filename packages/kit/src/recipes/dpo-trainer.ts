// DPO on a LoRA adapter (one micro-batch; training runs through trainer/trainer.ts): the reference policy is the same model with the adapter disabled
// (TRL, PEFT model without ref_model; numerics.md §3 DPO), computed under noGrad. The loss and
// its metrics (rewards/chosen|rejected|margins|accuracies) are @kiln/losses' dpoLossFromLogits.
import { dpoLossFromLogits, type DpoOptions } from "@kiln/losses";
import type { LoraAdapter } from "@kiln/lora";
import type { Model } from "@kiln/models";
import { noGrad } from "@kiln/tensor";
import type { PreferenceBatch } from "./batches.js";

/** One DPO forward: policy logits with the adapter on, reference logits with it off. */
export function dpoBatchLoss(model: Model, adapter: LoraAdapter, batch: PreferenceBatch, options: DpoOptions = {}) {
  const policyLogits = model.forward(batch.inputIds, { attentionMask: batch.attentionMask });
  return dpoLossFromLogits(
    {
      policyLogits,
      inputIds: batch.inputIds,
      completionMask: batch.completionMask,
      reference: {
        logits: () =>
          adapter.withDisabled(() =>
            noGrad(() => model.forward(batch.inputIds, { attentionMask: batch.attentionMask })),
          ),
      },
    },
    options,
  );
}

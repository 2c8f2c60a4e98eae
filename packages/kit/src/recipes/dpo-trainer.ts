// DPO on a LoRA adapter: the reference policy is the same model with the adapter disabled
// (TRL, PEFT model without ref_model; numerics.md §3 DPO), computed under noGrad. The loss and
// its metrics (rewards/chosen|rejected|margins|accuracies) are @kiln/losses' dpoLossFromLogits.
import { dpoLossFromLogits, type DpoOptions } from "@kiln/losses";
import type { LoraAdapter } from "@kiln/lora";
import type { Model } from "@kiln/models";
import { AdamW, LrScheduler, backward, clipGradNorm, cosineSchedule, noGrad, warmupSteps } from "@kiln/tensor";
import type { PreferenceBatch } from "./batches.js";

export interface DpoTrainConfig extends DpoOptions {
  steps: number;
  lr: number;
  warmupRatio?: number;
  maxGradNorm?: number;
  weightDecay?: number;
  /** Use this optimizer (over the adapter's parameters) instead of a fresh AdamW, e.g. to checkpoint it. */
  optimizer?: AdamW;
}

export interface DpoStepMetrics {
  step: number;
  loss: number;
  lr: number;
  grad_norm: number;
  "rewards/chosen": number;
  "rewards/rejected": number;
  "rewards/margins": number;
  "rewards/accuracies": number;
  num_tokens: number;
}

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

/** `config.steps` optimizer steps of DPO over `nextBatch(step)`, updating the adapter's A/B. */
export function trainDpo(
  model: Model,
  adapter: LoraAdapter,
  nextBatch: (step: number) => PreferenceBatch,
  config: DpoTrainConfig,
  onStep?: (m: DpoStepMetrics) => void,
): DpoStepMetrics[] {
  const params = adapter.parameters();
  const opt = config.optimizer ?? new AdamW(params, { lr: config.lr, weightDecay: config.weightDecay ?? 0 });
  const sched = new LrScheduler(
    opt,
    config.lr,
    cosineSchedule(warmupSteps(config.steps, config.warmupRatio ?? 0.1), config.steps),
  );
  const history: DpoStepMetrics[] = [];
  adapter.train(true);
  try {
    for (let step = 0; step < config.steps; step++) {
      opt.zeroGrad();
      const out = dpoBatchLoss(model, adapter, nextBatch(step), config);
      backward(out.loss);
      const gradNorm = clipGradNorm(params, config.maxGradNorm ?? 1);
      const lr = opt.lr;
      opt.step();
      sched.step();
      const m: DpoStepMetrics = {
        step: step + 1,
        loss: out.loss.item(),
        lr,
        grad_norm: gradNorm,
        "rewards/chosen": out.metrics["rewards/chosen"],
        "rewards/rejected": out.metrics["rewards/rejected"],
        "rewards/margins": out.metrics["rewards/margins"],
        "rewards/accuracies": out.metrics["rewards/accuracies"],
        num_tokens: out.metrics.num_tokens,
      };
      history.push(m);
      onStep?.(m);
    }
  } finally {
    adapter.train(false);
  }
  return history;
}

// SFT trainer: it only schedules (TRL style). The loss is @kiln/losses' sftLoss, the
// optimizer @kiln/tensor's AdamW with clipping and a cosine schedule with warmup ratio.
import { countTargetTokens, sftLoss } from "@kiln/losses";
import type { Model } from "@kiln/models";
import { AdamW, LrScheduler, type Tensor, backward, clipGradNorm, cosineSchedule, warmupSteps } from "@kiln/tensor";

export interface SftBatch {
  /** i32 [B, T] */
  inputIds: Tensor;
  /** i32 [B, T], −100 where no loss applies (prompt, padding); shifted inside the loss. */
  labels: Tensor;
  /** [B, T] 1 = token, 0 = padding. */
  attentionMask?: Tensor;
}

export interface SftConfig {
  steps: number;
  lr: number;
  warmupRatio?: number;
  weightDecay?: number;
  maxGradNorm?: number;
  /** Micro-batches per optimizer step; the loss is normalised by all their target tokens. */
  gradAccum?: number;
  /** Use this optimizer (e.g. to checkpoint or resume its state); default a fresh AdamW over `params`. */
  optimizer?: AdamW;
}

export interface SftStepMetrics {
  step: number;
  loss: number;
  lr: number;
  grad_norm: number;
  num_tokens: number;
  mean_token_accuracy: number;
}

/**
 * Run `config.steps` optimizer steps over `nextBatch()` micro-batches, updating `params`
 * (e.g. a LoRA adapter's A/B). Returns per-step metrics (also passed to `onStep`).
 */
export function trainSft(
  model: Model,
  params: Tensor[],
  nextBatch: (step: number, micro: number) => SftBatch,
  config: SftConfig,
  onStep?: (m: SftStepMetrics) => void,
): SftStepMetrics[] {
  const accum = config.gradAccum ?? 1;
  const opt = config.optimizer ?? new AdamW(params, { lr: config.lr, weightDecay: config.weightDecay ?? 0 });
  const sched = new LrScheduler(
    opt,
    config.lr,
    cosineSchedule(warmupSteps(config.steps, config.warmupRatio ?? 0.1), config.steps),
  );
  const history: SftStepMetrics[] = [];
  for (let step = 0; step < config.steps; step++) {
    opt.zeroGrad();
    const batches = Array.from({ length: accum }, (_, micro) => nextBatch(step, micro));
    // transformers' num_items_in_batch: one normaliser for the whole accumulation step.
    const numItems = batches.reduce((acc, b) => acc + countTargetTokens(b.labels), 0);
    let loss = 0;
    let correct = 0;
    for (const b of batches) {
      const logits = model.forward(b.inputIds, { attentionMask: b.attentionMask });
      const out = sftLoss(logits, b.labels, { numItemsInBatch: numItems });
      backward(out.loss);
      loss += out.loss.item();
      correct += (out.metrics.mean_token_accuracy ?? 0) * (out.metrics.num_tokens ?? 0);
    }
    const gradNorm = clipGradNorm(params, config.maxGradNorm ?? 1);
    const lr = opt.lr;
    opt.step();
    sched.step();
    const m: SftStepMetrics = {
      step: step + 1,
      loss,
      lr,
      grad_norm: gradNorm,
      num_tokens: numItems,
      mean_token_accuracy: numItems ? correct / numItems : 0,
    };
    history.push(m);
    onStep?.(m);
  }
  return history;
}

// What the token-level objectives share: the completion tokens a micro-batch trains on (its items), the
// cut of an over-long sample to the model's context, and the distillation step's loss with its entropy.
import { type ChunkedLogits, type LossResult, tokenEntropy } from "@kiln/losses";
import { type Tensor, mul, noGrad } from "@kiln/tensor";

/** Tokens the loss sees: completion tokens, less a packed sample's in-between tokens (trainMask 0). */
export function completionTokens(
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

/**
 * A distillation objective's micro-batch: the loss scaled by (its completion tokens / the step's items),
 * and the student's mean token entropy, read from the logits the loss sees through `onLogits`.
 */
export function distillationStep<R extends { loss: Tensor; metrics: LossResult["metrics"] }>(
  completion: number,
  stepItems: number,
  run: (onLogits: (logits: ChunkedLogits, mask: ArrayLike<number>) => void) => R,
): { out: R; loss: Tensor; entropy: number } {
  let entropy = Number.NaN;
  const out = run((logits, mask) => {
    entropy = noGrad(() => tokenEntropy(logits, { mask }).mean);
  });
  return { out, loss: mul(out.loss, completion / stepItems), entropy };
}

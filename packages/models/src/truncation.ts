// Max-length truncation with a side, for training rows and prompt/completion pairs. Without it a
// long conversation sets the whole step's memory (activations grow with T; attention with T²).
import { GenerationError } from "./errors.js";

/** Which end loses tokens: "right" drops the end (TRL SFT `max_length`), "left" drops the start. */
export type TruncationSide = "left" | "right";

function checkLength(name: string, n: number | undefined): void {
  if (n !== undefined && !(Number.isInteger(n) && n >= 1))
    throw new GenerationError(`truncation: ${name} must be a positive integer, got ${n}`);
}

function checkSide(name: string, side: string): void {
  if (side !== "left" && side !== "right")
    throw new GenerationError(`truncation: ${name} must be "left" or "right", got ${JSON.stringify(side)}`);
}

/** The first (side "right") or last (side "left") `maxLength` entries of `items`. */
export function truncateTokens<T>(items: readonly T[], maxLength: number, side: TruncationSide = "right"): T[] {
  checkLength("maxLength", maxLength);
  checkSide("side", side);
  if (items.length <= maxLength) return [...items];
  return side === "right" ? items.slice(0, maxLength) : items.slice(items.length - maxLength);
}

export interface PromptCompletionLimits {
  /** Cap on prompt + completion. */
  maxLength?: number;
  maxPromptLength?: number;
  maxCompletionLength?: number;
  /** Which end of the prompt goes. Default "left": the end next to the completion stays (TRL keep_end). */
  promptSide?: TruncationSide;
  /** Which end of the completion goes. Default "right": the completion's start stays. */
  completionSide?: TruncationSide;
}

/**
 * Truncate a prompt/completion pair: each part to its own cap first, then, when the pair is still
 * longer than `maxLength`, the prompt down to what the completion leaves (but at least one token:
 * a completion needs context), then the completion to the rest.
 */
export function truncatePromptCompletion(
  promptIds: readonly number[],
  completionIds: readonly number[],
  limits: PromptCompletionLimits = {},
): { promptIds: number[]; completionIds: number[]; truncated: boolean } {
  const promptSide = limits.promptSide ?? "left";
  const completionSide = limits.completionSide ?? "right";
  checkSide("promptSide", promptSide);
  checkSide("completionSide", completionSide);
  checkLength("maxLength", limits.maxLength);
  checkLength("maxPromptLength", limits.maxPromptLength);
  checkLength("maxCompletionLength", limits.maxCompletionLength);
  let prompt = [...promptIds];
  let completion = [...completionIds];
  if (limits.maxPromptLength !== undefined) prompt = truncateTokens(prompt, limits.maxPromptLength, promptSide);
  if (limits.maxCompletionLength !== undefined)
    completion = truncateTokens(completion, limits.maxCompletionLength, completionSide);
  const max = limits.maxLength;
  if (max !== undefined && prompt.length + completion.length > max) {
    // The prompt gives way first, down to one token (a completion needs context).
    const promptKeep = Math.max(prompt.length > 0 ? 1 : 0, Math.min(prompt.length, max - completion.length));
    if (promptKeep < prompt.length) prompt = truncateTokens(prompt, promptKeep, promptSide);
    const completionKeep = max - prompt.length;
    if (completion.length > completionKeep)
      completion = completionKeep === 0 ? [] : truncateTokens(completion, completionKeep, completionSide);
  }
  const truncated = prompt.length !== promptIds.length || completion.length !== completionIds.length;
  return { promptIds: prompt, completionIds: completion, truncated };
}

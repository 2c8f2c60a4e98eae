// Which tokens of a rendered conversation the model produced: for each assistant message, the
// text after its generation prompt up to and including the end-of-turn token. Exact for
// multi-turn conversations because the spans are located in the single full render (where
// Qwen3 drops earlier turns' thinking), never in per-turn renders that may differ from it.
import type { Message } from "@kiln/rollout";
import type { ChatTemplate, RenderOptions } from "./chat-template.js";
import { ChatTemplateError } from "./errors.js";
import type { Tokenizer } from "./tokenizer.js";
import { type TruncationSide, truncateTokens } from "./truncation.js";

export interface TrainingRender {
  text: string;
  ids: number[];
  /** 1 where the token belongs to an assistant turn (the model produced it), else 0. */
  assistantMask: Uint8Array;
  /** Character spans [start, end) of the assistant turns in `text`. */
  spans: [number, number][];
  /** Tokens dropped by `maxLength` (ids and mask are cut together; text and spans stay whole). */
  truncatedTokens: number;
}

/**
 * The generation prompt the template appends after `prefix` (e.g. `<|im_start|>assistant\n`,
 * plus `<think>\n\n</think>\n\n` for Qwen3 with enable_thinking false).
 */
function generationPrompt(template: ChatTemplate, prefix: readonly Message[], options: RenderOptions): string {
  const without = template.render(prefix, { ...options, addGenerationPrompt: false });
  const withPrompt = template.render(prefix, { ...options, addGenerationPrompt: true });
  if (!withPrompt.startsWith(without) || withPrompt.length === without.length) {
    throw new ChatTemplateError(
      "chat template: add_generation_prompt does not append a prompt to the rendered conversation",
    );
  }
  return withPrompt.slice(without.length);
}

/** Character spans of the assistant turns in the full render. */
export function assistantSpans(
  template: ChatTemplate,
  messages: readonly Message[],
  endOfTurn: string,
  options: RenderOptions = {},
): { text: string; spans: [number, number][] } {
  const text = template.render(messages, { ...options, addGenerationPrompt: false });
  const spans: [number, number][] = [];
  let cursor = 0;
  messages.forEach((m, i) => {
    if (m.role !== "assistant") return;
    if (i === 0)
      throw new ChatTemplateError(
        "assistant mask: the conversation starts with an assistant message (no prompt precedes it)",
      );
    const prompt = generationPrompt(template, messages.slice(0, i), options);
    // The turn opener is the prompt's first line (the role header); what follows it in the
    // prompt (a prefilled empty think block) counts as prompt only where the render has it too.
    const nl = prompt.indexOf("\n");
    const header = nl >= 0 ? prompt.slice(0, nl + 1) : prompt;
    const at = text.indexOf(header, cursor);
    if (at < 0)
      throw new ChatTemplateError(
        `assistant mask: message ${i}: its turn opener ${JSON.stringify(header)} is not in the render`,
      );
    // All or nothing: `<think>` must not half-match `<tool_call>`.
    const prefill = prompt.slice(header.length);
    let start = at + header.length;
    if (prefill && text.startsWith(prefill, start)) start += prefill.length;
    const eot = text.indexOf(endOfTurn, start);
    if (eot < 0)
      throw new ChatTemplateError(
        `assistant mask: message ${i}: no end-of-turn ${JSON.stringify(endOfTurn)} after its start`,
      );
    const end = eot + endOfTurn.length;
    spans.push([start, end]);
    cursor = end;
  });
  return { text, spans };
}

/** Smallest k with decode(ids[0:k]).length ≥ charPos (decoded prefix lengths grow with k). */
function tokenIndexAt(tokenizer: Tokenizer, ids: number[], charPos: number): number {
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (tokenizer.decode(ids.slice(0, mid)).length >= charPos) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * Render a conversation for training: its token ids and the per-token assistant mask.
 * The end of a turn is the tokenizer's eos token (`<|im_end|>` for Qwen chat models) unless given.
 */
export function renderForTraining(
  tokenizer: Tokenizer,
  template: ChatTemplate,
  messages: readonly Message[],
  options: RenderOptions & { endOfTurn?: string; maxLength?: number; truncationSide?: TruncationSide } = {},
): TrainingRender {
  const { maxLength } = options;
  if (maxLength !== undefined && !(Number.isInteger(maxLength) && maxLength >= 1))
    throw new ChatTemplateError(`renderForTraining: maxLength must be a positive integer, got ${maxLength}`);
  const endOfTurn = options.endOfTurn ?? tokenizer.eosToken;
  if (!endOfTurn) throw new ChatTemplateError("assistant mask: the tokenizer has no eos_token; pass endOfTurn");
  const { text, spans } = assistantSpans(template, messages, endOfTurn, options);
  const ids = tokenizer.encode(text);
  if (tokenizer.decode(ids) !== text) {
    throw new ChatTemplateError(
      "assistant mask: the tokenizer does not decode the render back to itself (non-NFC text?), so token offsets are unknown",
    );
  }
  const assistantMask = new Uint8Array(ids.length);
  for (const [s, e] of spans) {
    // A token belongs to the turn when it starts inside [s, e).
    const first = tokenIndexAt(tokenizer, ids, s);
    const last = tokenIndexAt(tokenizer, ids, e);
    assistantMask.fill(1, first, last);
  }
  if (options.maxLength !== undefined && ids.length > options.maxLength) {
    const side = options.truncationSide ?? "right";
    const keptIds = truncateTokens(ids, options.maxLength, side);
    const keptMask = Uint8Array.from(truncateTokens([...assistantMask], options.maxLength, side));
    return { text, ids: keptIds, assistantMask: keptMask, spans, truncatedTokens: ids.length - keptIds.length };
  }
  return { text, ids, assistantMask, spans, truncatedTokens: 0 };
}

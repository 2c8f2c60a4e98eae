// Collation for the recipes: conversations → token rows with per-token masks, right padded.
// Labels come from the chat template's assistant spans (renderForTraining), so only the
// model's own tokens are trained on (TRL assistant_only_loss; docs/NUMERICS.md §3.1).
import type { ChatTemplate, Tokenizer } from "@kiln/models";
import type { Message, ToolSchema } from "@kiln/rollout";
import { renderForTraining } from "@kiln/models";
import { collatePreference, collateSft, lastSpanMask } from "@kiln/losses";
import type { Tensor } from "@kiln/tensor";
import type { SftBatch } from "../sft-trainer.js";
import { RecipeError } from "../errors.js";

export interface ChatCodec {
  tokenizer: Tokenizer;
  template: ChatTemplate;
}

export interface Conversation {
  messages: Message[];
  tools?: ToolSchema[];
  /**
   * Train on the last assistant reply only (default: every assistant reply). For windowed contexts
   * whose earlier replies are someone else's calls, e.g. OPD's privileged-teacher SFT set.
   */
  lossOnLastReply?: boolean;
}

function padId(codec: ChatCodec): number {
  return codec.tokenizer.padTokenId ?? codec.tokenizer.eosTokenId ?? 0;
}

/** A finite maxLength for renderForTraining (Infinity: no cut). */
function lengthLimit(maxLength: number): number | undefined {
  if (maxLength === Number.POSITIVE_INFINITY) return undefined;
  if (!(Number.isInteger(maxLength) && maxLength >= 1))
    throw new RecipeError(`maxLength must be a positive integer, got ${maxLength}`);
  return maxLength;
}

/**
 * Token ids of a conversation and its assistant-token mask, cut to `maxLength` tokens: "right"
 * (default) keeps the start, "left" the end (transformers' truncation_side).
 */
export function renderConversation(
  codec: ChatCodec,
  conversation: Conversation,
  maxLength = Number.POSITIVE_INFINITY,
  truncationSide: "left" | "right" = "right",
): { ids: number[]; assistantMask: Uint8Array } {
  const r = renderForTraining(codec.tokenizer, codec.template, conversation.messages, {
    tools: conversation.tools,
    maxLength: lengthLimit(maxLength),
    truncationSide,
  });
  return { ids: r.ids, assistantMask: r.assistantMask };
}

/** SFT batch: labels = input ids on assistant tokens, −100 elsewhere (shifted inside the loss). */
export function conversationBatch(
  codec: ChatCodec,
  conversations: readonly Conversation[],
  maxLength = Number.POSITIVE_INFINITY,
  truncationSide: "left" | "right" = "right",
): SftBatch {
  if (conversations.length === 0) throw new RecipeError("conversationBatch: no conversations to collate");
  const rendered = conversations.map((c) => {
    const r = renderConversation(codec, c, maxLength, truncationSide);
    return c.lossOnLastReply ? { ids: r.ids, assistantMask: lastSpanMask(r.assistantMask) } : r;
  });
  // The collator and the label rule live beside the loss (@kiln/losses collateSft).
  return collateSft(
    rendered.map((r) => ({ ids: r.ids, mask: r.assistantMask })),
    padId(codec),
  );
}

export interface PreferenceExample {
  /** The conversation the reply answers (ends before the assistant turn). */
  prompt: Message[];
  chosen: Message;
  rejected: Message;
  tools?: ToolSchema[];
}

export interface PreferenceBatch {
  /** i32 [2P, T]: all prompt+chosen rows, then all prompt+rejected rows (TRL DataCollatorForPreference). */
  inputIds: Tensor;
  /** [2P, T] 1 on completion (the final assistant turn's) tokens. */
  completionMask: Tensor;
  attentionMask: Tensor;
  pairs: number;
}

/** Token ids of prompt + reply and a mask of the reply's tokens (its last assistant span). */
function renderReply(
  codec: ChatCodec,
  prompt: Message[],
  reply: Message,
  tools?: ToolSchema[],
  maxLength = Number.POSITIVE_INFINITY,
) {
  // Over-long pairs keep their end (the reply) and lose the start of the prompt (TRL keep_end).
  const kept = renderForTraining(codec.tokenizer, codec.template, [...prompt, reply], {
    tools,
    maxLength: lengthLimit(maxLength),
    truncationSide: "left",
  });
  // Only the final assistant turn is the completion; earlier assistant turns are prompt.
  const mask = lastSpanMask(kept.assistantMask);
  if (!mask.some((v) => v === 1)) throw new RecipeError("preference batch: the reply rendered to no assistant tokens");
  return { ids: kept.ids, mask };
}

export function preferenceBatch(
  codec: ChatCodec,
  examples: readonly PreferenceExample[],
  maxLength = Number.POSITIVE_INFINITY,
): PreferenceBatch {
  if (examples.length === 0) throw new RecipeError("preferenceBatch: no pairs to collate");
  const chosen = examples.map((e) => renderReply(codec, e.prompt, e.chosen, e.tools, maxLength));
  const rejected = examples.map((e) => renderReply(codec, e.prompt, e.rejected, e.tools, maxLength));
  return collatePreference(chosen, rejected, padId(codec));
}

// Collation for the recipes: conversations → token rows with per-token masks, right padded.
// Labels come from the chat template's assistant spans (renderForTraining), so only the
// model's own tokens are trained on (TRL assistant_only_loss; numerics.md §3 "SFT loss masking").
import type { ChatTemplate, Tokenizer } from "@kiln/models";
import type { Message, ToolSchema } from "@kiln/rollout";
import { renderForTraining } from "@kiln/models";
import { Tensor } from "@kiln/tensor";
import type { SftBatch } from "../sft-trainer.js";
import { RecipeError } from "./errors.js";

export interface ChatCodec {
  tokenizer: Tokenizer;
  template: ChatTemplate;
}

export interface Conversation {
  messages: Message[];
  tools?: ToolSchema[];
}

function padId(codec: ChatCodec): number {
  return codec.tokenizer.padTokenId ?? codec.tokenizer.eosTokenId ?? 0;
}

/** Right-padded [B, T] rows with a [B, T] 0/1 mask per row (`marks`) and the attention mask. */
function padRows(rows: number[][], marks: Uint8Array[], pad: number) {
  const B = rows.length;
  const T = Math.max(1, ...rows.map((r) => r.length));
  const ids = new Int32Array(B * T).fill(pad);
  const mark = new Uint8Array(B * T);
  const attention = new Int32Array(B * T);
  rows.forEach((r, b) => {
    ids.set(r, b * T);
    mark.set(marks[b], b * T);
    attention.fill(1, b * T, b * T + r.length);
  });
  return { B, T, ids, mark, attention };
}

/** Token ids of a conversation and its assistant-token mask, cut to `maxLength` tokens (the start is kept). */
export function renderConversation(
  codec: ChatCodec,
  conversation: Conversation,
  maxLength = Number.POSITIVE_INFINITY,
): { ids: number[]; assistantMask: Uint8Array } {
  const r = renderForTraining(codec.tokenizer, codec.template, conversation.messages, { tools: conversation.tools });
  if (r.ids.length <= maxLength) return { ids: r.ids, assistantMask: r.assistantMask };
  return { ids: r.ids.slice(0, maxLength), assistantMask: r.assistantMask.slice(0, maxLength) };
}

/** SFT batch: labels = input ids on assistant tokens, −100 elsewhere (shifted inside the loss). */
export function conversationBatch(
  codec: ChatCodec,
  conversations: readonly Conversation[],
  maxLength = Number.POSITIVE_INFINITY,
): SftBatch {
  if (conversations.length === 0) throw new RecipeError("conversationBatch: no conversations to collate");
  const rendered = conversations.map((c) => renderConversation(codec, c, maxLength));
  const { B, T, ids, mark, attention } = padRows(
    rendered.map((r) => r.ids),
    rendered.map((r) => r.assistantMask),
    padId(codec),
  );
  const labels = new Int32Array(B * T).fill(-100);
  for (let i = 0; i < B * T; i++) if (mark[i]) labels[i] = ids[i];
  return {
    inputIds: new Tensor(ids, [B, T], "i32"),
    labels: new Tensor(labels, [B, T], "i32"),
    attentionMask: new Tensor(attention, [B, T], "i32"),
  };
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
function renderReply(codec: ChatCodec, prompt: Message[], reply: Message, tools?: ToolSchema[], maxLength = Infinity) {
  const full = renderForTraining(codec.tokenizer, codec.template, [...prompt, reply], { tools });
  // Over-long pairs keep their end (the reply) and lose the start of the prompt (TRL keep_end).
  const cut = Math.max(0, full.ids.length - maxLength);
  const r = { ids: full.ids.slice(cut), assistantMask: full.assistantMask.slice(cut) };
  // Only the final assistant turn is the completion; earlier assistant turns are prompt.
  const mask = new Uint8Array(r.ids.length);
  let end = r.ids.length;
  while (end > 0 && !r.assistantMask[end - 1]) end--;
  let start = end;
  while (start > 0 && r.assistantMask[start - 1]) start--;
  if (start === end) throw new RecipeError("preference batch: the reply rendered to no assistant tokens");
  mask.fill(1, start, end);
  return { ids: r.ids, mask };
}

export function preferenceBatch(
  codec: ChatCodec,
  examples: readonly PreferenceExample[],
  maxLength = Number.POSITIVE_INFINITY,
): PreferenceBatch {
  if (examples.length === 0) throw new RecipeError("preferenceBatch: no pairs to collate");
  const chosen = examples.map((e) => renderReply(codec, e.prompt, e.chosen, e.tools, maxLength));
  const rejected = examples.map((e) => renderReply(codec, e.prompt, e.rejected, e.tools, maxLength));
  const all = [...chosen, ...rejected];
  const { B, T, ids, mark, attention } = padRows(
    all.map((r) => r.ids),
    all.map((r) => r.mask),
    padId(codec),
  );
  return {
    inputIds: new Tensor(ids, [B, T], "i32"),
    completionMask: new Tensor(Float32Array.from(mark), [B, T]),
    attentionMask: new Tensor(attention, [B, T], "i32"),
    pairs: examples.length,
  };
}

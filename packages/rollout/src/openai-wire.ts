// The OpenAI-compatible wire format: zod schemas for the requests `createOpenAIServer` accepts
// and the response shapes both it and `HttpPolicy` use. Field names follow the OpenAI API
// reference (chat completions, legacy completions) plus the vLLM extensions we rely on:
// `return_token_ids` (→ `prompt_token_ids`, `choices[].token_ids`), `top_k`, `min_p`,
// `chat_template_kwargs.enable_thinking`.

import { z } from "zod";

const textPart = z.object({ type: z.literal("text"), text: z.string() });

export const wireToolCallSchema = z.object({
  id: z.string(),
  type: z.literal("function").default("function"),
  function: z.object({ name: z.string(), arguments: z.string() }),
});

export const wireMessageSchema = z.object({
  role: z.enum(["system", "user", "assistant", "tool", "developer"]),
  content: z.union([z.string(), z.array(textPart), z.null()]).optional(),
  tool_calls: z.array(wireToolCallSchema).optional(),
  tool_call_id: z.string().optional(),
  name: z.string().optional(),
  reasoning_content: z.string().optional(),
});

export const wireToolSchema = z.object({
  type: z.literal("function"),
  function: z.object({
    name: z.string().min(1),
    description: z.string().optional(),
    parameters: z.record(z.string(), z.unknown()).optional(),
    strict: z.boolean().optional(),
  }),
});

const stopSchema = z.union([z.string(), z.array(z.string()).max(16)]).optional();

/** OpenAI's `tool_choice`: a mode, or one function by name. */
export const wireToolChoiceSchema = z.union([
  z.enum(["none", "auto", "required"]),
  z.object({ type: z.literal("function"), function: z.object({ name: z.string() }) }),
]);
export type WireToolChoice = z.infer<typeof wireToolChoiceSchema>;

/**
 * Sampling fields OpenAI and vLLM accept that this server checks but does not apply; any value
 * other than the neutral one is refused by name (see the server's validation).
 */
const unappliedSamplingFields = {
  frequency_penalty: z.number().min(-2).max(2).optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  /** vLLM extension; 1 is off. */
  repetition_penalty: z.number().gt(0).optional(),
  logit_bias: z.record(z.string(), z.number().min(-100).max(100)).nullable().optional(),
  user: z.string().optional(),
};

const streamOptionsSchema = z.object({ include_usage: z.boolean().optional() }).optional();

export const chatCompletionRequestSchema = z.looseObject({
  model: z.string().optional(),
  messages: z.array(wireMessageSchema).min(1),
  tools: z.array(wireToolSchema).optional(),
  tool_choice: wireToolChoiceSchema.optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: z.looseObject({ type: z.enum(["text", "json_object", "json_schema"]) }).optional(),
  ...unappliedSamplingFields,
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  /** -1 (vLLM's convention) or 0: no top-k filter. */
  top_k: z.number().int().min(-1).optional(),
  min_p: z.number().min(0).max(1).optional(),
  max_tokens: z.number().int().min(1).optional(),
  max_completion_tokens: z.number().int().min(1).optional(),
  seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  stop: stopSchema,
  n: z.number().int().min(1).max(64).optional(),
  logprobs: z.boolean().optional(),
  top_logprobs: z.number().int().min(0).max(20).optional(),
  stream: z.boolean().optional(),
  stream_options: streamOptionsSchema,
  return_token_ids: z.boolean().optional(),
  chat_template_kwargs: z.object({ enable_thinking: z.boolean().optional() }).loose().optional(),
});
export type ChatCompletionRequest = z.infer<typeof chatCompletionRequestSchema>;

export const completionRequestSchema = z.looseObject({
  model: z.string().optional(),
  prompt: z.union([z.string(), z.array(z.number().int().min(0)).min(1)]),
  max_tokens: z.number().int().min(0).optional(),
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().gt(0).max(1).optional(),
  top_k: z.number().int().min(-1).optional(),
  min_p: z.number().min(0).max(1).optional(),
  seed: z.number().int().min(0).max(Number.MAX_SAFE_INTEGER).optional(),
  stop: stopSchema,
  n: z.number().int().min(1).max(64).optional(),
  echo: z.boolean().optional(),
  /** vLLM extension: log-probs of the prompt tokens (0 = only the actual token). */
  prompt_logprobs: z.number().int().min(0).max(20).nullable().optional(),
  logprobs: z.number().int().min(0).max(20).nullable().optional(),
  stream: z.boolean().optional(),
  stream_options: streamOptionsSchema,
  return_token_ids: z.boolean().optional(),
  best_of: z.number().int().min(1).nullable().optional(),
  suffix: z.string().nullable().optional(),
  ...unappliedSamplingFields,
});
export type CompletionRequest = z.infer<typeof completionRequestSchema>;

export interface WireTopLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
}

export interface WireChatLogprob extends WireTopLogprob {
  top_logprobs: WireTopLogprob[];
}

export interface WireChatChoice {
  index: number;
  message: {
    role: "assistant";
    content: string | null;
    tool_calls?: z.infer<typeof wireToolCallSchema>[];
    reasoning_content?: string;
  };
  logprobs: { content: WireChatLogprob[] } | null;
  finish_reason: string;
  token_ids?: number[];
}

export interface WireUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

export interface ChatCompletionResponse {
  id: string;
  object: "chat.completion";
  created: number;
  model: string;
  choices: WireChatChoice[];
  usage: WireUsage;
  prompt_token_ids?: number[];
}

export interface WireCompletionLogprobs {
  tokens: string[];
  token_logprobs: (number | null)[];
  top_logprobs: (Record<string, number> | null)[] | null;
  text_offset: number[];
}

export interface CompletionResponse {
  id: string;
  object: "text_completion";
  created: number;
  model: string;
  choices: {
    index: number;
    text: string;
    logprobs: WireCompletionLogprobs | null;
    finish_reason: string;
    token_ids?: number[];
    /** vLLM: per prompt position, null for the first, else {token id: {logprob, rank, decoded_token}}. */
    prompt_logprobs?: (Record<string, { logprob: number; rank: number | null; decoded_token: string | null }> | null)[];
  }[];
  usage: WireUsage;
  prompt_token_ids?: number[];
}

/** The OpenAI error body. */
export interface WireError {
  error: { message: string; type: string; param: string | null; code: string | null };
}

/** Text of a message's content (OpenAI allows an array of text parts). */
export function wireContentText(content: string | { type: "text"; text: string }[] | null | undefined): string | null {
  if (content === undefined || content === null) return null;
  return typeof content === "string" ? content : content.map((p) => p.text).join("");
}

// Generation: a validated request turned into Policy calls and the Policy's generations turned
// into OpenAI response bodies (chat choices with parsed tool calls, completions with echo and
// log-probs). Streaming (streaming.ts) reuses the same parameters and choices.
import { randomUUID } from "node:crypto";
import { replyIdSeed } from "../episode.js";
import type {
  ChatCompletionRequest,
  ChatCompletionResponse,
  CompletionRequest,
  CompletionResponse,
  WireChatChoice,
  WireChatLogprob,
  WireCompletionLogprobs,
} from "../openai-wire.js";
import { wireContentText } from "../openai-wire.js";
import { assistantMessageFromText } from "../parse-tool-calls.js";
import { deriveSeed } from "../seeds.js";
import type { GenerateParams, Generation, Message, TokenScores, ToolSchema } from "../types.js";
import { HttpError } from "./http.js";
import type { ServerConfig } from "./options.js";

export function chatParams(request: ChatCompletionRequest, seed: number, signal: AbortSignal): GenerateParams {
  const maxTokens = request.max_completion_tokens ?? request.max_tokens;
  return {
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.top_p !== undefined ? { topP: request.top_p } : {}),
    // vLLM's convention: top_k -1 means no top-k filter.
    ...(request.top_k !== undefined && request.top_k !== -1 ? { topK: request.top_k } : {}),
    ...(request.min_p !== undefined ? { minP: request.min_p } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    seed,
    ...(request.stop !== undefined ? { stop: typeof request.stop === "string" ? [request.stop] : request.stop } : {}),
    logprobs: request.logprobs ?? false,
    ...(request.top_logprobs ? { topLogprobs: request.top_logprobs } : {}),
    ...(request.chat_template_kwargs?.enable_thinking !== undefined
      ? { enableThinking: request.chat_template_kwargs.enable_thinking }
      : {}),
    signal,
  };
}

export function chatInputs(request: ChatCompletionRequest): { messages: Message[]; tools: ToolSchema[] | undefined } {
  const messages = request.messages.map(toMessage);
  // tool_choice "none", as vLLM applies it: the tools stay out of the prompt and the reply is not
  // parsed for calls.
  if (request.tool_choice === "none") return { messages, tools: undefined };
  const tools = request.tools?.map(
    (t): ToolSchema => ({
      type: "function",
      function: {
        name: t.function.name,
        ...(t.function.description !== undefined ? { description: t.function.description } : {}),
        parameters: t.function.parameters ?? { type: "object", properties: {} },
      },
    }),
  );
  return { messages, tools };
}

/** Choice 0 uses the request seed itself, so n=1 and n=k agree on the first choice. */
export const choiceSeed = (base: number, i: number): number => (i === 0 ? base : deriveSeed(base, "choice", i));

/** The request's seed, or a random one. */
export const requestSeed = (seed: number | undefined): number => seed ?? Math.floor(Math.random() * 2 ** 31);

export function toChoice(
  gen: Generation,
  index: number,
  messages: Message[],
  tools: ToolSchema[] | undefined,
  request: ChatCompletionRequest,
): WireChatChoice {
  // A policy that returns raw text gets the server-side tool parser (what vLLM's
  // --tool-call-parser does); a policy that already parsed keeps its calls.
  let message: Message;
  if (request.tool_choice === "none") {
    // No calls with tool_choice "none", even from a policy that parsed some: its text is the reply.
    message = { role: "assistant", content: gen.text !== "" ? gen.text : (gen.message.content ?? "") };
    if (gen.message.reasoning_content !== undefined) message.reasoning_content = gen.message.reasoning_content;
  } else if (gen.message.tool_calls && gen.message.tool_calls.length > 0) message = gen.message;
  else {
    const text = gen.text !== "" ? gen.text : (gen.message.content ?? "");
    message = assistantMessageFromText(text, { tools, idSeed: replyIdSeed(messages, text) }).message;
    if (gen.message.reasoning_content !== undefined && message.reasoning_content === undefined)
      message.reasoning_content = gen.message.reasoning_content;
  }
  const choice: WireChatChoice = {
    index,
    message: {
      role: "assistant",
      content: message.content,
      ...(message.tool_calls ? { tool_calls: message.tool_calls } : {}),
      ...(message.reasoning_content !== undefined ? { reasoning_content: message.reasoning_content } : {}),
    },
    logprobs: request.logprobs ? { content: (gen.logprobs ?? []).map(toWireLogprob) } : null,
    finish_reason: message.tool_calls && gen.finishReason === "stop" ? "tool_calls" : gen.finishReason,
  };
  if (request.return_token_ids && gen.completionTokenIds) choice.token_ids = gen.completionTokenIds;
  return choice;
}

export function usageOf(gens: Generation[]) {
  const promptTokens = gens[0]?.promptTokenIds?.length ?? 0;
  const completionTokens = gens.reduce((s, g) => s + (g.completionTokenIds?.length ?? g.logprobs?.length ?? 0), 0);
  return {
    prompt_tokens: promptTokens,
    completion_tokens: completionTokens,
    total_tokens: promptTokens + completionTokens,
  };
}

/** A whole (non-streamed) chat completion: `n` generations, one after the other. */
export async function chatCompletion(
  config: ServerConfig,
  request: ChatCompletionRequest,
  signal: AbortSignal,
): Promise<ChatCompletionResponse> {
  const { messages, tools } = chatInputs(request);
  const n = request.n ?? 1;
  const baseSeed = requestSeed(request.seed);
  const id = `chatcmpl-${randomUUID()}`;
  const created = Math.floor(Date.now() / 1000);
  const gens: Generation[] = [];
  for (let i = 0; i < n; i++)
    gens.push(await config.policy.generate(messages, tools, chatParams(request, choiceSeed(baseSeed, i), signal)));
  const body: ChatCompletionResponse = {
    id,
    object: "chat.completion",
    created,
    model: request.model ?? config.servedModelNames[0],
    choices: gens.map((g, i) => toChoice(g, i, messages, tools, request)),
    usage: usageOf(gens),
  };
  if (request.return_token_ids && gens[0].promptTokenIds) body.prompt_token_ids = gens[0].promptTokenIds;
  return body;
}

/** A completions request's prompt as token ids (and text), checked against the context. */
export interface PreparedPrompt {
  promptIds: number[];
  promptText: string;
  maxTokens: number;
}

export function preparePrompt(config: ServerConfig, request: CompletionRequest): PreparedPrompt {
  const { contextLength } = config;
  const tok = config.tokenizer;
  let promptIds: number[];
  if (typeof request.prompt === "string") {
    if (!tok)
      throw new HttpError(
        400,
        "this server has no tokenizer: send the prompt as token ids",
        "invalid_request_error",
        "prompt",
      );
    promptIds = tok.encode(request.prompt);
  } else promptIds = request.prompt;
  if (promptIds.length === 0)
    throw new HttpError(400, "prompt encodes to no tokens", "invalid_request_error", "prompt");
  const maxTokens = request.max_tokens ?? Math.min(config.defaultCompletionTokens, config.maxTokensLimit);
  if (contextLength !== undefined && promptIds.length + maxTokens > contextLength) {
    throw new HttpError(
      400,
      `prompt (${promptIds.length} tokens) + max_tokens (${maxTokens}) exceeds the model's context length of ${contextLength}`,
      "invalid_request_error",
      promptIds.length >= contextLength ? "prompt" : "max_tokens",
    );
  }
  const promptText = typeof request.prompt === "string" ? request.prompt : tok ? tok.decode(promptIds) : "";
  return { promptIds, promptText, maxTokens };
}

/** Policy.complete's parameters for choice `i` of a completions request. */
export function completionParams(
  request: CompletionRequest,
  maxTokens: number,
  seed: number,
  signal: AbortSignal,
): GenerateParams {
  const wantLogprobs = request.logprobs !== undefined && request.logprobs !== null;
  return {
    maxTokens,
    signal,
    seed,
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.top_p !== undefined ? { topP: request.top_p } : {}),
    ...(request.top_k !== undefined && request.top_k !== -1 ? { topK: request.top_k } : {}),
    ...(request.min_p !== undefined ? { minP: request.min_p } : {}),
    ...(request.stop !== undefined ? { stop: typeof request.stop === "string" ? [request.stop] : request.stop } : {}),
    logprobs: wantLogprobs,
    ...(request.logprobs ? { topLogprobs: request.logprobs } : {}),
  };
}

/** The policy that continues raw prompts, or a 400 saying it cannot. */
export function completer(config: ServerConfig): NonNullable<ServerConfig["policy"]["complete"]> {
  const policy = config.policy;
  if (!policy.complete)
    throw new HttpError(
      400,
      `policy "${policy.id}" cannot continue raw prompts; use max_tokens 0 with echo`,
      "invalid_request_error",
      "max_tokens",
    );
  return policy.complete.bind(policy);
}

export async function completion(
  config: ServerConfig,
  request: CompletionRequest,
  signal: AbortSignal,
): Promise<CompletionResponse> {
  const { policy } = config;
  const tok = config.tokenizer;
  const { promptIds, promptText, maxTokens } = preparePrompt(config, request);
  const wantLogprobs = request.logprobs !== undefined && request.logprobs !== null;
  let promptScores: number[] | null = null;
  let promptTop: TokenScores["top"] | undefined;
  const wantPromptLogprobs = request.prompt_logprobs !== undefined && request.prompt_logprobs !== null;
  if ((request.echo && wantLogprobs) || wantPromptLogprobs) {
    if (!policy.score)
      throw new HttpError(
        400,
        `policy "${policy.id}" cannot score prompts (no score())`,
        "invalid_request_error",
        "echo",
      );
    // Policy.score with no messages scores a raw token sequence (see Policy.score).
    const topK = request.prompt_logprobs ? request.prompt_logprobs : undefined;
    const scored = await policy.score([], promptIds, undefined, topK ? { topLogprobs: topK } : undefined);
    promptScores = scored.logprobs;
    promptTop = topK ? scored.top : undefined;
    if (topK && promptTop?.length !== promptIds.length)
      throw new HttpError(
        400,
        `policy "${policy.id}" cannot list the top ${topK} prompt log-probs per position`,
        "invalid_request_error",
        "prompt_logprobs",
      );
    if (promptScores.length !== promptIds.length) {
      throw new HttpError(
        500,
        `policy scored ${promptScores.length} of ${promptIds.length} prompt tokens`,
        "server_error",
      );
    }
  }
  const n = request.n ?? 1;
  const baseSeed = requestSeed(request.seed);
  const choices: CompletionResponse["choices"] = [];
  let completionTokens = 0;
  for (let i = 0; i < n; i++) {
    let gen: Generation | null = null;
    if (maxTokens > 0) {
      if (!policy.complete) {
        throw new HttpError(
          400,
          `policy "${policy.id}" cannot continue raw prompts; use max_tokens 0 with echo`,
          "invalid_request_error",
          "max_tokens",
        );
      }
      gen = await policy.complete(promptIds, {
        maxTokens,
        signal,
        seed: choiceSeed(baseSeed, i),
        ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
        ...(request.top_p !== undefined ? { topP: request.top_p } : {}),
        ...(request.top_k !== undefined && request.top_k !== -1 ? { topK: request.top_k } : {}),
        ...(request.min_p !== undefined ? { minP: request.min_p } : {}),
        ...(request.stop !== undefined
          ? { stop: typeof request.stop === "string" ? [request.stop] : request.stop }
          : {}),
        logprobs: wantLogprobs,
        ...(request.logprobs ? { topLogprobs: request.logprobs } : {}),
      });
      completionTokens += gen.completionTokenIds?.length ?? 0;
    }
    const genIds = gen?.completionTokenIds ?? [];
    const genText = gen?.text ?? "";
    const text = (request.echo ? promptText : "") + genText;
    let logprobs: WireCompletionLogprobs | null = null;
    if (wantLogprobs) {
      const ids = [...(request.echo ? promptIds : []), ...genIds];
      const lps: (number | null)[] = [
        ...(request.echo ? promptScores!.map((v, k) => (k === 0 ? null : v)) : []),
        ...(gen?.logprobs ?? []).map((l) => l.logprob),
      ];
      const tokens = ids.map((id) => (tok ? tok.tokenText(id) : `token_id:${id}`));
      const offsets: number[] = [];
      let at = 0;
      for (const t of tokens) {
        offsets.push(at);
        at += tok ? t.length : 0;
      }
      const genTop = (gen?.logprobs ?? []).map((l) =>
        l.top ? Object.fromEntries(l.top.map((t) => [t.token, t.logprob])) : null,
      );
      logprobs = {
        tokens,
        token_logprobs: lps,
        top_logprobs: request.logprobs ? [...(request.echo ? promptIds.map(() => null) : []), ...genTop] : null,
        text_offset: offsets,
      };
    }
    choices.push({
      index: i,
      text,
      logprobs,
      ...(wantPromptLogprobs
        ? {
            prompt_logprobs: promptIds.map((id, k) =>
              k === 0
                ? null
                : {
                    // vLLM: the k best with their ranks, plus the actual token (rank null when unknown).
                    ...Object.fromEntries(
                      (promptTop?.[k]?.tokenIds ?? []).map((t, r) => [
                        String(t),
                        {
                          logprob: promptTop![k].logprobs[r],
                          rank: r + 1,
                          decoded_token: tok ? tok.tokenText(t) : null,
                        },
                      ]),
                    ),
                    [String(id)]: {
                      logprob: promptScores![k],
                      rank: promptTop?.[k] ? promptTop[k].tokenIds.indexOf(id) + 1 || null : null,
                      decoded_token: tok ? tok.tokenText(id) : null,
                    },
                  },
            ),
          }
        : {}),
      finish_reason: gen ? (gen.finishReason === "length" ? "length" : "stop") : "length",
      ...(request.return_token_ids ? { token_ids: genIds } : {}),
    });
  }
  return {
    id: `cmpl-${randomUUID()}`,
    object: "text_completion",
    created: Math.floor(Date.now() / 1000),
    model: request.model ?? config.servedModelNames[0],
    choices,
    usage: {
      prompt_tokens: promptIds.length,
      completion_tokens: completionTokens,
      total_tokens: promptIds.length + completionTokens,
    },
    ...(request.return_token_ids ? { prompt_token_ids: promptIds } : {}),
  };
}

function toMessage(m: ChatCompletionRequest["messages"][number]): Message {
  const out: Message = { role: m.role === "developer" ? "system" : m.role, content: wireContentText(m.content) };
  if (m.tool_calls && m.tool_calls.length > 0) {
    out.tool_calls = m.tool_calls.map((tc) => ({
      id: tc.id,
      type: "function",
      function: { name: tc.function.name, arguments: tc.function.arguments },
    }));
  }
  if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if (m.name !== undefined) out.name = m.name;
  if (m.reasoning_content !== undefined) out.reasoning_content = m.reasoning_content;
  return out;
}

function toWireLogprob(l: {
  token: string;
  logprob: number;
  top?: { token: string; logprob: number }[];
}): WireChatLogprob {
  const bytes = (t: string) => [...new TextEncoder().encode(t)];
  return {
    token: l.token,
    logprob: l.logprob,
    bytes: bytes(l.token),
    top_logprobs: (l.top ?? []).map((t) => ({ token: t.token, logprob: t.logprob, bytes: bytes(t.token) })),
  };
}

// An OpenAI-compatible HTTP server for any Policy (`kiln serve` is built on it):
//   POST /v1/chat/completions  tools, n, seed, logprobs/top_logprobs, stream (SSE), return_token_ids
//   POST /v1/completions       raw prompts; echo + logprobs through Policy.score, continuation through Policy.complete
//   GET  /v1/models, GET /health
// A server people can leave running: requests are validated (every client mistake is a 4xx
// with an OpenAI error body); bodies, prompts and max_tokens are capped (defaults from the
// model's context length); at most `maxConcurrency` requests run at once and at most `maxQueue`
// wait, each for at most `maxQueueWaitMs` (beyond that: 429 / 503); generation is cancelled
// (AbortSignal) when the client disconnects, and streamed as the policy produces text;
// slow or idle sockets are closed by header/request/keep-alive timeouts; an optional API key
// (Bearer) guards /v1. The server never generates on its own: a policy that computes on the
// event loop blocks it, so `kiln serve` runs the model in a worker thread. Binds 127.0.0.1
// unless told otherwise. Node only (node:http).

import { createHash, randomUUID, timingSafeEqual } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { z } from "zod";
import type { TextTokenizer } from "./char-tokenizer.js";
import { replyIdSeed } from "./episode.js";
import { PolicyRequestError, RolloutConfigError } from "./errors.js";
import {
  type ChatCompletionRequest,
  type ChatCompletionResponse,
  type CompletionRequest,
  type CompletionResponse,
  chatCompletionRequestSchema,
  completionRequestSchema,
  type WireChatChoice,
  type WireChatLogprob,
  type WireCompletionLogprobs,
  type WireError,
  wireContentText,
} from "./openai-wire.js";
import { assistantMessageFromText } from "./parse-tool-calls.js";
import { deriveSeed } from "./seeds.js";
import type { GenerateParams, Generation, Message, Policy, TokenScores, ToolSchema } from "./types.js";

export interface OpenAIServerOptions {
  policy: Policy;
  /** Needed for string prompts on /v1/completions and for token texts; chat works without it. */
  tokenizer?: TextTokenizer;
  /** Model name reported by /v1/models (default: policy.id). Requests may name any model. */
  modelId?: string;
  /** Default 127.0.0.1. Binding anything else without `apiKey` logs a warning. */
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Requests processed at once (default 4; an integer ≥ 1). */
  maxConcurrency?: number;
  /** Requests waiting for a slot before 429 (default 256; an integer ≥ 0). */
  maxQueue?: number;
  /** Longest wait for a slot before 503 (default 60 s). */
  maxQueueWaitMs?: number;
  /** Largest accepted request body (default 4 MiB); larger gets 413. */
  maxBodyBytes?: number;
  /** Largest `n` accepted (default 16). */
  maxN?: number;
  /**
   * The model's context length (config.json `max_position_embeddings`). When given, a
   * completions prompt plus `max_tokens` must fit in it, and it bounds the max_tokens limit.
   */
  contextLength?: number;
  /** Largest `max_tokens` accepted (default: contextLength, else 8192); more is a 400. */
  maxTokensLimit?: number;
  /** `max_tokens` when a completions request gives none (default 16, as OpenAI's). */
  defaultCompletionTokens?: number;
  /** Largest prompt in characters, checked before tokenizing (default: 16 × contextLength, else 1 MiB). */
  maxPromptChars?: number;
  /** Vocabulary size: prompt token ids must lie in [0, vocabSize). */
  vocabSize?: number;
  /** When set, every /v1 request needs `Authorization: Bearer <apiKey>` (401 otherwise); /health stays open. */
  apiKey?: string;
  /** Time a client has to send its request headers (default 10 s). */
  headersTimeoutMs?: number;
  /** Time a client has to send its whole request (default 30 s). */
  requestTimeoutMs?: number;
  /** How long an idle keep-alive connection stays open (default 5 s). */
  keepAliveTimeoutMs?: number;
  /** How often timed-out connections are looked for (default 1 s). */
  connectionsCheckingIntervalMs?: number;
  /** Connections beyond this are refused (default 1024). */
  maxConnections?: number;
  /** Log one line per request (default: none). */
  log?: (line: string) => void;
  /** Start-up warnings, e.g. binding beyond loopback without an API key (default: console.warn). */
  warn?: (line: string) => void;
}

export interface OpenAIServer {
  /** Base URL, e.g. "http://127.0.0.1:53211" (clients append /v1/...). */
  url: string;
  port: number;
  host: string;
  /** Requests currently running / waiting. */
  stats(): { active: number; queued: number; served: number; rejected: number };
  close(): Promise<void>;
}

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly type = "invalid_request_error",
    readonly param: string | null = null,
  ) {
    super(message);
  }
}

// Without a known context length a server still needs a bound on max_tokens; 8,192 admits the
// clembench/Playschool setting (5,000). With a context length, the context itself is the bound.
const DEFAULT_MAX_TOKENS_LIMIT = 8192;
const STREAM_MARKERS = ["<think>", "<tool_call>"];
const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost", "::ffff:127.0.0.1"]);

function checkCount(name: string, value: number, min: number): number {
  if (!(Number.isInteger(value) && value >= min))
    throw new RolloutConfigError(`createOpenAIServer: ${name} must be an integer ≥ ${min}, got ${value}`);
  return value;
}

export async function createOpenAIServer(options: OpenAIServerOptions): Promise<OpenAIServer> {
  const policy = options.policy;
  const modelId = options.modelId ?? policy.id;
  const host = options.host ?? "127.0.0.1";
  const maxConcurrency = checkCount("maxConcurrency", options.maxConcurrency ?? 4, 1);
  const maxQueue = checkCount("maxQueue", options.maxQueue ?? 256, 0);
  const maxQueueWaitMs = checkCount("maxQueueWaitMs", options.maxQueueWaitMs ?? 60_000, 1);
  const maxBodyBytes = checkCount("maxBodyBytes", options.maxBodyBytes ?? 4 * 1024 * 1024, 1);
  const maxN = checkCount("maxN", options.maxN ?? 16, 1);
  const contextLength =
    options.contextLength === undefined ? undefined : checkCount("contextLength", options.contextLength, 1);
  const maxTokensLimit = checkCount(
    "maxTokensLimit",
    options.maxTokensLimit ?? contextLength ?? DEFAULT_MAX_TOKENS_LIMIT,
    1,
  );
  const defaultCompletionTokens = checkCount("defaultCompletionTokens", options.defaultCompletionTokens ?? 16, 0);
  const maxPromptChars = checkCount(
    "maxPromptChars",
    options.maxPromptChars ?? (contextLength !== undefined ? 16 * contextLength : 1024 * 1024),
    1,
  );
  const vocabSize = options.vocabSize === undefined ? undefined : checkCount("vocabSize", options.vocabSize, 1);
  if (options.apiKey !== undefined && options.apiKey.length === 0)
    throw new RolloutConfigError("createOpenAIServer: apiKey must not be empty");
  const keyDigest = options.apiKey !== undefined ? createHash("sha256").update(options.apiKey).digest() : null;
  const warn = options.warn ?? ((line: string) => console.warn(line));
  let active = 0;
  let served = 0;
  let rejected = 0;
  const waiting: { grant: () => void; fail: (e: Error) => void }[] = [];

  const acquire = async (signal: AbortSignal): Promise<void> => {
    if (active < maxConcurrency) {
      active++;
      return;
    }
    if (waiting.length >= maxQueue) {
      rejected++;
      throw new HttpError(
        429,
        `server busy: ${active} requests running and ${waiting.length} queued`,
        "rate_limit_error",
      );
    }
    await new Promise<void>((resolve, reject) => {
      const entry = {
        grant: () => {
          cleanup();
          resolve();
        },
        fail: (e: Error) => {
          cleanup();
          reject(e);
        },
      };
      const leave = (e: Error) => {
        const i = waiting.indexOf(entry);
        if (i >= 0) waiting.splice(i, 1);
        entry.fail(e);
      };
      const timer = setTimeout(() => {
        rejected++;
        leave(new HttpError(503, `no slot became free within ${maxQueueWaitMs} ms`, "server_error"));
      }, maxQueueWaitMs);
      const onAbort = () => leave(new HttpError(499, "client closed the request while it was queued"));
      const cleanup = () => {
        clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
      };
      signal.addEventListener("abort", onAbort);
      waiting.push(entry);
    });
  };
  // A finished request hands its slot straight to the next waiter (active stays the same).
  const release = (): void => {
    const next = waiting.shift();
    if (next) next.grant();
    else active--;
  };

  const authorized = (req: IncomingMessage): boolean => {
    if (!keyDigest) return true;
    const header = req.headers.authorization ?? "";
    const m = /^Bearer\s+(.+)$/i.exec(header);
    if (!m) return false;
    // Compare digests so the comparison takes the same time whatever the key's length.
    return timingSafeEqual(createHash("sha256").update(m[1].trim()).digest(), keyDigest);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const t0 = performance.now();
    const path = (req.url ?? "/").split("?")[0];
    // Aborted when the client goes away before the response is complete: generation stops.
    const abort = new AbortController();
    res.on("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    try {
      if (req.method === "GET" && path === "/health") return sendJson(res, 200, { status: "ok" });
      if (path.startsWith("/v1/") && !authorized(req)) {
        req.resume();
        throw new HttpError(
          401,
          "missing or invalid API key (send Authorization: Bearer <key>)",
          "authentication_error",
        );
      }
      if (req.method === "GET" && path === "/v1/models") {
        return sendJson(res, 200, {
          object: "list",
          data: [
            {
              id: modelId,
              object: "model",
              created: 0,
              owned_by: "kiln",
              ...(contextLength !== undefined ? { max_model_len: contextLength } : {}),
            },
          ],
        });
      }
      const route = path === "/v1/chat/completions" ? "chat" : path === "/v1/completions" ? "completions" : null;
      if (!route) throw new HttpError(404, `no route ${req.method} ${path}`, "not_found_error");
      if (req.method !== "POST") throw new HttpError(405, `${path} accepts POST only`);
      const body = await readBody(req, maxBodyBytes);
      let json: unknown;
      try {
        json = JSON.parse(body);
      } catch (err) {
        throw new HttpError(400, `request body is not valid JSON: ${(err as Error).message}`);
      }
      // Validate before queueing: a bad request never waits for (or holds) a slot.
      const request =
        route === "chat"
          ? checkChat(validate(chatCompletionRequestSchema, json))
          : checkCompletion(validate(completionRequestSchema, json));
      await acquire(abort.signal);
      try {
        if (route === "chat") await chatCompletions(request as ChatCompletionRequest, res, abort.signal);
        else sendJson(res, 200, await completions(request as CompletionRequest, abort.signal));
        served++;
      } finally {
        release();
      }
    } catch (err) {
      const e =
        err instanceof HttpError
          ? err
          : err instanceof PolicyRequestError
            ? new HttpError(err.status, err.message, "invalid_request_error", err.param)
            : new HttpError(500, `internal error: ${err instanceof Error ? err.message : String(err)}`, "server_error");
      if (abort.signal.aborted) {
        // The client is gone: nothing to answer.
      } else if (!res.headersSent && !res.destroyed) {
        const body: WireError = { error: { message: e.message, type: e.type, param: e.param, code: String(e.status) } };
        const headers: Record<string, string> = e.status === 429 || e.status === 503 ? { "retry-after": "1" } : {};
        if (e.status === 413) headers.connection = "close";
        if (e.status === 401) headers["www-authenticate"] = "Bearer";
        sendJson(res, e.status, body, headers);
      } else if (!res.destroyed) {
        // Mid-stream failure: tell the client in the stream, then end it.
        res.end(
          `data: ${JSON.stringify({ error: { message: e.message, type: e.type, param: e.param, code: String(e.status) } })}\n\ndata: [DONE]\n\n`,
        );
      }
    } finally {
      options.log?.(`${req.method} ${path} ${res.statusCode} ${(performance.now() - t0).toFixed(1)}ms`);
    }
  };

  function checkMaxTokens(value: number | undefined, param: string): void {
    if (value !== undefined && value > maxTokensLimit)
      throw new HttpError(
        400,
        `${param} = ${value} exceeds this server's limit of ${maxTokensLimit}`,
        "invalid_request_error",
        param,
      );
  }

  function checkChat(request: ChatCompletionRequest): ChatCompletionRequest {
    if ((request.n ?? 1) > maxN) throw new HttpError(400, `n must be <= ${maxN}`, "invalid_request_error", "n");
    checkMaxTokens(request.max_tokens, "max_tokens");
    checkMaxTokens(request.max_completion_tokens, "max_completion_tokens");
    let chars = 0;
    for (const m of request.messages) chars += (wireContentText(m.content) ?? "").length;
    if (chars > maxPromptChars)
      throw new HttpError(
        400,
        `messages hold ${chars} characters; this server accepts at most ${maxPromptChars}`,
        "invalid_request_error",
        "messages",
      );
    return request;
  }

  function checkCompletion(request: CompletionRequest): CompletionRequest {
    if ((request.n ?? 1) > maxN) throw new HttpError(400, `n must be <= ${maxN}`, "invalid_request_error", "n");
    checkMaxTokens(request.max_tokens, "max_tokens");
    if (typeof request.prompt === "string") {
      if (request.prompt.length === 0) throw new HttpError(400, "prompt is empty", "invalid_request_error", "prompt");
      if (request.prompt.length > maxPromptChars)
        throw new HttpError(
          400,
          `prompt of ${request.prompt.length} characters exceeds the limit of ${maxPromptChars}`,
          "invalid_request_error",
          "prompt",
        );
    } else if (vocabSize !== undefined) {
      const bad = request.prompt.findIndex((id) => id >= vocabSize);
      if (bad >= 0)
        throw new HttpError(
          400,
          `prompt[${bad}] = ${request.prompt[bad]} is not a token id (vocabulary size ${vocabSize})`,
          "invalid_request_error",
          "prompt",
        );
    }
    return request;
  }

  function chatParams(request: ChatCompletionRequest, seed: number, signal: AbortSignal): GenerateParams {
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

  function chatInputs(request: ChatCompletionRequest): { messages: Message[]; tools: ToolSchema[] | undefined } {
    const messages = request.messages.map(toMessage);
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

  // Choice 0 uses the request seed itself, so n=1 and n=k agree on the first choice.
  const choiceSeed = (base: number, i: number) => (i === 0 ? base : deriveSeed(base, "choice", i));

  function toChoice(
    gen: Generation,
    index: number,
    messages: Message[],
    tools: ToolSchema[] | undefined,
    request: ChatCompletionRequest,
  ): WireChatChoice {
    // A policy that returns raw text gets the server-side tool parser (what vLLM's
    // --tool-call-parser does); a policy that already parsed keeps its calls.
    let message: Message;
    if (gen.message.tool_calls && gen.message.tool_calls.length > 0) message = gen.message;
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

  const usageOf = (gens: Generation[]) => {
    const promptTokens = gens[0]?.promptTokenIds?.length ?? 0;
    const completionTokens = gens.reduce((s, g) => s + (g.completionTokenIds?.length ?? g.logprobs?.length ?? 0), 0);
    return {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };
  };

  async function chatCompletions(
    request: ChatCompletionRequest,
    res: ServerResponse,
    signal: AbortSignal,
  ): Promise<void> {
    const { messages, tools } = chatInputs(request);
    const n = request.n ?? 1;
    const baseSeed = request.seed ?? Math.floor(Math.random() * 2 ** 31);
    const id = `chatcmpl-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    if (request.stream) return streamChat(res, id, created, messages, tools, request, baseSeed, signal);
    const gens: Generation[] = [];
    for (let i = 0; i < n; i++)
      gens.push(await policy.generate(messages, tools, chatParams(request, choiceSeed(baseSeed, i), signal)));
    const body: ChatCompletionResponse = {
      id,
      object: "chat.completion",
      created,
      model: request.model ?? modelId,
      choices: gens.map((g, i) => toChoice(g, i, messages, tools, request)),
      usage: usageOf(gens),
    };
    if (request.return_token_ids && gens[0].promptTokenIds) body.prompt_token_ids = gens[0].promptTokenIds;
    sendJson(res, 200, body);
  }

  async function streamChat(
    res: ServerResponse,
    id: string,
    created: number,
    messages: Message[],
    tools: ToolSchema[] | undefined,
    request: ChatCompletionRequest,
    baseSeed: number,
    signal: AbortSignal,
  ): Promise<void> {
    const model = request.model ?? modelId;
    let started = false;
    const start = () => {
      if (started) return;
      started = true;
      res.writeHead(200, {
        "content-type": "text/event-stream",
        "cache-control": "no-cache",
        connection: "keep-alive",
      });
    };
    const frame = (delta: unknown) =>
      `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, ...(delta as object) })}\n\n`;
    const send = async (delta: unknown): Promise<boolean> => {
      if (res.destroyed || res.writableEnded) return false; // the client went away: stop quietly
      start();
      if (!res.write(frame(delta)))
        await new Promise<void>((r) => {
          const done = () => {
            res.off("drain", done);
            res.off("close", done);
            r();
          };
          res.on("drain", done);
          res.on("close", done);
        });
      return !res.destroyed;
    };
    // Text is sent as it is generated unless the reply may turn into something else once parsed
    // (tool calls, a <think> block) or needs token-aligned log-probs; the last characters are held
    // back until the end so that a stop string is never sent before it is cut.
    const stops = request.stop === undefined ? [] : typeof request.stop === "string" ? [request.stop] : request.stop;
    const holdBack = Math.max(0, ...stops.map((s) => s.length - 1));
    const live = !(request.tools && request.tools.length > 0) && !request.logprobs;
    const gens: Generation[] = [];
    const n = request.n ?? 1;
    for (let index = 0; index < n; index++) {
      if (!(await send({ choices: [{ index, delta: { role: "assistant", content: "" }, finish_reason: null }] })))
        return;
      let raw = "";
      let sent = "";
      let liveOk = live;
      const onText = (piece: string) => {
        if (!liveOk || res.destroyed || res.writableEnded) return;
        raw += piece;
        const head = raw.trimStart();
        if (head === "") return;
        // A reply opening with a marker is reasoning or a tool call, parsed at the end: not streamed live.
        if (sent === "" && STREAM_MARKERS.some((m) => head.startsWith(m))) {
          liveOk = false;
          return;
        }
        if (sent === "" && STREAM_MARKERS.some((m) => m.startsWith(head))) return; // may still become one
        // Text after a stop string is never sent, even from a policy that generates past it.
        const stopAt = stops.reduce((at, st) => {
          const i = st === "" ? -1 : raw.indexOf(st);
          return i >= 0 && (at < 0 || i < at) ? i : at;
        }, -1);
        if (stopAt >= 0) {
          raw = raw.slice(0, stopAt);
          liveOk = false;
        }
        const safe = stopAt >= 0 ? raw : raw.slice(0, Math.max(0, raw.length - holdBack));
        if (safe.length > sent.length) {
          const delta = safe.slice(sent.length);
          sent = safe;
          start();
          res.write(frame({ choices: [{ index, delta: { content: delta }, logprobs: null, finish_reason: null }] }));
        }
      };
      const gen = await policy.generate(messages, tools, {
        ...chatParams(request, choiceSeed(baseSeed, index), signal),
        onText,
      });
      gens.push(gen);
      const choice = toChoice(gen, index, messages, tools, request);
      if (choice.message.reasoning_content !== undefined && sent === "") {
        if (
          !(await send({
            choices: [{ index, delta: { reasoning_content: choice.message.reasoning_content }, finish_reason: null }],
          }))
        )
          return;
      }
      const content = choice.message.content ?? "";
      let pieces: string[];
      if (sent !== "") {
        // The streamed text is a prefix of the final content (see holdBack); send the rest.
        pieces = content.startsWith(sent) && content.length > sent.length ? [content.slice(sent.length)] : [];
      } else {
        // Content in token-sized pieces when token texts are known, else one piece.
        pieces =
          choice.message.tool_calls || !gen.logprobs || gen.logprobs.map((l) => l.token).join("") !== content
            ? content === ""
              ? []
              : [content]
            : gen.logprobs.map((l) => l.token);
      }
      for (const [k, piece] of pieces.entries()) {
        const lp =
          sent === "" && choice.logprobs && pieces.length === choice.logprobs.content.length
            ? { content: [choice.logprobs.content[k]] }
            : null;
        if (!(await send({ choices: [{ index, delta: { content: piece }, logprobs: lp, finish_reason: null }] })))
          return;
      }
      if (choice.message.tool_calls) {
        const delta = { tool_calls: choice.message.tool_calls.map((tc, i) => ({ index: i, ...tc })) };
        if (!(await send({ choices: [{ index, delta, finish_reason: null }] }))) return;
      }
      if (!(await send({ choices: [{ index, delta: {}, finish_reason: choice.finish_reason }] }))) return;
    }
    if (request.stream_options?.include_usage && !(await send({ choices: [], usage: usageOf(gens) }))) return;
    if (!res.destroyed) res.end("data: [DONE]\n\n");
  }

  async function completions(request: CompletionRequest, signal: AbortSignal): Promise<CompletionResponse> {
    const tok = options.tokenizer;
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
    const maxTokens = request.max_tokens ?? Math.min(defaultCompletionTokens, maxTokensLimit);
    if (contextLength !== undefined && promptIds.length + maxTokens > contextLength) {
      throw new HttpError(
        400,
        `prompt (${promptIds.length} tokens) + max_tokens (${maxTokens}) exceeds the model's context length of ${contextLength}`,
        "invalid_request_error",
        promptIds.length >= contextLength ? "prompt" : "max_tokens",
      );
    }
    const promptText = typeof request.prompt === "string" ? request.prompt : tok ? tok.decode(promptIds) : "";
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
    const baseSeed = request.seed ?? Math.floor(Math.random() * 2 ** 31);
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
          seed: i === 0 ? baseSeed : deriveSeed(baseSeed, "choice", i),
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
      model: request.model ?? modelId,
      choices,
      usage: {
        prompt_tokens: promptIds.length,
        completion_tokens: completionTokens,
        total_tokens: promptIds.length + completionTokens,
      },
      ...(request.return_token_ids ? { prompt_token_ids: promptIds } : {}),
    };
  }

  const server: Server = createServer(
    {
      headersTimeout: options.headersTimeoutMs ?? 10_000,
      requestTimeout: options.requestTimeoutMs ?? 30_000,
      keepAliveTimeout: options.keepAliveTimeoutMs ?? 5_000,
      connectionsCheckingInterval: options.connectionsCheckingIntervalMs ?? 1_000,
    },
    (req, res) => {
      handle(req, res).catch(() => {
        if (!res.destroyed) res.destroy();
      });
    },
  );
  // Generation can take longer than any socket inactivity limit; slow clients are bounded by the
  // header and request timeouts above instead.
  server.setTimeout(0);
  server.maxConnections = options.maxConnections ?? 1024;
  // A client that vanishes mid-request must never take the server down.
  server.on("clientError", (_err, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
    else socket.destroy();
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  if (!keyDigest && !LOOPBACK.has(host)) {
    warn(
      `kiln serve: listening on ${host} without an API key: anyone who can reach this address can use the model (set an API key, or bind 127.0.0.1)`,
    );
  }
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;
  return {
    url: `http://${urlHost}:${port}`,
    port,
    host,
    stats: () => ({ active, queued: waiting.length, served, rejected }),
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}

function validate<T extends z.ZodType>(schema: T, value: unknown): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const param = issue.path.join(".") || null;
  throw new HttpError(400, `invalid request: ${param ?? "body"}: ${issue.message}`, "invalid_request_error", param);
}

function readBody(req: IncomingMessage, limit: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers["content-length"]);
    if (Number.isFinite(declared) && declared > limit) {
      reject(new HttpError(413, `request body of ${declared} bytes exceeds the limit of ${limit} bytes`));
      req.resume(); // drain so the socket can still carry the 413
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk: Buffer) => {
      if (failed) return;
      size += chunk.length;
      if (size > limit) {
        failed = true;
        reject(new HttpError(413, `request body exceeds the limit of ${limit} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (!failed) resolve(Buffer.concat(chunks).toString("utf8"));
    });
    req.on("aborted", () => {
      failed = true;
      reject(new HttpError(400, "client aborted the request"));
    });
    req.on("error", (err) => {
      failed = true;
      reject(new HttpError(400, `request stream error: ${err.message}`));
    });
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  if (res.destroyed) return;
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
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

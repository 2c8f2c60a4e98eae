// An OpenAI-compatible HTTP server for any Policy (`kiln serve` is built on it):
//   POST /v1/chat/completions  tools, n, seed, logprobs/top_logprobs, stream (SSE), return_token_ids
//   POST /v1/completions       raw prompts; echo + logprobs through Policy.score, continuation through Policy.complete
//   GET  /v1/models, GET /health
// Requests are validated with zod; bodies are size-capped; at most `maxConcurrency` requests run
// at once and at most `maxQueue` wait (beyond that: 429). Binds 127.0.0.1 unless told otherwise.
// Node only (node:http).

import { randomUUID } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { z } from "zod";
import type { TextTokenizer } from "./char-tokenizer.js";
import { replyIdSeed } from "./episode.js";
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
import type { GenerateParams, Generation, Message, Policy, ToolSchema } from "./types.js";

export interface OpenAIServerOptions {
  policy: Policy;
  /** Needed for string prompts on /v1/completions and for token texts; chat works without it. */
  tokenizer?: TextTokenizer;
  /** Model name reported by /v1/models (default: policy.id). Requests may name any model. */
  modelId?: string;
  /** Default 127.0.0.1: the server has no authentication, so it is not exposed unless asked. */
  host?: string;
  /** 0 (default) picks a free port. */
  port?: number;
  /** Requests processed at once (default 4). */
  maxConcurrency?: number;
  /** Requests waiting for a slot before 429 (default 256). */
  maxQueue?: number;
  /** Largest accepted request body (default 4 MiB); larger gets 413. */
  maxBodyBytes?: number;
  /** Largest `n` accepted (default 16). */
  maxN?: number;
  /** Log one line per request (default: none). */
  log?: (line: string) => void;
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

export async function createOpenAIServer(options: OpenAIServerOptions): Promise<OpenAIServer> {
  const policy = options.policy;
  const modelId = options.modelId ?? policy.id;
  const host = options.host ?? "127.0.0.1";
  const maxConcurrency = options.maxConcurrency ?? 4;
  const maxQueue = options.maxQueue ?? 256;
  const maxBodyBytes = options.maxBodyBytes ?? 4 * 1024 * 1024;
  const maxN = options.maxN ?? 16;
  let active = 0;
  let served = 0;
  let rejected = 0;
  const waiting: (() => void)[] = [];

  const acquire = async (): Promise<void> => {
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
    await new Promise<void>((resolve) => waiting.push(resolve));
  };
  const release = (): void => {
    const next = waiting.shift();
    if (next) next();
    else active--;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const t0 = performance.now();
    const path = (req.url ?? "/").split("?")[0];
    try {
      if (req.method === "GET" && path === "/health") return sendJson(res, 200, { status: "ok" });
      if (req.method === "GET" && path === "/v1/models") {
        return sendJson(res, 200, {
          object: "list",
          data: [{ id: modelId, object: "model", created: 0, owned_by: "kiln" }],
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
      await acquire();
      try {
        if (route === "chat") {
          const request = validate(chatCompletionRequestSchema, json);
          if ((request.n ?? 1) > maxN) throw new HttpError(400, `n must be <= ${maxN}`, "invalid_request_error", "n");
          await chatCompletions(request, res);
        } else {
          const request = validate(completionRequestSchema, json);
          if ((request.n ?? 1) > maxN) throw new HttpError(400, `n must be <= ${maxN}`, "invalid_request_error", "n");
          sendJson(res, 200, await completions(request));
        }
        served++;
      } finally {
        release();
      }
    } catch (err) {
      const e =
        err instanceof HttpError
          ? err
          : new HttpError(500, `internal error: ${err instanceof Error ? err.message : String(err)}`, "server_error");
      if (!res.headersSent && !res.destroyed) {
        const body: WireError = { error: { message: e.message, type: e.type, param: e.param, code: String(e.status) } };
        const headers: Record<string, string> = e.status === 429 ? { "retry-after": "1" } : {};
        if (e.status === 413) headers.connection = "close";
        sendJson(res, e.status, body, headers);
      } else if (!res.destroyed) {
        res.destroy();
      }
    } finally {
      options.log?.(`${req.method} ${path} ${res.statusCode} ${(performance.now() - t0).toFixed(1)}ms`);
    }
  };

  async function generateChoices(request: ChatCompletionRequest): Promise<{
    messages: Message[];
    tools: ToolSchema[] | undefined;
    gens: Generation[];
  }> {
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
    const n = request.n ?? 1;
    const baseSeed = request.seed ?? Math.floor(Math.random() * 2 ** 31);
    const gens: Generation[] = [];
    for (let i = 0; i < n; i++) {
      const params: GenerateParams = {
        ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
        ...(request.top_p !== undefined ? { topP: request.top_p } : {}),
        ...(request.top_k !== undefined ? { topK: request.top_k } : {}),
        ...(request.min_p !== undefined ? { minP: request.min_p } : {}),
        ...((request.max_completion_tokens ?? request.max_tokens) !== undefined
          ? { maxTokens: request.max_completion_tokens ?? request.max_tokens }
          : {}),
        // Choice 0 uses the request seed itself, so n=1 and n=k agree on the first choice.
        seed: i === 0 ? baseSeed : deriveSeed(baseSeed, "choice", i),
        ...(request.stop !== undefined
          ? { stop: typeof request.stop === "string" ? [request.stop] : request.stop }
          : {}),
        logprobs: request.logprobs ?? false,
        ...(request.top_logprobs ? { topLogprobs: request.top_logprobs } : {}),
        ...(request.chat_template_kwargs?.enable_thinking !== undefined
          ? { enableThinking: request.chat_template_kwargs.enable_thinking }
          : {}),
      };
      gens.push(await policy.generate(messages, tools, params));
    }
    return { messages, tools, gens };
  }

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

  async function chatCompletions(request: ChatCompletionRequest, res: ServerResponse): Promise<void> {
    const { messages, tools, gens } = await generateChoices(request);
    const choices = gens.map((g, i) => toChoice(g, i, messages, tools, request));
    const promptTokens = gens[0].promptTokenIds?.length ?? 0;
    const completionTokens = gens.reduce((s, g) => s + (g.completionTokenIds?.length ?? g.logprobs?.length ?? 0), 0);
    const usage = {
      prompt_tokens: promptTokens,
      completion_tokens: completionTokens,
      total_tokens: promptTokens + completionTokens,
    };
    const id = `chatcmpl-${randomUUID()}`;
    const created = Math.floor(Date.now() / 1000);
    if (request.stream) return streamChat(res, id, created, choices, gens, usage, request);
    const body: ChatCompletionResponse = {
      id,
      object: "chat.completion",
      created,
      model: request.model ?? modelId,
      choices,
      usage,
    };
    if (request.return_token_ids && gens[0].promptTokenIds) body.prompt_token_ids = gens[0].promptTokenIds;
    sendJson(res, 200, body);
  }

  async function streamChat(
    res: ServerResponse,
    id: string,
    created: number,
    choices: WireChatChoice[],
    gens: Generation[],
    usage: ChatCompletionResponse["usage"],
    request: ChatCompletionRequest,
  ): Promise<void> {
    res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
    const model = request.model ?? modelId;
    const send = async (delta: unknown): Promise<boolean> => {
      if (res.destroyed || res.writableEnded) return false; // the client went away: stop quietly
      const ok = res.write(
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, ...(delta as object) })}\n\n`,
      );
      if (!ok)
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
    for (const choice of choices) {
      const gen = gens[choice.index];
      if (
        !(await send({
          choices: [{ index: choice.index, delta: { role: "assistant", content: "" }, finish_reason: null }],
        }))
      )
        return;
      if (choice.message.reasoning_content !== undefined) {
        if (
          !(await send({
            choices: [
              {
                index: choice.index,
                delta: { reasoning_content: choice.message.reasoning_content },
                finish_reason: null,
              },
            ],
          }))
        )
          return;
      }
      // Content in token-sized pieces when token texts are known, else one piece.
      const content = choice.message.content ?? "";
      const pieces =
        choice.message.tool_calls || !gen.logprobs || gen.logprobs.map((l) => l.token).join("") !== content
          ? content === ""
            ? []
            : [content]
          : gen.logprobs.map((l) => l.token);
      for (const [k, piece] of pieces.entries()) {
        const lp =
          choice.logprobs && pieces.length === choice.logprobs.content.length
            ? { content: [choice.logprobs.content[k]] }
            : null;
        if (
          !(await send({
            choices: [{ index: choice.index, delta: { content: piece }, logprobs: lp, finish_reason: null }],
          }))
        )
          return;
      }
      if (choice.message.tool_calls) {
        const delta = { tool_calls: choice.message.tool_calls.map((tc, i) => ({ index: i, ...tc })) };
        if (!(await send({ choices: [{ index: choice.index, delta, finish_reason: null }] }))) return;
      }
      if (!(await send({ choices: [{ index: choice.index, delta: {}, finish_reason: choice.finish_reason }] }))) return;
    }
    if (request.stream_options?.include_usage && !(await send({ choices: [], usage }))) return;
    if (!res.destroyed) res.end("data: [DONE]\n\n");
  }

  async function completions(request: CompletionRequest): Promise<CompletionResponse> {
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
    const promptText = typeof request.prompt === "string" ? request.prompt : tok ? tok.decode(promptIds) : "";
    const maxTokens = request.max_tokens ?? 16;
    const wantLogprobs = request.logprobs !== undefined && request.logprobs !== null;
    let promptScores: number[] | null = null;
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
      promptScores = (await policy.score([], promptIds)).logprobs;
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
          seed: i === 0 ? baseSeed : deriveSeed(baseSeed, "choice", i),
          ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
          ...(request.top_p !== undefined ? { topP: request.top_p } : {}),
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
                      [String(id)]: {
                        logprob: promptScores![k],
                        rank: null,
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

  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.destroyed) res.destroy();
    });
  });
  // A client that vanishes mid-request must never take the server down.
  server.on("clientError", (_err, socket) => {
    if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n");
    else socket.destroy();
  });
  server.keepAliveTimeout = 5000;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
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

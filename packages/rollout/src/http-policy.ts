// A Policy backed by OpenAI-compatible servers (vLLM, SGLang, llama.cpp's server, `kiln serve`),
// replicated behind one or more base URLs. Requests go to the least-busy healthy URL; network
// errors, timeouts, 429 and 5xx are retried with exponential backoff (and jitter) on the next
// URL; a URL that failed rests for a while. Only fetch is used, so it also runs in browsers.

import type { TextTokenizer } from "./char-tokenizer.js";
import { GenerationAbortedError, PolicyCapabilityError, PolicyHttpError, RolloutConfigError } from "./errors.js";
import type { ChatCompletionResponse, CompletionResponse, WireChatChoice } from "./openai-wire.js";
import { formatToolCalls } from "./parse-tool-calls.js";
import type {
  FinishReason,
  GenerateParams,
  Generation,
  Message,
  Policy,
  TokenLogprob,
  ScoreOptions,
  TokenScores,
  ToolSchema,
} from "./types.js";

export interface HttpPolicyOptions {
  /** One base URL or several replicas, with or without a trailing "/v1". */
  baseUrls: string | string[];
  /** Model name sent with each request. */
  model: string;
  /** Policy id recorded in trajectories (default: `http:<model>`). */
  id?: string;
  apiKey?: string;
  /** Per-attempt timeout (default 120 s). */
  timeoutMs?: number;
  /** Retries after the first attempt (default 3). */
  retries?: number;
  /** First backoff delay (default 250 ms), doubled per retry up to `maxBackoffMs` (default 8 s). */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** How long a failed URL is avoided (default 5 s). */
  cooldownMs?: number;
  headers?: Record<string, string>;
  /** Ask for vLLM's `return_token_ids` (prompt and completion token ids; default true). */
  returnTokenIds?: boolean;
  /** Renders messages as the server's chat template would; enables `score` via /v1/completions echo. */
  renderPrompt?: (messages: readonly Message[], tools: readonly ToolSchema[]) => string;
  /**
   * How `score` asks the server: "echo" (default; OpenAI legacy completions with echo + logprobs,
   * offered by vLLM and others) or "prompt_logprobs" (vLLM's extension; needs `tokenizer`).
   */
  scoring?: "echo" | "prompt_logprobs";
  /** Tokenizer of the served model; lets `score` take token-id completions. */
  tokenizer?: TextTokenizer;
  /** Injected fetch (tests, proxies). Default: globalThis.fetch. */
  fetch?: typeof fetch;
  /** Injected sleep (tests). */
  sleep?: (ms: number) => Promise<void>;
}

interface Endpoint {
  base: string;
  inFlight: number;
  downUntil: number;
  failures: number;
}

export class HttpPolicy implements Policy {
  readonly id: string;
  private readonly endpoints: Endpoint[];
  private readonly opts: Required<
    Pick<HttpPolicyOptions, "timeoutMs" | "retries" | "backoffMs" | "maxBackoffMs" | "cooldownMs" | "returnTokenIds">
  > &
    HttpPolicyOptions;
  private rr = 0;

  constructor(options: HttpPolicyOptions) {
    const urls = Array.isArray(options.baseUrls) ? options.baseUrls : [options.baseUrls];
    if (urls.length === 0) throw new RolloutConfigError("HttpPolicy: baseUrls must name at least one server");
    this.endpoints = urls.map((u) => {
      let base = u.replace(/\/+$/, "");
      if (!/^https?:\/\//.test(base))
        throw new RolloutConfigError(`HttpPolicy: base URL "${u}" must start with http:// or https://`);
      if (base.endsWith("/v1")) base = base.slice(0, -3);
      return { base, inFlight: 0, downUntil: 0, failures: 0 };
    });
    this.opts = {
      timeoutMs: 120_000,
      retries: 3,
      backoffMs: 250,
      maxBackoffMs: 8000,
      cooldownMs: 5000,
      returnTokenIds: true,
      ...options,
    };
    if (!(this.opts.retries >= 0))
      throw new RolloutConfigError(`HttpPolicy: retries must be >= 0, got ${this.opts.retries}`);
    this.id = options.id ?? `http:${options.model}`;
  }

  /** Per-URL counters (requests in flight, consecutive failures). */
  endpointStats(): { base: string; inFlight: number; failures: number }[] {
    return this.endpoints.map((e) => ({ base: e.base, inFlight: e.inFlight, failures: e.failures }));
  }

  async generate(messages: Message[], tools: ToolSchema[] = [], params: GenerateParams = {}): Promise<Generation> {
    return (await this.generateMany(messages, tools, params, 1))[0];
  }

  /** `n` samples in one request (OpenAI `n`); choice 0 equals `generate` with the same seed on kiln servers. */
  async generateMany(
    messages: Message[],
    tools: ToolSchema[] = [],
    params: GenerateParams = {},
    n = 1,
  ): Promise<Generation[]> {
    const startedAt = Date.now();
    const t0 = performance.now();
    const body: Record<string, unknown> = {
      model: this.opts.model,
      messages: messages.map(toWire),
      ...(tools.length > 0 ? { tools } : {}),
      ...(n !== 1 ? { n } : {}),
      ...(params.temperature !== undefined ? { temperature: params.temperature } : {}),
      ...(params.topP !== undefined ? { top_p: params.topP } : {}),
      ...(params.topK !== undefined ? { top_k: params.topK } : {}),
      ...(params.minP !== undefined ? { min_p: params.minP } : {}),
      ...(params.maxTokens !== undefined ? { max_tokens: params.maxTokens } : {}),
      ...(params.seed !== undefined ? { seed: params.seed } : {}),
      ...(params.stop?.length ? { stop: params.stop } : {}),
      // Trajectories want sampler log-probs: ask unless told not to.
      logprobs: params.logprobs !== false,
      ...(params.topLogprobs ? { top_logprobs: params.topLogprobs } : {}),
      ...(params.enableThinking !== undefined
        ? { chat_template_kwargs: { enable_thinking: params.enableThinking } }
        : {}),
      ...(this.opts.returnTokenIds ? { return_token_ids: true } : {}),
    };
    const res = (await this.post("/v1/chat/completions", body, params.signal)) as ChatCompletionResponse;
    if (!Array.isArray(res?.choices) || res.choices.length === 0) {
      throw new PolicyHttpError("chat completion response has no choices", 200, false);
    }
    const durationMs = performance.now() - t0;
    return res.choices.map((c) => fromChoice(c, res.prompt_token_ids, { startedAt, durationMs }));
  }

  /**
   * Log-probs of `completion` after the conversation, via /v1/completions with echo (the route
   * lm-evaluation-harness uses against vLLM): the prompt is `renderPrompt(messages)` + completion,
   * and the completion's tokens are those whose text offset lies at or after the rendered prompt.
   * Token-id completions need `tokenizer` (the prompt is then sent as token ids).
   */
  async score(
    messages: Message[],
    completion: string | number[],
    tools: ToolSchema[] = [],
    options: ScoreOptions = {},
  ): Promise<TokenScores> {
    const render = this.opts.renderPrompt;
    if (!render) {
      throw new PolicyCapabilityError(
        `HttpPolicy ${this.id}: score needs renderPrompt (the served model's chat template)`,
      );
    }
    const prefix = render(messages, tools);
    if (this.opts.scoring === "prompt_logprobs") return this.scorePromptLogprobs(prefix, completion, options);
    if (options.topLogprobs !== undefined)
      throw new PolicyCapabilityError(
        `HttpPolicy ${this.id}: top-k scoring needs token ids per alternative; use scoring: "prompt_logprobs" (vLLM)`,
      );
    let prompt: string | number[];
    let fromIndex: (res: CompletionResponse) => number;
    if (typeof completion === "string") {
      prompt = prefix + completion;
      fromIndex = (res) => {
        const offsets = res.choices[0].logprobs?.text_offset ?? [];
        const k = offsets.findIndex((o) => o >= prefix.length);
        return k < 0 ? offsets.length : k;
      };
    } else {
      const tok = this.opts.tokenizer;
      if (!tok) throw new PolicyCapabilityError(`HttpPolicy ${this.id}: scoring token ids needs a tokenizer`);
      const prefixIds = tok.encode(prefix);
      prompt = [...prefixIds, ...completion];
      fromIndex = () => prefixIds.length;
    }
    // max_tokens 1: vLLM rejects 0; the one generated token is dropped below.
    const res = (await this.post("/v1/completions", {
      model: this.opts.model,
      prompt,
      echo: true,
      logprobs: 0,
      max_tokens: 1,
      temperature: 0,
      ...(this.opts.returnTokenIds ? { return_token_ids: true } : {}),
    })) as CompletionResponse;
    const lp = res?.choices?.[0]?.logprobs;
    if (!lp)
      throw new PolicyHttpError("completion response has no logprobs (does the server support echo?)", 200, false);
    const promptLength = Array.isArray(res.prompt_token_ids)
      ? res.prompt_token_ids.length
      : typeof prompt === "string"
        ? lp.tokens.length - (res.choices[0].token_ids?.length ?? 1)
        : prompt.length;
    const start = fromIndex(res);
    const logprobs = lp.token_logprobs.slice(start, promptLength).map((v) => v ?? 0);
    const tokenIds = Array.isArray(res.prompt_token_ids)
      ? res.prompt_token_ids.slice(start, promptLength)
      : typeof completion === "string"
        ? lp.tokens.slice(start, promptLength).map(tokenIdFromText)
        : [...completion];
    return { tokenIds, logprobs };
  }

  /** vLLM `prompt_logprobs`: the whole sequence goes as token ids, so the completion is the tail. */
  private async scorePromptLogprobs(
    prefix: string,
    completion: string | number[],
    options: ScoreOptions = {},
  ): Promise<TokenScores> {
    const k = options.topLogprobs;
    if (k !== undefined && !(Number.isInteger(k) && k >= 1 && k <= 20))
      throw new PolicyCapabilityError(`HttpPolicy ${this.id}: topLogprobs must be an integer in [1, 20], got ${k}`);
    const tok = this.opts.tokenizer;
    if (!tok) throw new PolicyCapabilityError(`HttpPolicy ${this.id}: prompt_logprobs scoring needs a tokenizer`);
    const prefixIds = tok.encode(prefix);
    const ids = typeof completion === "string" ? tok.encode(completion) : [...completion];
    const prompt = [...prefixIds, ...ids];
    const res = (await this.post("/v1/completions", {
      model: this.opts.model,
      prompt,
      max_tokens: 1,
      temperature: 0,
      prompt_logprobs: k ?? 0,
    })) as CompletionResponse;
    const plp = res?.choices?.[0]?.prompt_logprobs;
    if (!Array.isArray(plp) || plp.length !== prompt.length) {
      throw new PolicyHttpError(
        "completion response lacks prompt_logprobs for every prompt token (is this vLLM?)",
        200,
        false,
      );
    }
    const logprobs = ids.map((id, i) => {
      const entry = plp[prefixIds.length + i];
      const value = entry?.[String(id)]?.logprob;
      if (typeof value !== "number") {
        throw new PolicyHttpError(
          `prompt_logprobs has no log-prob for token ${id} at position ${prefixIds.length + i}`,
          200,
          false,
        );
      }
      return value;
    });
    if (k === undefined) return { tokenIds: ids, logprobs };
    // vLLM lists the actual token plus the k best (k + 1 entries when the actual one is not among them).
    const top = ids.map((_, i) => {
      const entry = plp[prefixIds.length + i] ?? {};
      const ranked = Object.entries(entry)
        .map(([tokenId, v]) => ({ id: Number(tokenId), logprob: v.logprob, rank: v.rank ?? Number.POSITIVE_INFINITY }))
        .filter((e) => Number.isInteger(e.id) && typeof e.logprob === "number")
        .sort((a, b) => a.rank - b.rank || b.logprob - a.logprob)
        .slice(0, k);
      return { tokenIds: ranked.map((e) => e.id), logprobs: ranked.map((e) => e.logprob) };
    });
    return { tokenIds: ids, logprobs, top };
  }

  private pick(): Endpoint {
    const now = Date.now();
    const healthy = this.endpoints.filter((e) => e.downUntil <= now);
    const pool =
      healthy.length > 0 ? healthy : [...this.endpoints].sort((a, b) => a.downUntil - b.downUntil).slice(0, 1);
    const least = Math.min(...pool.map((e) => e.inFlight));
    const candidates = pool.filter((e) => e.inFlight === least);
    return candidates[this.rr++ % candidates.length];
  }

  /** POST with retries; `signal` (the caller's cancellation) stops the request and any retry. */
  private async post(path: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
    const doFetch = this.opts.fetch ?? globalThis.fetch;
    const sleep = this.opts.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
    const payload = JSON.stringify(body);
    let lastError: PolicyHttpError | null = null;
    for (let attempt = 0; attempt <= this.opts.retries; attempt++) {
      if (signal?.aborted) throw new GenerationAbortedError(`${path}: cancelled by the caller`);
      const ep = this.pick();
      ep.inFlight++;
      let retryAfterMs = 0;
      try {
        const res = await doFetch(ep.base + path, {
          method: "POST",
          headers: {
            "content-type": "application/json",
            ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}),
            ...(this.opts.headers ?? {}),
          },
          body: payload,
          signal: signal
            ? AbortSignal.any([signal, AbortSignal.timeout(this.opts.timeoutMs)])
            : AbortSignal.timeout(this.opts.timeoutMs),
        });
        const text = await res.text();
        if (res.ok) {
          try {
            const json = JSON.parse(text);
            ep.failures = 0;
            return json;
          } catch {
            throw new PolicyHttpError(
              `${ep.base}${path}: response is not JSON: ${text.slice(0, 200)}`,
              res.status,
              true,
            );
          }
        }
        const retryable = res.status === 408 || res.status === 429 || res.status >= 500;
        const ra = Number(res.headers.get("retry-after"));
        if (Number.isFinite(ra) && ra > 0) retryAfterMs = ra * 1000;
        throw new PolicyHttpError(
          `${ep.base}${path}: HTTP ${res.status}: ${errorMessage(text)}`,
          res.status,
          retryable,
        );
      } catch (err) {
        if (signal?.aborted) throw new GenerationAbortedError(`${ep.base}${path}: cancelled by the caller`);
        const e =
          err instanceof PolicyHttpError
            ? err
            : new PolicyHttpError(
                `${ep.base}${path}: ${isTimeout(err) ? `timed out after ${this.opts.timeoutMs} ms` : `network error: ${(err as Error).message}`}`,
                0,
                true,
              );
        lastError = e;
        if (!e.retryable) throw e;
        ep.failures++;
        ep.downUntil = Date.now() + this.opts.cooldownMs;
      } finally {
        ep.inFlight--;
      }
      if (attempt < this.opts.retries) {
        const base = Math.min(this.opts.maxBackoffMs, this.opts.backoffMs * 2 ** attempt);
        // Full jitter (AWS architecture blog, "Exponential Backoff And Jitter"): spreads retries of many clients.
        await sleep(
          Math.max(retryAfterMs > 0 ? Math.min(retryAfterMs, this.opts.maxBackoffMs) : 0, Math.random() * base),
        );
      }
    }
    throw new PolicyHttpError(
      `${lastError!.message} (gave up after ${this.opts.retries + 1} attempts)`,
      lastError!.status,
      false,
    );
  }
}

function isTimeout(err: unknown): boolean {
  return err instanceof Error && (err.name === "TimeoutError" || err.name === "AbortError");
}

function errorMessage(text: string): string {
  try {
    const j = JSON.parse(text);
    if (typeof j?.error?.message === "string") return j.error.message;
    if (typeof j?.message === "string") return j.message;
  } catch {
    // not JSON
  }
  return text.slice(0, 300);
}

function toWire(m: Message): Record<string, unknown> {
  const out: Record<string, unknown> = { role: m.role, content: m.content };
  if (m.tool_calls && m.tool_calls.length > 0) out.tool_calls = m.tool_calls;
  if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if (m.name !== undefined) out.name = m.name;
  if (m.reasoning_content !== undefined) out.reasoning_content = m.reasoning_content;
  return out;
}

/** vLLM's `return_tokens_as_token_ids` spells tokens "token_id:123". */
function tokenIdFromText(token: string): number {
  const m = /^token_id:(\d+)$/.exec(token);
  return m ? Number(m[1]) : -1;
}

function fromChoice(
  c: WireChatChoice,
  promptTokenIds: number[] | undefined,
  timings: Generation["timings"],
): Generation {
  const raw = c.message as WireChatChoice["message"] & { reasoning?: string };
  const message: Message = { role: "assistant", content: raw.content ?? null };
  if (raw.tool_calls && raw.tool_calls.length > 0) {
    message.tool_calls = raw.tool_calls.map((tc) => ({
      id: tc.id,
      type: "function",
      function: { name: tc.function.name, arguments: tc.function.arguments },
    }));
  }
  const reasoning = raw.reasoning_content ?? raw.reasoning;
  if (typeof reasoning === "string") message.reasoning_content = reasoning;
  const ids = c.token_ids;
  let logprobs: TokenLogprob[] | undefined;
  if (c.logprobs?.content) {
    logprobs = c.logprobs.content.map((l, i) => {
      const tokenId = ids?.[i] ?? tokenIdFromText(l.token);
      const entry: TokenLogprob = { token: l.token, logprob: l.logprob };
      if (tokenId >= 0) entry.tokenId = tokenId;
      if (l.top_logprobs && l.top_logprobs.length > 0)
        entry.top = l.top_logprobs.map((t) => ({ token: t.token, logprob: t.logprob }));
      return entry;
    });
  }
  // The raw text is not on the wire once the server parsed tool calls; rebuild it in Hermes form.
  const text = message.tool_calls
    ? [
        message.content ?? "",
        formatToolCalls(
          message.tool_calls.map((tc) => ({ name: tc.function.name, arguments: safeArgs(tc.function.arguments) })),
          "hermes",
        ),
      ]
        .filter((s) => s !== "")
        .join("\n")
    : (message.content ?? "");
  const finish: FinishReason =
    c.finish_reason === "length" ? "length" : c.finish_reason === "tool_calls" ? "tool_calls" : "stop";
  return {
    message,
    text,
    finishReason: finish,
    ...(promptTokenIds ? { promptTokenIds: [...promptTokenIds] } : {}),
    ...(ids ? { completionTokenIds: [...ids] } : {}),
    ...(logprobs ? { logprobs } : {}),
    timings,
  };
}

function safeArgs(s: string): Record<string, unknown> {
  try {
    const v = JSON.parse(s);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : { _raw: s };
  } catch {
    return { _raw: s };
  }
}

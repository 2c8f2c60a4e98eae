// The server's options and their resolved, checked form (a bad option fails at start-up with a
// RolloutConfigError, never at the first request).
import { createHash } from "node:crypto";
import type { TextTokenizer } from "../char-tokenizer.js";
import { RolloutConfigError } from "../errors.js";
import type { Policy } from "../types.js";
import type { ConnectionLimits } from "./connections.js";

export interface OpenAIServerOptions {
  policy: Policy;
  /** Needed for string prompts on /v1/completions and for token texts; chat works without it. */
  tokenizer?: TextTokenizer;
  /**
   * The names this server answers to, the first the main one (vLLM's `--served-model-name`):
   * /v1/models lists them, and a request naming another model is a 404 `model_not_found`.
   * Default: `[modelId]`.
   */
  servedModelNames?: string[];
  /** The served name when there are no aliases (default: policy.id); same as `servedModelNames: [modelId]`. */
  modelId?: string;
  /** PEFT adapters applied to the served weights, listed in /v1/models (the server only reports them). */
  adapters?: ServedAdapter[];
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
  /**
   * Context served, prompt plus completion, in tokens (vLLM's `--max-model-len`); at most
   * `contextLength` when that is known. Default: `contextLength`.
   */
  maxModelLen?: number;
  /** Largest `max_tokens` accepted (default: contextLength, else 8192); more is a 400. */
  maxTokensLimit?: number;
  /** `max_tokens` when a completions request gives none (default 16, as OpenAI's). */
  defaultCompletionTokens?: number;
  /**
   * Largest prompt in characters, checked before anything is templated or tokenized: a chat
   * request counts every message's content, role, name and tool calls plus its tools' schemas
   * (default: 16 × the served context, else 1 MiB).
   */
  maxPromptChars?: number;
  /** Most messages in a chat request, checked before the body is even validated (default: min(served context, 4096)). */
  maxMessages?: number;
  /** Vocabulary size: prompt token ids must lie in [0, vocabSize). */
  vocabSize?: number;
  /** When set, every /v1 request needs `Authorization: Bearer <apiKey>` (401 otherwise); /health stays open. */
  apiKey?: string;
  /** A connection that sends no byte for this long while its request is awaited is closed (default 5 s). */
  idleTimeoutMs?: number;
  /** Time a client has to send its request headers, from connecting or from its previous response (default 10 s). */
  headersTimeoutMs?: number;
  /**
   * Time a client has to send its request body once the headers are in (default 20 s; then 408),
   * and the longest a streamed response waits for a client that has stopped reading.
   */
  bodyTimeoutMs?: number;
  /** Time a client has to send its whole request (default 30 s). */
  requestTimeoutMs?: number;
  /** How long an idle keep-alive connection stays open (default 5 s). */
  keepAliveTimeoutMs?: number;
  /** How often timed-out connections are looked for (default 1 s). */
  connectionsCheckingIntervalMs?: number;
  /**
   * Open connections, all clients together (default 1024). A connection beyond it closes the
   * oldest one that has not yet sent a complete request, or is refused with a 503 when every
   * connection is carrying a request; so a flood of slow sockets cannot lock out /health.
   */
  maxConnections?: number;
  /** Open connections from one client address, with the same rule (default 256). */
  maxConnectionsPerClient?: number;
  /** Log one line per request (default: none). */
  log?: (line: string) => void;
  /** Start-up warnings, e.g. binding beyond loopback without an API key (default: console.warn). */
  warn?: (line: string) => void;
}

export interface ServedAdapter {
  /** Its name, e.g. the adapter directory's name. */
  id: string;
  /** Where it was loaded from. */
  path?: string;
  /** The scale its delta is applied with. */
  scale?: number;
}

/** The options with every default filled in and every bound checked. */
export interface ServerConfig {
  policy: Policy;
  tokenizer: TextTokenizer | undefined;
  /** The main served name first, then its aliases. */
  servedModelNames: string[];
  adapters: ServedAdapter[];
  host: string;
  maxConcurrency: number;
  maxQueue: number;
  maxQueueWaitMs: number;
  maxBodyBytes: number;
  maxN: number;
  /** The context served (maxModelLen, else the model's context length). */
  contextLength: number | undefined;
  maxTokensLimit: number;
  defaultCompletionTokens: number;
  maxPromptChars: number;
  maxMessages: number;
  vocabSize: number | undefined;
  connections: ConnectionLimits;
  /** Node's own bounds on a request, kept as a second line behind `connections`. */
  requestTimeoutMs: number;
  keepAliveTimeoutMs: number;
  /** SHA-256 of the API key (null: no key needed). */
  keyDigest: Buffer | null;
  log: ((line: string) => void) | undefined;
  warn: (line: string) => void;
}

// Without a known context length a server still needs a bound on max_tokens; 8,192 admits the
// clembench/Playschool setting (5,000). With a context length, the context itself is the bound.
const DEFAULT_MAX_TOKENS_LIMIT = 8192;

function checkCount(name: string, value: number, min: number): number {
  if (!(Number.isInteger(value) && value >= min))
    throw new RolloutConfigError(`createOpenAIServer: ${name} must be an integer ≥ ${min}, got ${value}`);
  return value;
}

export function resolveServerConfig(options: OpenAIServerOptions): ServerConfig {
  const maxConcurrency = checkCount("maxConcurrency", options.maxConcurrency ?? 4, 1);
  const maxQueue = checkCount("maxQueue", options.maxQueue ?? 256, 0);
  const maxQueueWaitMs = checkCount("maxQueueWaitMs", options.maxQueueWaitMs ?? 60_000, 1);
  const maxBodyBytes = checkCount("maxBodyBytes", options.maxBodyBytes ?? 4 * 1024 * 1024, 1);
  const maxN = checkCount("maxN", options.maxN ?? 16, 1);
  const modelContext =
    options.contextLength === undefined ? undefined : checkCount("contextLength", options.contextLength, 1);
  const maxModelLen = options.maxModelLen === undefined ? undefined : checkCount("maxModelLen", options.maxModelLen, 1);
  if (maxModelLen !== undefined && modelContext !== undefined && maxModelLen > modelContext)
    throw new RolloutConfigError(
      `createOpenAIServer: maxModelLen ${maxModelLen} exceeds the model's context length of ${modelContext}`,
    );
  const contextLength = maxModelLen ?? modelContext;
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
  const maxMessages = checkCount("maxMessages", options.maxMessages ?? Math.min(contextLength ?? 4096, 4096), 1);
  const vocabSize = options.vocabSize === undefined ? undefined : checkCount("vocabSize", options.vocabSize, 1);
  const servedModelNames = resolveServedNames(options);
  const maxConnections = checkCount("maxConnections", options.maxConnections ?? 1024, 1);
  const connections: ConnectionLimits = {
    maxConnections,
    maxConnectionsPerClient: checkCount(
      "maxConnectionsPerClient",
      options.maxConnectionsPerClient ?? Math.min(256, maxConnections),
      1,
    ),
    idleTimeoutMs: checkCount("idleTimeoutMs", options.idleTimeoutMs ?? 5_000, 1),
    headersTimeoutMs: checkCount("headersTimeoutMs", options.headersTimeoutMs ?? 10_000, 1),
    bodyTimeoutMs: checkCount("bodyTimeoutMs", options.bodyTimeoutMs ?? 20_000, 1),
    checkIntervalMs: checkCount("connectionsCheckingIntervalMs", options.connectionsCheckingIntervalMs ?? 1_000, 1),
  };
  const requestTimeoutMs = checkCount("requestTimeoutMs", options.requestTimeoutMs ?? 30_000, 1);
  const keepAliveTimeoutMs = checkCount("keepAliveTimeoutMs", options.keepAliveTimeoutMs ?? 5_000, 1);
  for (const a of options.adapters ?? [])
    if (typeof a.id !== "string" || a.id === "")
      throw new RolloutConfigError("createOpenAIServer: every adapter needs a non-empty id");
  if (options.apiKey !== undefined && options.apiKey.length === 0)
    throw new RolloutConfigError("createOpenAIServer: apiKey must not be empty");
  return {
    policy: options.policy,
    tokenizer: options.tokenizer,
    servedModelNames,
    adapters: options.adapters ?? [],
    host: options.host ?? "127.0.0.1",
    maxConcurrency,
    maxQueue,
    maxQueueWaitMs,
    maxBodyBytes,
    maxN,
    contextLength,
    maxTokensLimit,
    defaultCompletionTokens,
    maxPromptChars,
    maxMessages,
    vocabSize,
    connections,
    requestTimeoutMs,
    keepAliveTimeoutMs,
    keyDigest: options.apiKey !== undefined ? createHash("sha256").update(options.apiKey).digest() : null,
    log: options.log,
    warn: options.warn ?? ((line: string) => console.warn(line)),
  };
}

function resolveServedNames(options: OpenAIServerOptions): string[] {
  const names = options.servedModelNames ?? [options.modelId ?? options.policy.id];
  if (names.length === 0)
    throw new RolloutConfigError("createOpenAIServer: servedModelNames must name at least one model");
  for (const name of names)
    if (typeof name !== "string" || name.trim() === "")
      throw new RolloutConfigError(
        `createOpenAIServer: served model names must be non-empty, got ${JSON.stringify(name)}`,
      );
  const dup = names.find((n, i) => names.indexOf(n) !== i);
  if (dup !== undefined) throw new RolloutConfigError(`createOpenAIServer: served model name "${dup}" is given twice`);
  if (options.servedModelNames && options.modelId !== undefined && options.modelId !== names[0])
    throw new RolloutConfigError(
      `createOpenAIServer: modelId "${options.modelId}" differs from the first served model name "${names[0]}" (give one of them)`,
    );
  return [...names];
}

// The server's options and their resolved, checked form (a bad option fails at start-up with a
// RolloutConfigError, never at the first request).
import { createHash } from "node:crypto";
import type { TextTokenizer } from "../char-tokenizer.js";
import { RolloutConfigError } from "../errors.js";
import type { Policy } from "../types.js";

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

/** The options with every default filled in and every bound checked. */
export interface ServerConfig {
  policy: Policy;
  tokenizer: TextTokenizer | undefined;
  modelId: string;
  host: string;
  maxConcurrency: number;
  maxQueue: number;
  maxQueueWaitMs: number;
  maxBodyBytes: number;
  maxN: number;
  contextLength: number | undefined;
  maxTokensLimit: number;
  defaultCompletionTokens: number;
  maxPromptChars: number;
  vocabSize: number | undefined;
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
  return {
    policy: options.policy,
    tokenizer: options.tokenizer,
    modelId: options.modelId ?? options.policy.id,
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
    vocabSize,
    keyDigest: options.apiKey !== undefined ? createHash("sha256").update(options.apiKey).digest() : null,
    log: options.log,
    warn: options.warn ?? ((line: string) => console.warn(line)),
  };
}

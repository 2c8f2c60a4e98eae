// Core wire types shared by policies, environments and benchmarks.
// Messages follow the OpenAI chat-completions shape, so a trajectory can be sent
// to any OpenAI-compatible server (vLLM, SGLang, llama.cpp) without translation.

export type Role = "system" | "user" | "assistant" | "tool";

/** A JSON Schema object (draft 2020-12 subset used by OpenAI tool declarations). */
export type JsonSchema = { [key: string]: unknown };

export interface ToolCall {
  id: string;
  type: "function";
  function: {
    name: string;
    /** JSON-encoded arguments, exactly as the OpenAI API carries them. */
    arguments: string;
  };
}

export interface Message {
  role: Role;
  content: string | null;
  tool_calls?: ToolCall[];
  /** For role "tool": the id of the call this message answers. */
  tool_call_id?: string;
  name?: string;
  /** Thinking text, kept apart from content (Qwen3 `<think>` blocks). */
  reasoning_content?: string;
}

/** A tool declaration in OpenAI's function-calling format. */
export interface ToolSchema {
  type: "function";
  function: {
    name: string;
    description?: string;
    parameters: JsonSchema;
  };
}

export interface GenerateParams {
  temperature?: number;
  topP?: number;
  topK?: number;
  minP?: number;
  maxTokens?: number;
  seed?: number;
  stop?: string[];
  /** Return per-token log-probs of the sampled tokens. */
  logprobs?: boolean;
  /** Also return this many top alternatives per position. */
  topLogprobs?: number;
  enableThinking?: boolean;
  /**
   * Aborted when the result is no longer wanted (the HTTP client disconnected). A policy that
   * honours it stops generating and rejects; one that ignores it just finishes.
   */
  signal?: AbortSignal;
  /**
   * Called with each newly generated piece of completion text, as it is generated (streaming).
   * The pieces concatenate to the raw completion text. Optional for policies to call.
   */
  onText?: (piece: string) => void;
}

export interface TokenLogprob {
  token: string;
  tokenId?: number;
  logprob: number;
  top?: { token: string; tokenId?: number; logprob: number }[];
}

export type FinishReason = "stop" | "length" | "tool_calls" | "error";

export interface Generation {
  /** The assistant message, with tool_calls parsed where the policy parses them. */
  message: Message;
  /** Raw completion text as the model produced it (before tool-call parsing). */
  text: string;
  finishReason: FinishReason;
  promptTokenIds?: number[];
  completionTokenIds?: number[];
  /** Per completion token: the sampler's log-prob (and alternatives when asked). */
  logprobs?: TokenLogprob[];
  timings?: { startedAt: number; durationMs: number };
}

export interface TokenScores {
  tokenIds: number[];
  logprobs: number[];
  /**
   * Per completion position, the scorer's `topLogprobs` most likely tokens (ids and log-probs,
   * most likely first): present when ScoreOptions.topLogprobs was asked and the policy can.
   */
  top?: { tokenIds: number[]; logprobs: number[] }[];
}

export interface ScoreOptions {
  /** Also return each position's k most likely tokens (vLLM `prompt_logprobs: k`). */
  topLogprobs?: number;
}

/** Anything that can answer a conversation: an in-process model or an HTTP server. */
export interface Policy {
  readonly id: string;
  generate(messages: Message[], tools?: ToolSchema[], params?: GenerateParams): Promise<Generation>;
  /**
   * Log-probs of `completion` tokens given the conversation (teacher scoring). Optional.
   * With `messages = []` the completion is a raw token sequence with nothing before it (no chat
   * template); the first token then has no context and its value is up to the policy. The
   * OpenAI-compatible server's `/v1/completions` echo and `prompt_logprobs` rely on this.
   */
  score?(
    messages: Message[],
    completion: string | number[],
    tools?: ToolSchema[],
    options?: ScoreOptions,
  ): Promise<TokenScores>;
  /**
   * Continue a raw prompt (no chat template), as `/v1/completions` does. Optional;
   * `kiln serve` uses it for `max_tokens > 0` on the completions endpoint.
   */
  complete?(prompt: string | number[], params?: GenerateParams): Promise<Generation>;
}

/** What the agent did on a turn, as an environment sees it. */
export interface Action {
  message: Message;
  /** Tool calls parsed from the message (empty when the reply is plain text). */
  toolCalls: ParsedToolCall[];
}

export interface ParsedToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface StepResult {
  /** Messages to append for the agent (tool results, user replies). */
  observations: Message[];
  reward: number;
  done: boolean;
  info?: Record<string, unknown>;
}

export interface ResetResult {
  /** The opening messages (system prompt, first user turn). */
  messages: Message[];
  info?: Record<string, unknown>;
}

/**
 * A single-agent environment. State is plain JSON so any state can be saved and
 * become a seeded start (`reset({ seed, state })`).
 */
export interface Environment<State = unknown> {
  readonly id: string;
  readonly version: string;
  tools(): ToolSchema[];
  reset(options: { seed: number; state?: State }): Promise<ResetResult> | ResetResult;
  step(action: Action): Promise<StepResult> | StepResult;
  getState(): State;
  /**
   * Named scores of the finished (or aborted) episode, e.g. `{ success: 1, quality: 0.7 }`.
   * Optional; when absent the episode's score is its total reward.
   */
  score?(): Record<string, number>;
}

/** Why a tool call in an assistant reply could not be executed (see parse-tool-calls.ts). */
export type ToolCallErrorKind =
  /** `<tool_call>` body (or an OpenAI `arguments` string) is not valid JSON. */
  | "bad_json"
  /** An opening tag without its closing tag (`<tool_call>`, `<function=…>`, `<parameter=…>`). */
  | "unclosed_tag"
  /** A call without a function name. */
  | "missing_name"
  /** Arguments present but not a JSON object. */
  | "bad_arguments"
  /** A well-formed call to a tool the environment does not declare. */
  | "unknown_tool"
  /** A call whose arguments violate the tool's JSON schema. */
  | "schema_violation";

export interface ToolCallIssue {
  kind: ToolCallErrorKind;
  /** Position of the call within the reply (0-based). */
  index: number;
  /** Human-readable explanation, also sent back to the agent as the error observation. */
  message: string;
  name?: string;
  /** The offending text, when the call came from raw text. */
  raw?: string;
  /** The call id, when the call was already structured (OpenAI tool_calls). */
  callId?: string;
}

/**
 * A game with several agents driven by a game master (clembench-style two-player games).
 * Each player sees its own conversation; the game master decides whose turn it is.
 */
export interface GameMaster<State = unknown> {
  readonly id: string;
  readonly version: string;
  /** Player names in a fixed order, e.g. `["describer", "guesser"]`. */
  players(): string[];
  /** Tools offered to a player (empty when the player answers in plain text). */
  tools(player: string): ToolSchema[];
  reset(options: { seed: number; state?: State }): Promise<GameResetResult> | GameResetResult;
  /** Whose turn it is now; null when the game is over. */
  nextPlayer(): string | null;
  step(player: string, action: Action): Promise<GameStepResult> | GameStepResult;
  getState(): State;
  score?(): Record<string, number>;
}

export interface GameResetResult {
  /** Opening messages per player. */
  messages: Record<string, Message[]>;
  info?: Record<string, unknown>;
}

export interface GameStepResult {
  /** Messages to append to each player's conversation (any subset of players). */
  observations: Record<string, Message[]>;
  /** Reward of this step (credited to the acting player). */
  reward: number;
  done: boolean;
  info?: Record<string, unknown>;
}

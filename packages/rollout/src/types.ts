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
}

/** Anything that can answer a conversation: an in-process model or an HTTP server. */
export interface Policy {
  readonly id: string;
  generate(messages: Message[], tools?: ToolSchema[], params?: GenerateParams): Promise<Generation>;
  /** Log-probs of `completion` tokens given the conversation (teacher scoring). Optional. */
  score?(messages: Message[], completion: string | number[], tools?: ToolSchema[]): Promise<TokenScores>;
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
}

import type { GenerateParams, Message, Policy } from "@kiln/rollout";
import { pyStrip } from "./py.js";

/** A user-role message as the game master hands it to a player. */
export interface Context {
  role: "user";
  content: string;
}

/** One chat turn in a player's memory (clemcore keeps `label` on pseudo turns; it is not sent). */
export interface ChatTurn {
  role: "user" | "assistant";
  content: string;
  label?: string;
}

/** Produces a player's reply from its perspective (memory + the new context). */
export interface PlayerBackend {
  /** Recorded as `model_name` in interactions.json ("programmatic" for scripted players). */
  readonly modelName: string;
  respond(messages: ChatTurn[], context: Context): Promise<string>;
}

/**
 * clemcore's backends merge consecutive same-role messages with a blank line before a call
 * (`backends/utils.py ensure_alternating_roles`).
 */
export function ensureAlternatingRoles(messages: ChatTurn[]): Message[] {
  const out: Message[] = [];
  for (const m of messages) {
    const last = out[out.length - 1];
    if (last && last.role === m.role) last.content = `${last.content}\n\n${m.content}`;
    else out.push({ role: m.role, content: m.content });
  }
  return out;
}

/**
 * The reply the game master sees: a thinking block the server left in the content (`<think>…</think>`, when no
 * reasoning parser split it off) is dropped, as clemcore's HF backend does for models with a CoT tag
 * (`split_and_clean_cot_output`), and the rest is stripped like clemcore's backends do.
 */
export function cleanReply(text: string): string {
  const end = text.lastIndexOf("</think>");
  return pyStrip(end >= 0 ? text.slice(end + "</think>".length) : text);
}

/** Sampling settings for LLM players; clembench runs use temperature 0. */
export interface PolicyPlayerOptions {
  temperature?: number;
  maxTokens?: number;
  enableThinking?: boolean;
  /** Extra generate params passed through. */
  params?: GenerateParams;
}

/**
 * An LLM player backed by a kiln `Policy`. The reply is stripped of surrounding whitespace, as
 * clemcore's backends do (`response_text.strip()` in the OpenAI and HF backends), before the GM parses it.
 */
export class PolicyBackend implements PlayerBackend {
  readonly modelName: string;
  constructor(
    readonly policy: Policy,
    readonly options: PolicyPlayerOptions = {},
  ) {
    this.modelName = policy.id;
  }

  async respond(messages: ChatTurn[]): Promise<string> {
    const params: GenerateParams = {
      ...this.options.params,
      temperature: this.options.temperature ?? 0,
    };
    if (this.options.maxTokens !== undefined) params.maxTokens = this.options.maxTokens;
    if (this.options.enableThinking !== undefined) params.enableThinking = this.options.enableThinking;
    const gen = await this.policy.generate(ensureAlternatingRoles(messages), undefined, params);
    return cleanReply(gen.message.content ?? gen.text ?? "");
  }
}

/** A scripted (programmatic) player: a function of its memory and the new context. */
export class ScriptedBackend implements PlayerBackend {
  constructor(
    readonly fn: (messages: ChatTurn[], context: Context) => string | Promise<string>,
    readonly modelName = "programmatic",
  ) {}
  async respond(messages: ChatTurn[], context: Context): Promise<string> {
    return this.fn(messages, context);
  }
}

/** Replays a fixed list of replies in order (handy in tests); throws when exhausted. */
export function replay(replies: string[], modelName = "programmatic"): ScriptedBackend {
  const queue = [...replies];
  return new ScriptedBackend(() => {
    const next = queue.shift();
    if (next === undefined) throw new Error("replay: no scripted reply left");
    return next;
  }, modelName);
}

/** A participant: name ("Player N"), role, memory, and the backend that answers. */
export class Player {
  name = "";
  readonly messages: ChatTurn[] = [];
  constructor(
    readonly backend: PlayerBackend,
    readonly gameRole: string,
  ) {}

  get modelName(): string {
    return this.backend.modelName;
  }
}

/** Wrap a player backend as a kiln Policy (to serve scripted players over HTTP, e.g. in tests and demos). */
export function policyFromBackend(backend: PlayerBackend, id = backend.modelName): Policy {
  return {
    id,
    async generate(messages: Message[]) {
      const turns: ChatTurn[] = messages
        .filter((m) => m.role === "user" || m.role === "assistant")
        .map((m) => ({ role: m.role as "user" | "assistant", content: m.content ?? "" }));
      const last = turns[turns.length - 1];
      const text = await backend.respond(turns, { role: "user", content: last?.content ?? "" });
      return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
    },
  };
}

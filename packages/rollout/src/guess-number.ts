// A toy environment (guess a secret number with a `guess` tool) and a seeded scripted player
// for it. Small enough to run thousands of episodes per second, rich enough to exercise every
// path: tool calls in both formats, malformed calls, rewards, seeded starts and branching.

import { formatToolCalls, type ToolCallFormat } from "./parse-tool-calls.js";
import { mulberry32 } from "./seeds.js";
import type { ScriptContext } from "./scripted-policy.js";
import type { Action, Environment, Message, ResetResult, StepResult, ToolSchema } from "./types.js";
import { SeededStartError } from "./errors.js";

export interface GuessNumberState {
  secret: number;
  low: number;
  high: number;
  guesses: number[];
  solved: boolean;
}

export const GUESS_TOOL: ToolSchema = {
  type: "function",
  function: {
    name: "guess",
    description: "Guess the secret number.",
    parameters: {
      type: "object",
      properties: { n: { type: "integer", description: "your guess", minimum: 1, maximum: 100 } },
      required: ["n"],
      additionalProperties: false,
    },
  },
};

export class GuessNumberEnv implements Environment<GuessNumberState> {
  readonly id = "guess-number";
  readonly version = "1";
  private state: GuessNumberState = { secret: 1, low: 1, high: 100, guesses: [], solved: false };

  tools(): ToolSchema[] {
    return [GUESS_TOOL];
  }

  reset(options: { seed: number; state?: GuessNumberState }): ResetResult {
    if (options.state) {
      const s = options.state;
      if (!(Number.isInteger(s.secret) && s.low <= s.secret && s.secret <= s.high)) {
        throw new SeededStartError(`guess-number state: secret ${s.secret} must be an integer in [low, high]`);
      }
      this.state = structuredClone(s);
    } else {
      const secret = 1 + Math.floor(mulberry32(options.seed)() * 100);
      this.state = { secret, low: 1, high: 100, guesses: [], solved: false };
    }
    const { low, high, guesses } = this.state;
    const history = guesses.length > 0 ? ` Guesses so far: ${guesses.join(", ")}.` : "";
    const messages: Message[] = [
      {
        role: "system",
        content: "You play guess-the-number. Use the guess tool; it answers higher, lower or correct.",
      },
      { role: "user", content: `I picked a number between ${low} and ${high}.${history} Make a guess.` },
    ];
    return { messages };
  }

  step(action: Action): StepResult {
    if (action.toolCalls.length === 0) {
      return { observations: [{ role: "user", content: "Please call the guess tool." }], reward: 0, done: false };
    }
    const observations: Message[] = [];
    let reward = 0;
    for (const call of action.toolCalls) {
      if (this.state.solved) {
        observations.push({ role: "tool", tool_call_id: call.id, content: "The game is over." });
        continue;
      }
      const n = call.arguments.n as number;
      this.state.guesses.push(n);
      let answer: string;
      if (n === this.state.secret) {
        answer = "correct";
        this.state.solved = true;
        reward = 1;
      } else if (n < this.state.secret) {
        answer = "higher";
        this.state.low = Math.max(this.state.low, n + 1);
      } else {
        answer = "lower";
        this.state.high = Math.min(this.state.high, n - 1);
      }
      observations.push({ role: "tool", tool_call_id: call.id, content: answer });
    }
    return { observations, reward, done: this.state.solved };
  }

  getState(): GuessNumberState {
    return structuredClone(this.state);
  }

  /** success, guesses used, and a score that prefers fewer guesses. */
  score(): Record<string, number> {
    const success = this.state.solved ? 1 : 0;
    const guesses = this.state.guesses.length;
    return { success, guesses, score: success * Math.max(0, 1 - 0.05 * (guesses - 1)) };
  }
}

export interface GuessScriptOptions {
  format?: ToolCallFormat;
  /** Probability of a malformed reply (bad JSON, unknown tool, schema violation, unclosed tag). */
  malformedRate?: number;
  /** Probability of guessing uniformly in the feasible range instead of bisecting. */
  exploreRate?: number;
}

/** The feasible range, the guesses so far and whether any was "lower", read from the conversation alone. */
export function guessNumberHistory(messages: readonly Message[]): {
  low: number;
  high: number;
  guesses: number[];
  sawLower: boolean;
} {
  let low = 1;
  let high = 100;
  const opening = messages.find((m) => m.role === "user");
  const range = /between (\d+) and (\d+)/.exec(opening?.content ?? "");
  if (range) {
    low = Number(range[1]);
    high = Number(range[2]);
  }
  const byId = new Map<string, number>();
  const guesses: number[] = [];
  let sawLower = false;
  for (const m of messages) {
    if (m.role === "assistant") {
      for (const tc of m.tool_calls ?? []) {
        try {
          const n = JSON.parse(tc.function.arguments).n;
          if (Number.isInteger(n)) {
            byId.set(tc.id, n);
            guesses.push(n);
          }
        } catch {
          // a malformed earlier call taught nothing
        }
      }
    } else if (m.role === "tool" && m.tool_call_id && byId.has(m.tool_call_id)) {
      const n = byId.get(m.tool_call_id)!;
      if (m.content === "higher") low = Math.max(low, n + 1);
      if (m.content === "lower") {
        high = Math.min(high, n - 1);
        sawLower = true;
      }
    }
  }
  return { low, high: Math.max(low, high), guesses, sawLower };
}

/** A bisecting player that reads the range from the conversation alone (so it is stateless). */
export function guessNumberScript(options: GuessScriptOptions = {}): (ctx: ScriptContext) => string {
  const format = options.format ?? "hermes";
  const malformedRate = options.malformedRate ?? 0;
  const exploreRate = options.exploreRate ?? 0;
  return ({ messages, rng }) => {
    const { low, high } = guessNumberHistory(messages);
    if (rng() < malformedRate) {
      const variants = [
        '<tool_call>\n{"name": "guess", "arguments": {"n": 50,}}\n</tool_call>',
        '<tool_call>\n{"name": "guesss", "arguments": {"n": 50}}\n</tool_call>',
        '<tool_call>\n{"name": "guess", "arguments": {"n": "fifty"}}\n</tool_call>',
        '<tool_call>\n{"name": "guess", "arguments": {"n": 50}}',
      ];
      return `Let me guess.\n${variants[Math.floor(rng() * variants.length)]}`;
    }
    const n = rng() < exploreRate ? low + Math.floor(rng() * (high - low + 1)) : Math.floor((low + high) / 2);
    return `I will try ${n}.\n${formatToolCalls([{ name: "guess", arguments: { n } }], format)}`;
  };
}

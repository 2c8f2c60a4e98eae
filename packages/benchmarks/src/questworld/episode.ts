// A small local episode loop: policy → assistant message → parsed calls → environment,
// until the episode ends. @kiln/rollout's episode runner supersedes it for training;
// this one keeps questworld's evaluation self-contained (it needs rollout's types only).

import type { GenerateParams, Message, ParsedToolCall, Policy } from "@kiln/rollout";
import type { ArchetypeId } from "./archetypes.js";
import { QuestworldConfigError } from "./errors.js";
import { type QuestStages, type QuestworldEnvironment, questStages } from "./environment.js";
import { totalStages } from "./rules.js";
import type { Counters, EpisodeStatus, QuestworldState } from "./state.js";

export interface EpisodeContext {
  env: QuestworldEnvironment;
  archetype: ArchetypeId;
  seed: number;
}

/** Builds a policy per episode (the expert reads its own episode's state; random policies take a seed). */
export type PolicyFactory = (ctx: EpisodeContext) => Policy;

export interface QuestworldEpisodeOptions {
  env: QuestworldEnvironment;
  policy: Policy;
  seed: number;
  archetype?: ArchetypeId;
  /** Seeded start (see seeded-starts.ts). */
  state?: QuestworldState;
  /** Cap on assistant turns (default: the state's tool-call budget, which always ends the episode first). */
  maxTurns?: number;
  params?: GenerateParams;
}

export interface QuestworldEpisode {
  archetype: ArchetypeId;
  seed: number;
  messages: Message[];
  turns: number;
  /** Stages gained per turn (the environment's reward). */
  rewards: number[];
  stages: QuestStages;
  total: number;
  /** "max_turns" when the turn cap stopped a running episode. */
  status: EpisodeStatus | "max_turns";
  counters: Counters;
  finalState: QuestworldState;
}

/**
 * Parse an OpenAI-style message's tool calls. A call whose arguments are not a JSON object
 * is left out, and the environment answers it as unparseable (a malformed call).
 */
export function parseMessageToolCalls(message: Message): ParsedToolCall[] {
  const out: ParsedToolCall[] = [];
  for (const tc of message.tool_calls ?? []) {
    let args: unknown;
    try {
      args = tc.function.arguments.trim() === "" ? {} : JSON.parse(tc.function.arguments);
    } catch {
      continue;
    }
    if (typeof args === "object" && args !== null && !Array.isArray(args)) {
      out.push({ id: tc.id, name: tc.function.name, arguments: args as Record<string, unknown> });
    }
  }
  return out;
}

export async function runQuestworldEpisode(options: QuestworldEpisodeOptions): Promise<QuestworldEpisode> {
  const { env, policy, seed } = options;
  const reset = env.reset({ seed, state: options.state, archetype: options.archetype });
  const start = env.getState();
  const maxTurns = options.maxTurns ?? start.limits.toolCalls;
  if (!Number.isSafeInteger(maxTurns) || maxTurns < 1) {
    throw new QuestworldConfigError(`maxTurns ${maxTurns}: must be a positive integer`);
  }
  const messages: Message[] = [...reset.messages];
  const tools = env.tools();
  const rewards: number[] = [];
  let turns = 0;
  let done = start.status !== "running";
  while (!done && turns < maxTurns) {
    const gen = await policy.generate(messages, tools, options.params);
    const message: Message = { ...gen.message, role: "assistant" };
    messages.push(message);
    const result = env.step({ message, toolCalls: parseMessageToolCalls(message) });
    messages.push(...result.observations);
    rewards.push(result.reward);
    turns++;
    done = result.done;
  }
  const finalState = env.getState();
  return {
    archetype: finalState.archetype,
    seed,
    messages,
    turns,
    rewards,
    stages: questStages(finalState),
    total: totalStages(finalState),
    status: finalState.status === "running" ? "max_turns" : finalState.status,
    counters: { ...finalState.counters },
    finalState,
  };
}

// The Trajectory record: one per episode, the unit of every trajectory file.
// Versioned (`schema` + `version`) so readers can refuse records they do not understand.

import { z } from "zod";
import { cloneMessages } from "./messages.js";
import type {
  FinishReason,
  GenerateParams,
  Message,
  ParsedToolCall,
  ToolCallErrorKind,
  ToolCallIssue,
  ToolSchema,
} from "./types.js";

export const TRAJECTORY_SCHEMA = "kiln.trajectory";
/** Bump when a field changes meaning or a required field is added; readers reject newer versions. */
export const TRAJECTORY_SCHEMA_VERSION = 1;

/** How an episode ended. */
export type EpisodeStatus =
  /** The environment (or game master) said done. */
  | "done"
  /** `maxTurns` reached. */
  | "turn_limit"
  /** `maxEpisodeTokens` completion tokens reached. */
  | "token_limit"
  /** `maxConsecutiveMalformed` malformed replies in a row. */
  | "malformed_limit"
  /** The policy (server error, timeout) or the environment threw; see `outcome.error`. */
  | "error";

export interface TopLogprob {
  token: string;
  tokenId?: number;
  logprob: number;
}

export interface TurnRecord {
  index: number;
  /** Acting player in a multi-player game. */
  player?: string;
  /** Sampling seed given to the policy for this turn (derived from the episode seed). */
  seed?: number;
  /** Tokens of the rendered prompt, when the policy reports them. */
  promptTokenIds?: number[];
  completionTokenIds?: number[];
  /** Sampler log-prob of each completion token. */
  logprobs?: number[];
  /** Alternatives per completion token, when `topLogprobs` was asked for. */
  topLogprobs?: TopLogprob[][];
  finishReason: FinishReason;
  /** The assistant message as it entered the conversation (tool calls normalised). */
  message: Message;
  /** The executed tool calls (empty for plain-text replies and rejected replies). */
  action: ParsedToolCall[];
  /** Malformed-call diagnostics of this reply (empty when the reply was well formed). */
  toolCallIssues: ToolCallIssue[];
  /** Messages appended after the reply for the acting agent (tool results, user turns, error notes). */
  observations: Message[];
  /** In games: what every player was shown after this turn. */
  observationsByPlayer?: Record<string, Message[]>;
  reward: number;
  done: boolean;
  info?: Record<string, unknown>;
  /** Environment state after the step (only with `recordStates`), a candidate seeded start. */
  stateAfter?: unknown;
  timings: { startedAt: number; generateMs: number; stepMs: number };
}

export interface EpisodeError {
  kind: "policy" | "environment" | "internal";
  message: string;
  /** Turn at which it happened. */
  turn: number;
}

export interface EpisodeStats {
  turns: number;
  promptTokens: number;
  completionTokens: number;
  /** Replies rejected because some call was malformed. */
  malformedReplies: number;
  /** Malformed calls by kind (a reply may contain several). */
  malformedCalls: Partial<Record<ToolCallErrorKind, number>>;
  /** Longest run of consecutive malformed replies. */
  maxMalformedStreak: number;
}

export interface Trajectory {
  schema: typeof TRAJECTORY_SCHEMA;
  version: number;
  episodeId: string;
  seed: number;
  policyId: string;
  environment: { id: string; version: string };
  /** The saved state the episode started from (seeded start), if any. */
  startState?: unknown;
  tools: ToolSchema[];
  /** Opening messages from `reset`. */
  prompt: Message[];
  turns: TurnRecord[];
  /** Multi-player games: each player's policy, opening messages and tools. */
  players?: Record<string, { policyId: string; prompt: Message[]; tools: ToolSchema[] }>;
  outcome: {
    status: EpisodeStatus;
    error?: EpisodeError;
    totalReward: number;
    /** The headline score: `scores.score` when the environment reports it, else the total reward. */
    score: number;
    scores: Record<string, number>;
  };
  stats: EpisodeStats;
  params?: GenerateParams;
  /** Free-form: branch provenance, seeded-start ids, run names. */
  metadata: Record<string, unknown>;
  timings: { startedAt: number; durationMs: number };
}

/** The full conversation of an episode (of one player in a game), rebuilt from its turns. */
export function trajectoryMessages(traj: Trajectory, player?: string): Message[] {
  if (player !== undefined) {
    const p = traj.players?.[player];
    if (!p) throw new RangeError(`trajectory ${traj.episodeId}: no player "${player}"`);
    const out = cloneMessages(p.prompt);
    for (const t of traj.turns) {
      if (t.player === player) out.push(t.message);
      out.push(...(t.observationsByPlayer?.[player] ?? []));
    }
    return cloneMessages(out);
  }
  const out = cloneMessages(traj.prompt);
  for (const t of traj.turns) out.push(t.message, ...t.observations);
  return cloneMessages(out);
}

/** Conversation right before turn `turn`'s reply (what the policy saw). */
export function messagesBeforeTurn(traj: Trajectory, turn: number): Message[] {
  if (traj.players)
    throw new RangeError(`trajectory ${traj.episodeId}: messagesBeforeTurn is for single-agent episodes`);
  const out = cloneMessages(traj.prompt);
  for (const t of traj.turns.slice(0, turn)) out.push(t.message, ...t.observations);
  return cloneMessages(out);
}

const messageSchema = z.looseObject({
  role: z.enum(["system", "user", "assistant", "tool"]),
  content: z.string().nullable(),
});

const turnSchema = z.looseObject({
  index: z.number().int().nonnegative(),
  message: messageSchema,
  action: z.array(z.looseObject({ id: z.string(), name: z.string(), arguments: z.record(z.string(), z.unknown()) })),
  toolCallIssues: z.array(z.looseObject({ kind: z.string(), index: z.number(), message: z.string() })),
  observations: z.array(messageSchema),
  reward: z.number(),
  done: z.boolean(),
});

/** Structural check of a decoded record (envelope, turns, outcome); extra fields pass through. */
export const trajectorySchema = z.looseObject({
  schema: z.literal(TRAJECTORY_SCHEMA),
  version: z.number().int().positive(),
  episodeId: z.string().min(1),
  seed: z.number(),
  policyId: z.string(),
  environment: z.object({ id: z.string(), version: z.string() }),
  tools: z.array(z.unknown()),
  prompt: z.array(messageSchema),
  turns: z.array(turnSchema),
  outcome: z.looseObject({
    status: z.enum(["done", "turn_limit", "token_limit", "malformed_limit", "error"]),
    totalReward: z.number(),
    score: z.number(),
    scores: z.record(z.string(), z.number()),
  }),
  stats: z.looseObject({ turns: z.number(), completionTokens: z.number() }),
  metadata: z.record(z.string(), z.unknown()),
});

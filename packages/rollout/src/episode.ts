// One episode: reset the environment, then alternate policy replies and environment steps
// until done or a limit. Never throws for a bad episode: a policy error (server down, timeout)
// or an environment error becomes `outcome.status = "error"` in the returned trajectory, so one
// bad episode cannot kill a batch. Pure (no Node APIs).

import { cloneMessage, cloneMessages } from "./messages.js";
import { assistantMessageFromText, parseOpenAIToolCalls } from "./parse-tool-calls.js";
import { deriveSeed } from "./seeds.js";
import {
  type EpisodeError,
  type EpisodeStats,
  type EpisodeStatus,
  TRAJECTORY_SCHEMA,
  TRAJECTORY_SCHEMA_VERSION,
  type TopLogprob,
  type Trajectory,
  type TurnRecord,
} from "./trajectory.js";
import type {
  Environment,
  GenerateParams,
  Generation,
  Message,
  ParsedToolCall,
  Policy,
  ToolCallIssue,
  ToolSchema,
} from "./types.js";
import { RolloutConfigError } from "./errors.js";

export interface EpisodeLimits {
  /** Stop after this many policy replies (default 32). */
  maxTurns?: number;
  /** Stop once the episode's completion tokens reach this (default: no limit). Per-turn: `params.maxTokens`. */
  maxEpisodeTokens?: number;
  /** Abort after this many malformed replies in a row (default 3). */
  maxConsecutiveMalformed?: number;
  /** Fail the episode (policy error) when one reply takes longer than this (default: no limit). */
  turnTimeoutMs?: number;
}

/** How one episode is played, whoever plays it: a policy in an environment (runEpisode) or a game (runGame). */
export interface EpisodePlayOptions {
  seed: number;
  episodeId?: string;
  /** Start from this saved environment state (a seeded start) instead of a fresh reset. */
  startState?: unknown;
  /** Sampling parameters; each turn gets its own `seed` derived from the episode seed. */
  params?: GenerateParams;
  limits?: EpisodeLimits;
  /** Store `env.getState()` after every step (turn.stateAfter), e.g. to collect seeded starts. */
  recordStates?: boolean;
  metadata?: Record<string, unknown>;
  /** Text of the observation that answers a malformed reply (default: the issue messages). */
  malformedFeedback?: (issues: ToolCallIssue[]) => string;
}

export interface EpisodeOptions extends EpisodePlayOptions {
  env: Environment;
  policy: Policy;
  signal?: AbortSignal;
}

/** Resolved limits with defaults applied. */
export interface ResolvedLimits {
  maxTurns: number;
  maxEpisodeTokens: number;
  maxConsecutiveMalformed: number;
  turnTimeoutMs: number;
}

export function resolveLimits(limits: EpisodeLimits = {}): ResolvedLimits {
  const out = {
    maxTurns: limits.maxTurns ?? 32,
    maxEpisodeTokens: limits.maxEpisodeTokens ?? Number.POSITIVE_INFINITY,
    maxConsecutiveMalformed: limits.maxConsecutiveMalformed ?? 3,
    turnTimeoutMs: limits.turnTimeoutMs ?? Number.POSITIVE_INFINITY,
  };
  for (const [k, v] of Object.entries(out)) {
    if (!(v >= 1)) throw new RolloutConfigError(`episode limit ${k} must be >= 1, got ${v}`);
  }
  return out;
}

/** The id seed for tool calls of a reply: shared with the server so ids match on every transport. */
export function replyIdSeed(conversation: readonly Message[], text: string): string {
  return `${conversation.length}\u0000${text}`;
}

/** The sampling seed of turn `turn` in a stream of turns seeded by `base`. */
export function turnSeed(base: number, turn: number): number {
  return deriveSeed(base, "turn", turn);
}

export function defaultMalformedFeedback(issues: ToolCallIssue[]): string {
  return `Error: ${issues.map((i) => i.message).join("; ")}. No tool was executed. Reply again with a valid tool call.`;
}

/** Mutable state of an episode in progress; branching builds one from a recorded prefix. */
export interface EpisodeProgress {
  trajectory: Trajectory;
  messages: Message[];
  malformedStreak: number;
  /** Base of the per-turn sampling seeds (the episode seed, or a branch's own seed). */
  seedBase: number;
}

/** Runs one episode from a fresh reset (or a seeded start) to its end. */
export async function runEpisode(options: EpisodeOptions): Promise<Trajectory> {
  const limits = resolveLimits(options.limits);
  const startedAt = Date.now();
  const t0 = performance.now();
  const env = options.env;
  const trajectory: Trajectory = {
    schema: TRAJECTORY_SCHEMA,
    version: TRAJECTORY_SCHEMA_VERSION,
    episodeId: options.episodeId ?? `episode-${options.seed}`,
    seed: options.seed,
    policyId: options.policy.id,
    environment: { id: env.id, version: env.version },
    ...(options.startState !== undefined ? { startState: options.startState } : {}),
    tools: [],
    prompt: [],
    turns: [],
    outcome: { status: "done", totalReward: 0, score: 0, scores: {} },
    stats: emptyStats(),
    ...(options.params ? { params: { ...options.params } } : {}),
    metadata: { ...(options.metadata ?? {}) },
    timings: { startedAt, durationMs: 0 },
  };
  const progress: EpisodeProgress = { trajectory, messages: [], malformedStreak: 0, seedBase: options.seed };
  try {
    trajectory.tools = env.tools();
    const reset = await env.reset(
      options.startState !== undefined ? { seed: options.seed, state: options.startState } : { seed: options.seed },
    );
    trajectory.prompt = cloneMessages(reset.messages);
    if (reset.info) trajectory.metadata.resetInfo = reset.info;
    progress.messages = cloneMessages(reset.messages);
  } catch (err) {
    return finish(progress, env, "error", { kind: "environment", message: errorText(err), turn: 0 }, t0);
  }
  return continueEpisode(progress, options, limits, t0);
}

/** Runs turns from the current progress until the episode ends; used by runEpisode and branching. */
export async function continueEpisode(
  progress: EpisodeProgress,
  options: Omit<EpisodeOptions, "seed" | "startState">,
  limits: ResolvedLimits,
  t0 = performance.now(),
): Promise<Trajectory> {
  const { env, policy } = options;
  const traj = progress.trajectory;
  const tools = traj.tools;
  const feedback = options.malformedFeedback ?? defaultMalformedFeedback;
  while (true) {
    const turn = traj.turns.length;
    if (turn >= limits.maxTurns) return finish(progress, env, "turn_limit", undefined, t0);
    if (traj.stats.completionTokens >= limits.maxEpisodeTokens)
      return finish(progress, env, "token_limit", undefined, t0);
    if (options.signal?.aborted) {
      return finish(progress, env, "error", { kind: "internal", message: "episode aborted", turn }, t0);
    }
    const seed = turnSeed(progress.seedBase, turn);
    const startedAt = Date.now();
    const g0 = performance.now();
    let gen: Generation;
    try {
      gen = await withTimeout(
        policy.generate(cloneMessages(progress.messages), tools, { ...options.params, seed }),
        limits.turnTimeoutMs,
      );
    } catch (err) {
      return finish(progress, env, "error", { kind: "policy", message: errorText(err), turn }, t0);
    }
    const generateMs = performance.now() - g0;
    const { message, calls, issues } = readReply(gen, progress.messages, tools);
    const record: TurnRecord = {
      index: turn,
      seed,
      ...tokenFields(gen),
      // OpenAI servers say "tool_calls" when a reply carries calls; in-process models say "stop".
      finishReason: gen.finishReason === "stop" && message.tool_calls?.length ? "tool_calls" : gen.finishReason,
      message,
      action: [],
      toolCallIssues: issues,
      observations: [],
      reward: 0,
      done: false,
      timings: { startedAt, generateMs, stepMs: 0 },
    };
    traj.stats.completionTokens += record.completionTokenIds?.length ?? record.logprobs?.length ?? 0;
    traj.stats.promptTokens += record.promptTokenIds?.length ?? 0;

    if (issues.length > 0) {
      // A reply with any malformed call is rejected whole: executing half of it would leave the
      // environment in a state the agent did not ask for.
      record.observations = malformedObservations(message, issues, feedback);
      progress.malformedStreak++;
      countMalformed(traj.stats, issues, progress.malformedStreak);
      pushTurn(progress, record);
      if (progress.malformedStreak >= limits.maxConsecutiveMalformed) {
        return finish(progress, env, "malformed_limit", undefined, t0);
      }
      continue;
    }
    progress.malformedStreak = 0;
    record.action = calls;
    const s0 = performance.now();
    try {
      // The environment gets copies: whatever it does to them, the record stays as the agent replied.
      const result = await env.step({ message: cloneMessage(message), toolCalls: structuredClone(calls) });
      record.observations = cloneMessages(result.observations);
      record.reward = result.reward;
      record.done = result.done;
      if (result.info) record.info = result.info;
      if (options.recordStates) record.stateAfter = structuredClone(env.getState());
    } catch (err) {
      record.timings.stepMs = performance.now() - s0;
      pushTurn(progress, record);
      return finish(progress, env, "error", { kind: "environment", message: errorText(err), turn }, t0);
    }
    record.timings.stepMs = performance.now() - s0;
    pushTurn(progress, record);
    if (record.done) return finish(progress, env, "done", undefined, t0);
  }
}

/** Normalises a generation into the assistant message and its parsed calls and issues. */
export function readReply(
  gen: Generation,
  conversation: readonly Message[],
  tools: ToolSchema[],
): { message: Message; calls: ParsedToolCall[]; issues: ToolCallIssue[] } {
  if (gen.message.tool_calls && gen.message.tool_calls.length > 0) {
    // Already structured (a server with a tool parser): arguments are JSON strings to check.
    const message = cloneMessage(gen.message);
    message.role = "assistant";
    const { calls, issues } = parseOpenAIToolCalls(message.tool_calls!, tools);
    return { message, calls, issues };
  }
  const text = gen.text !== "" ? gen.text : (gen.message.content ?? "");
  const { message, parsed } = assistantMessageFromText(text, { tools, idSeed: replyIdSeed(conversation, text) });
  if (message.reasoning_content === undefined && gen.message.reasoning_content !== undefined) {
    message.reasoning_content = gen.message.reasoning_content;
  }
  return { message, calls: parsed.calls, issues: parsed.issues };
}

function malformedObservations(
  message: Message,
  issues: ToolCallIssue[],
  feedback: (i: ToolCallIssue[]) => string,
): Message[] {
  if (message.tool_calls && message.tool_calls.length > 0) {
    // Structured calls must each be answered by a tool message (OpenAI protocol).
    return message.tool_calls.map((tc, index) => {
      const own = issues.filter((i) => i.callId === tc.id || (i.callId === undefined && i.index === index));
      const content =
        own.length > 0
          ? feedback(own)
          : "Not executed: another tool call in the same reply was malformed. Reply again with valid tool calls.";
      return { role: "tool", tool_call_id: tc.id, content };
    });
  }
  return [{ role: "user", content: feedback(issues) }];
}

function tokenFields(gen: Generation): Partial<TurnRecord> {
  const out: Partial<TurnRecord> = {};
  if (gen.promptTokenIds) out.promptTokenIds = gen.promptTokenIds.slice();
  if (gen.completionTokenIds) out.completionTokenIds = gen.completionTokenIds.slice();
  else if (gen.logprobs && gen.logprobs.length > 0 && gen.logprobs.every((l) => l.tokenId !== undefined)) {
    out.completionTokenIds = gen.logprobs.map((l) => l.tokenId!);
  }
  if (gen.logprobs) {
    out.logprobs = gen.logprobs.map((l) => l.logprob);
    if (gen.logprobs.some((l) => l.top && l.top.length > 0)) {
      out.topLogprobs = gen.logprobs.map((l) =>
        (l.top ?? []).map(
          (t): TopLogprob => (t.tokenId !== undefined ? { ...t } : { token: t.token, logprob: t.logprob }),
        ),
      );
    }
  }
  return out;
}

function pushTurn(progress: EpisodeProgress, record: TurnRecord): void {
  progress.trajectory.turns.push(record);
  progress.trajectory.outcome.totalReward += record.reward;
  // Shared with the record on purpose: nothing mutates either while the episode runs, and the
  // policy and the environment only ever see copies.
  progress.messages.push(record.message, ...record.observations);
}

export function emptyStats(): EpisodeStats {
  return {
    turns: 0,
    promptTokens: 0,
    completionTokens: 0,
    malformedReplies: 0,
    malformedCalls: {},
    maxMalformedStreak: 0,
  };
}

export function countMalformed(stats: EpisodeStats, issues: ToolCallIssue[], streak: number): void {
  stats.malformedReplies++;
  for (const i of issues) stats.malformedCalls[i.kind] = (stats.malformedCalls[i.kind] ?? 0) + 1;
  stats.maxMalformedStreak = Math.max(stats.maxMalformedStreak, streak);
}

/** Closes the trajectory: status, scores, durations. Shared with games and branches. */
export function finish(
  progress: EpisodeProgress,
  env: { score?(): Record<string, number> },
  status: EpisodeStatus,
  error: EpisodeError | undefined,
  t0: number,
): Trajectory {
  const traj = progress.trajectory;
  traj.outcome.status = status;
  if (error) traj.outcome.error = error;
  traj.stats.turns = traj.turns.length;
  let scores: Record<string, number> = {};
  try {
    scores = env.score?.() ?? {};
  } catch (err) {
    if (!error) {
      traj.outcome.status = "error";
      traj.outcome.error = { kind: "environment", message: `score(): ${errorText(err)}`, turn: traj.turns.length };
    }
  }
  traj.outcome.scores = { ...scores };
  traj.outcome.score = typeof scores.score === "number" ? scores.score : traj.outcome.totalReward;
  traj.timings.durationMs += performance.now() - t0;
  return traj;
}

export function errorText(err: unknown): string {
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return String(err);
}

/** Rejects when `promise` takes longer than `ms` (the work itself cannot be cancelled). */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  if (!Number.isFinite(ms)) return promise;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no reply within turnTimeoutMs = ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Branching: fork a finished episode at turn t, sample K alternative replies from the current
// policy, play each to the end, and record the downstream scores — the raw material of
// branch-DPO (pair replies that diverged at the same state by how the episode then went).
// The environment state at turn t is rebuilt by replaying the recorded actions (environments
// are deterministic given seed and actions); a replay that does not reproduce the recorded
// observations throws BranchReplayError instead of silently branching from a different state.
// Pure.

import { continueEpisode, type EpisodeLimits, type EpisodeProgress, emptyStats, resolveLimits } from "./episode.js";
import { BranchReplayError, RolloutConfigError } from "./errors.js";
import { cloneMessages } from "./messages.js";
import { deriveSeed } from "./seeds.js";
import { messagesBeforeTurn, type Trajectory, type TurnRecord } from "./trajectory.js";
import type { Environment, GenerateParams, Message, Policy } from "./types.js";

export interface BranchOptions {
  /** The parent episode (single-agent). */
  trajectory: Trajectory;
  /** Fork before this turn's reply: 0 <= turn < trajectory.turns.length. */
  turn: number;
  /** Number of alternative continuations. */
  k: number;
  makeEnv: () => Environment;
  policy: Policy;
  params?: GenerateParams;
  limits?: EpisodeLimits;
  /** Branches run at once (default 4). */
  concurrency?: number;
}

export interface BranchResult {
  parentEpisodeId: string;
  turn: number;
  /** The conversation the alternatives answer. */
  prompt: Message[];
  /** The parent's own reply at the fork and its downstream score. */
  original: { message: Message; score: number };
  /** K continuations; branch i's reply at the fork is `branches[i].turns[turn].message`. */
  branches: Trajectory[];
}

export async function branchEpisode(options: BranchOptions): Promise<BranchResult> {
  const parent = options.trajectory;
  const { turn, k } = options;
  if (parent.players)
    throw new RolloutConfigError(
      `branchEpisode: ${parent.episodeId} is a multi-player game; branch single-agent episodes`,
    );
  if (!(Number.isInteger(turn) && turn >= 0 && turn < parent.turns.length)) {
    throw new RolloutConfigError(
      `branchEpisode: turn must be an integer in [0, ${parent.turns.length - 1}], got ${turn}`,
    );
  }
  if (!(Number.isInteger(k) && k >= 1))
    throw new RolloutConfigError(`branchEpisode: k must be an integer >= 1, got ${k}`);
  const limits = resolveLimits(options.limits);
  const prompt = messagesBeforeTurn(parent, turn);
  const runBranch = async (i: number): Promise<Trajectory> => {
    const env = options.makeEnv();
    await replayPrefix(env, parent, turn);
    const prefix = parent.turns.slice(0, turn).map((t) => structuredClone(t));
    const traj: Trajectory = {
      ...structuredClone({ ...parent, turns: [] as TurnRecord[] }),
      episodeId: `${parent.episodeId}/t${turn}/b${i}`,
      policyId: options.policy.id,
      turns: prefix,
      outcome: { status: "done", totalReward: prefix.reduce((s, t) => s + t.reward, 0), score: 0, scores: {} },
      stats: prefixStats(prefix),
      ...(options.params ? { params: { ...options.params } } : {}),
      metadata: {
        ...parent.metadata,
        branch: { parent: parent.episodeId, turn, index: i, parentPolicyId: parent.policyId },
      },
      timings: { startedAt: Date.now(), durationMs: 0 },
    };
    let streak = 0;
    for (const t of prefix) streak = t.toolCallIssues.length > 0 ? streak + 1 : 0;
    const progress: EpisodeProgress = {
      trajectory: traj,
      messages: cloneMessages(prompt),
      malformedStreak: streak,
      seedBase: deriveSeed(parent.seed, "branch", turn, i),
    };
    return continueEpisode(
      progress,
      { env, policy: options.policy, params: options.params, limits: options.limits },
      limits,
    );
  };
  const branches: Trajectory[] = new Array(k);
  let next = 0;
  const worker = async () => {
    while (next < k) {
      const i = next++;
      branches[i] = await runBranch(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(k, options.concurrency ?? 4) }, worker));
  return {
    parentEpisodeId: parent.episodeId,
    turn,
    prompt,
    original: { message: structuredClone(parent.turns[turn].message), score: parent.outcome.score },
    branches,
  };
}

/** Resets `env` as the parent did and re-executes turns [0, turn), checking each observation. */
export async function replayPrefix(env: Environment, parent: Trajectory, turn: number): Promise<void> {
  if (env.id !== parent.environment.id || env.version !== parent.environment.version) {
    throw new BranchReplayError(
      `replay of ${parent.episodeId}: environment ${env.id}@${env.version} differs from the recorded ${parent.environment.id}@${parent.environment.version}`,
    );
  }
  await env.reset(
    parent.startState !== undefined ? { seed: parent.seed, state: parent.startState } : { seed: parent.seed },
  );
  for (const t of parent.turns.slice(0, turn)) {
    if (t.toolCallIssues.length > 0) continue; // rejected replies never reached the environment
    const result = await env.step({ message: structuredClone(t.message), toolCalls: structuredClone(t.action) });
    if (canonicalJson(result.observations) !== canonicalJson(t.observations)) {
      throw new BranchReplayError(
        `replay of ${parent.episodeId}: turn ${t.index} observations differ from the recording (is the environment deterministic?)`,
      );
    }
  }
}

function prefixStats(turns: TurnRecord[]) {
  const stats = emptyStats();
  let streak = 0;
  for (const t of turns) {
    stats.completionTokens += t.completionTokenIds?.length ?? t.logprobs?.length ?? 0;
    stats.promptTokens += t.promptTokenIds?.length ?? 0;
    if (t.toolCallIssues.length > 0) {
      streak++;
      stats.malformedReplies++;
      for (const i of t.toolCallIssues) stats.malformedCalls[i.kind] = (stats.malformedCalls[i.kind] ?? 0) + 1;
      stats.maxMalformedStreak = Math.max(stats.maxMalformedStreak, streak);
    } else streak = 0;
  }
  return stats;
}

export interface PreferencePair {
  prompt: Message[];
  chosen: Message;
  rejected: Message;
  chosenScore: number;
  rejectedScore: number;
  /** Provenance: parent episode and fork turn. */
  source: { episodeId: string; turn: number };
}

export interface BranchPairOptions {
  /** Smallest score difference that makes a pair (default 1e-9: any strict improvement). */
  minMargin?: number;
  /** Include the parent's own reply as a candidate (default true). */
  includeOriginal?: boolean;
  /** "best-vs-rest" (default): the best reply against each clearly worse one; "all": every ordered pair. */
  mode?: "best-vs-rest" | "all";
}

/** Preference pairs from a branch result: replies at the same state, ranked by downstream score. */
export function branchPairs(result: BranchResult, options: BranchPairOptions = {}): PreferencePair[] {
  const margin = options.minMargin ?? 1e-9;
  const candidates = result.branches.map((b) => ({ message: b.turns[result.turn].message, score: b.outcome.score }));
  if (options.includeOriginal ?? true) candidates.push(result.original);
  // Identical replies carry no preference signal.
  const key = (m: Message) =>
    JSON.stringify([m.content, m.tool_calls?.map((t) => [t.function.name, t.function.arguments])]);
  const byReply = new Map<string, { message: Message; score: number; n: number }>();
  for (const c of candidates) {
    const e = byReply.get(key(c.message));
    if (e) {
      e.score += c.score;
      e.n++;
    } else byReply.set(key(c.message), { message: c.message, score: c.score, n: 1 });
  }
  const ranked = [...byReply.values()]
    .map((e) => ({ message: e.message, score: e.score / e.n }))
    .sort((a, b) => b.score - a.score);
  const pair = (a: (typeof ranked)[number], b: (typeof ranked)[number]): PreferencePair => ({
    prompt: cloneMessages(result.prompt),
    chosen: structuredClone(a.message),
    rejected: structuredClone(b.message),
    chosenScore: a.score,
    rejectedScore: b.score,
    source: { episodeId: result.parentEpisodeId, turn: result.turn },
  });
  const out: PreferencePair[] = [];
  if ((options.mode ?? "best-vs-rest") === "all") {
    for (let i = 0; i < ranked.length; i++)
      for (let j = i + 1; j < ranked.length; j++)
        if (ranked[i].score - ranked[j].score >= margin) out.push(pair(ranked[i], ranked[j]));
  } else if (ranked.length > 0) {
    for (const r of ranked.slice(1)) if (ranked[0].score - r.score >= margin) out.push(pair(ranked[0], r));
  }
  return out;
}

/** JSON with object keys sorted, so equal data compares equal whatever the key order. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(
          Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : v,
  );
}

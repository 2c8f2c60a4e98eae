// Aggregate figures over many episodes: what a run log and a benchmark report print. Pure.

import type { EpisodeStatus, Trajectory } from "./trajectory.js";
import type { ToolCallErrorKind } from "./types.js";

export interface RunSummary {
  episodes: number;
  byStatus: Partial<Record<EpisodeStatus, number>>;
  meanScore: number;
  meanTotalReward: number;
  meanTurns: number;
  completionTokens: number;
  /** All assistant replies, and those rejected as malformed: their ratio measures the malformed-call attractor. */
  replies: number;
  malformedReplies: number;
  malformedReplyRate: number;
  malformedCalls: Partial<Record<ToolCallErrorKind, number>>;
  /** Episodes aborted by the malformed-reply limit. */
  malformedAborts: number;
}

export function summarizeTrajectories(trajectories: readonly Pick<Trajectory, "outcome" | "stats">[]): RunSummary {
  const s: RunSummary = {
    episodes: trajectories.length,
    byStatus: {},
    meanScore: 0,
    meanTotalReward: 0,
    meanTurns: 0,
    completionTokens: 0,
    replies: 0,
    malformedReplies: 0,
    malformedReplyRate: 0,
    malformedCalls: {},
    malformedAborts: 0,
  };
  for (const t of trajectories) {
    s.byStatus[t.outcome.status] = (s.byStatus[t.outcome.status] ?? 0) + 1;
    s.meanScore += t.outcome.score;
    s.meanTotalReward += t.outcome.totalReward;
    s.meanTurns += t.stats.turns;
    s.completionTokens += t.stats.completionTokens;
    s.replies += t.stats.turns;
    s.malformedReplies += t.stats.malformedReplies;
    for (const [k, v] of Object.entries(t.stats.malformedCalls)) {
      const kind = k as ToolCallErrorKind;
      s.malformedCalls[kind] = (s.malformedCalls[kind] ?? 0) + (v ?? 0);
    }
    if (t.outcome.status === "malformed_limit") s.malformedAborts++;
  }
  const n = Math.max(1, trajectories.length);
  s.meanScore /= n;
  s.meanTotalReward /= n;
  s.meanTurns /= n;
  s.malformedReplyRate = s.replies > 0 ? s.malformedReplies / s.replies : 0;
  return s;
}

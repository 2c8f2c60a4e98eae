// Runs many episodes concurrently with a bounded pool. Each finished episode goes to the sink
// (a TrajectoryWriter) at once, so a crash loses only episodes in flight; episodes the sink
// already holds are skipped (resume). One bad episode never stops the batch: runEpisode turns
// policy and environment failures into recorded errors. Pure (the sink brings the file system).

import { type EpisodeLimits, resolveLimits, runEpisode } from "./episode.js";
import { RolloutConfigError } from "./errors.js";
import { ProgressBar, type ProgressStream } from "./progress.js";
import { type RunSummary, summarizeTrajectories } from "./run-summary.js";
import { deriveSeed } from "./seeds.js";
import type { Trajectory } from "./trajectory.js";
import type { Environment, GenerateParams, Policy } from "./types.js";

export interface EpisodeSpec {
  /** Unique within the run and the output file; the resume key. */
  id: string;
  seed: number;
  /** Saved environment state to start from (a seeded start). */
  state?: unknown;
  metadata?: Record<string, unknown>;
}

/** Where finished episodes go; TrajectoryWriter implements it. */
export interface TrajectorySink {
  has(episodeId: string): boolean;
  append(trajectory: Trajectory): Promise<void>;
}

export interface RunOptions {
  /** Creates an environment; called once per pool worker (environments are stateful, reset per episode). */
  makeEnv: () => Environment;
  policy: Policy;
  /** Episode list, or a count: ids "episode-00000".., seeds derived from `baseSeed`. */
  episodes: EpisodeSpec[] | number;
  baseSeed?: number;
  /** Episodes in flight at once (default 8). */
  concurrency?: number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
  recordStates?: boolean;
  sink?: TrajectorySink;
  /** Keep trajectories in the result (default true; turn off for very large runs). */
  keep?: boolean;
  /** true: bar on stderr; a stream: bar there; false/undefined: none. */
  progress?: boolean | ProgressStream;
  label?: string;
  onEpisode?: (trajectory: Trajectory) => void;
  signal?: AbortSignal;
  metadata?: Record<string, unknown>;
}

export interface RunResult {
  trajectories: Trajectory[];
  /** Episodes skipped because the sink already had them. */
  skipped: number;
  summary: RunSummary;
  durationMs: number;
  episodesPerSecond: number;
}

/** The episode list of a count-based run (stable ids and seeds, so resumed runs line up). */
export function episodeSpecs(count: number, baseSeed = 0, prefix = "episode"): EpisodeSpec[] {
  const width = Math.max(5, String(count - 1).length);
  return Array.from({ length: count }, (_, i) => ({
    id: `${prefix}-${String(i).padStart(width, "0")}`,
    seed: deriveSeed(baseSeed, "episode", i),
  }));
}

export async function runEpisodes(options: RunOptions): Promise<RunResult> {
  const specs =
    typeof options.episodes === "number" ? episodeSpecs(options.episodes, options.baseSeed) : options.episodes;
  const ids = new Set<string>();
  for (const s of specs) {
    if (ids.has(s.id))
      throw new RolloutConfigError(`runEpisodes: episode id "${s.id}" appears twice; ids must be unique`);
    ids.add(s.id);
  }
  const concurrency = options.concurrency ?? 8;
  if (!(Number.isInteger(concurrency) && concurrency >= 1)) {
    throw new RolloutConfigError(`runEpisodes: concurrency must be an integer >= 1, got ${concurrency}`);
  }
  resolveLimits(options.limits); // validate before starting anything
  const todo = specs.filter((s) => !options.sink?.has(s.id));
  const skipped = specs.length - todo.length;
  const keep = options.keep ?? true;
  const stream = options.progress === true ? undefined : options.progress || null;
  const bar =
    options.progress === undefined || options.progress === false
      ? null
      : new ProgressBar({ total: todo.length, label: options.label ?? "episodes", stream });
  const kept: Trajectory[] = [];
  const all: Pick<Trajectory, "outcome" | "stats">[] = [];
  const t0 = performance.now();
  let next = 0;
  let failure: unknown = null;

  const worker = async () => {
    const env = options.makeEnv();
    while (failure === null && next < todo.length && !options.signal?.aborted) {
      const spec = todo[next++];
      const traj = await runEpisode({
        env,
        policy: options.policy,
        seed: spec.seed,
        episodeId: spec.id,
        ...(spec.state !== undefined ? { startState: spec.state } : {}),
        params: options.params,
        limits: options.limits,
        recordStates: options.recordStates,
        metadata: { ...(options.metadata ?? {}), ...(spec.metadata ?? {}) },
        signal: options.signal,
      });
      try {
        await options.sink?.append(traj);
      } catch (err) {
        failure = err; // losing the output is not an episode error: stop the run
        return;
      }
      if (keep) kept.push(traj);
      all.push({ outcome: traj.outcome, stats: traj.stats });
      options.onEpisode?.(traj);
      bar?.tick(1, traj.outcome.status === "error" ? { errors: 1 } : undefined);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, Math.max(1, todo.length)) }, worker));
  bar?.finish();
  if (failure !== null) throw failure;
  const durationMs = performance.now() - t0;
  // Keep the caller's order, not completion order.
  const order = new Map(specs.map((s, i) => [s.id, i]));
  kept.sort((a, b) => order.get(a.episodeId)! - order.get(b.episodeId)!);
  return {
    trajectories: kept,
    skipped,
    summary: summarizeTrajectories(all),
    durationMs,
    episodesPerSecond: durationMs > 0 ? (all.length * 1000) / durationMs : 0,
  };
}

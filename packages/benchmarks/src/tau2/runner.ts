import type { GenerateParams, Policy, Trajectory } from "@kiln/rollout";
import { type RetailDb, loadRetailDb } from "./db.js";
import { type Tau2EpisodeResult, runTau2EpisodeRecord } from "./episode.js";
import { Tau2Error } from "./errors.js";
import { summarizePassHatK } from "./pass-k.js";
import { upstreamTrialSeeds } from "./python-random.js";
import type { Tau2RunResult } from "./report.js";
import { type Tau2SplitName, type Tau2Task, loadSplitTasks } from "./tasks.js";
import type { Tau2TaskVersion } from "./tool-specs.js";
import { INFRASTRUCTURE_ERROR } from "./trajectory.js";

// tasks × trials with upstream's trial seeds, bounded concurrency and progress callbacks.
// Defaults follow the OEL evaluation: the 40-task test split, 3 trials, greedy decoding,
// v1.0 tasks; the CLI defaults of tau2 for limits (200 steps, 10 errors).

export interface Tau2Progress {
  done: number;
  total: number;
  successes: number;
  last: Tau2EpisodeResult;
}

export interface Tau2RunOptions {
  /** The agent under test; a function gets each task (e.g. the oracle). */
  agent: Policy | ((task: Tau2Task) => Policy);
  /** The user simulator's policy (or per task). */
  user: Policy | ((task: Tau2Task) => Policy);
  judge?: Policy;
  version?: Tau2TaskVersion;
  split?: Tau2SplitName;
  /** Restrict to these task ids (within the split). */
  taskIds?: string[];
  /** Explicit tasks (overrides split/taskIds). */
  tasks?: Tau2Task[];
  numTrials?: number;
  /** Per-trial seeds; default upstream's (random.seed(300); randint(0, 10**6) per trial). */
  seeds?: number[];
  concurrency?: number;
  maxSteps?: number;
  maxErrors?: number;
  /** Reruns of an episode that ended in an infrastructure error (default 2); still-failing ones are dropped from the metrics. */
  maxRetries?: number;
  agentParams?: GenerateParams;
  userParams?: GenerateParams;
  dataDir?: string;
  db?: RetailDb;
  onProgress?: (p: Tau2Progress) => void;
  /**
   * Receives each episode as a @kiln/rollout trajectory record, e.g. a rollout `TrajectoryWriter`
   * (`await TrajectoryWriter.open("runs/x/trajectories.jsonl.gz")`). Episodes whose id the sink
   * already `has` are still run (tau2 metrics need every trial) but not appended again.
   */
  sink?: { has?(episodeId: string): boolean; append(trajectory: Trajectory): Promise<void> };
}

const policyId = (p: Policy | ((t: Tau2Task) => Policy)) => (typeof p === "function" ? p.name || "per-task" : p.id);

export async function runTau2(options: Tau2RunOptions): Promise<Tau2RunResult> {
  const startedAt = new Date().toISOString();
  const t0 = Date.now();
  const version = options.version ?? "v1.0";
  const split = options.split ?? "test";
  let tasks = options.tasks ?? loadSplitTasks(split, version, options.dataDir);
  if (options.taskIds && !options.tasks) {
    const want = new Set(options.taskIds);
    const inSplit = new Set(tasks.map((t) => t.id));
    const unknown = options.taskIds.filter((id) => !inSplit.has(id));
    if (unknown.length > 0) {
      throw new Tau2Error(
        `tau2 run: task ids ${unknown.join(", ")} are not in the ${split} split of ${version} (it has ${[...inSplit].slice(0, 8).join(", ")}${inSplit.size > 8 ? ", …" : ""})`,
      );
    }
    tasks = tasks.filter((t) => want.has(t.id));
  }
  const numTrials = options.numTrials ?? 3;
  const seeds = options.seeds ?? upstreamTrialSeeds(numTrials);
  const db = options.db ?? loadRetailDb(options.dataDir);
  const jobs = tasks.flatMap((task) => Array.from({ length: numTrials }, (_, trial) => ({ task, trial })));
  const results: Tau2EpisodeResult[] = new Array(jobs.length);
  let next = 0;
  let done = 0;
  let successes = 0;
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      const { task, trial } = jobs[i];
      const episode = () =>
        runTau2EpisodeRecord({
          task,
          version,
          agent: typeof options.agent === "function" ? options.agent(task) : options.agent,
          user: typeof options.user === "function" ? options.user(task) : options.user,
          judge: options.judge,
          maxSteps: options.maxSteps,
          maxErrors: options.maxErrors,
          agentParams: options.agentParams,
          userParams: options.userParams,
          seed: seeds[trial % seeds.length],
          trial,
          dataDir: options.dataDir,
          db,
        });
      let rec = await episode();
      for (
        let retry = 0;
        retry < (options.maxRetries ?? 2) && rec.result.terminationReason === INFRASTRUCTURE_ERROR;
        retry++
      ) {
        rec = await episode();
      }
      const { result: r, trajectory } = rec;
      if (options.sink && !options.sink.has?.(trajectory.episodeId)) await options.sink.append(trajectory);
      results[i] = r;
      done++;
      if (r.success) successes++;
      options.onProgress?.({ done, total: jobs.length, successes, last: r });
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency ?? 4, jobs.length)) }, worker));
  // Upstream drops simulations that still end in infrastructure errors before counting.
  const dropped = results.filter((r) => r.terminationReason === INFRASTRUCTURE_ERROR);
  const counted = results.filter((r) => r.terminationReason !== INFRASTRUCTURE_ERROR);
  if (counted.length === 0) {
    throw new Tau2Error(
      `tau2 run: all ${results.length} simulations ended in infrastructure errors (first: ${dropped[0]?.error ?? "unknown"})`,
    );
  }
  const metrics = summarizePassHatK(counted.map((r) => ({ taskId: r.taskId, reward: r.reward, success: r.success })));
  const nlSkipped = counted.filter((r) => r.rewardInfo.skippedComponents.includes("NL_ASSERTION")).length;
  if (nlSkipped > 0) {
    metrics.warnings.push(
      `NL_ASSERTION skipped on ${nlSkipped} simulation(s) (no judge): those rewards omit it, so they are not upstream's ${version} scores`,
    );
  }
  if (dropped.length > 0) {
    metrics.warnings.push(
      `${dropped.length} simulation(s) dropped after infrastructure errors: ${dropped.map((r) => `task ${r.taskId} trial ${r.trial} (${r.error})`).join("; ")}`,
    );
  }
  return {
    config: {
      benchmark: "tau2-retail",
      version,
      split: options.tasks ? "custom" : split,
      taskIds: tasks.map((t) => t.id),
      numTrials,
      seeds: seeds.slice(0, numTrials),
      agent: policyId(options.agent),
      user: policyId(options.user),
      judge: options.judge?.id ?? null,
      maxSteps: options.maxSteps ?? 200,
      maxErrors: options.maxErrors ?? 10,
      agentParams: { temperature: 0, ...options.agentParams },
      userParams: { temperature: 0, ...options.userParams },
    },
    metrics,
    episodes: results,
    startedAt,
    durationMs: Date.now() - t0,
  };
}

export interface ConsoleProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
}

export interface ConsoleProgressOptions {
  /** When not a TTY: at most one line per this many ms, unless another 10 % is done (default 10000). */
  logEveryMs?: number;
  /** Clock in ms (tests inject one). */
  now?: () => number;
}

/**
 * A one-line progress bar on stderr, redrawn in place on a TTY. Elsewhere (CI logs, files) a line
 * per episode would flood the log, so it prints at most one line every `logEveryMs` or each time
 * another 10 % is done, and always the final line.
 */
export function consoleProgress(
  stream: ConsoleProgressStream = process.stderr,
  options: ConsoleProgressOptions = {},
): (p: Tau2Progress) => void {
  const logEveryMs = options.logEveryMs ?? 10_000;
  const now = options.now ?? (() => Date.now());
  let lastLineAt = Number.NEGATIVE_INFINITY;
  let lastDecile = -1;
  return (p) => {
    const width = 30;
    const filled = Math.round((width * p.done) / p.total);
    const line = `tau2 [${"#".repeat(filled)}${".".repeat(width - filled)}] ${p.done}/${p.total} success ${p.successes} (last: task ${p.last.taskId} trial ${p.last.trial} ${p.last.terminationReason} r=${p.last.reward})`;
    const final = p.done >= p.total;
    if (stream.isTTY) {
      stream.write(`\r${line}${final ? "\n" : ""}`);
      return;
    }
    const t = now();
    const decile = p.total > 0 ? Math.floor((10 * p.done) / p.total) : 10;
    if (!final && t - lastLineAt < logEveryMs && decile <= lastDecile) return;
    lastLineAt = t;
    lastDecile = decile;
    stream.write(`${line}\n`);
  };
}

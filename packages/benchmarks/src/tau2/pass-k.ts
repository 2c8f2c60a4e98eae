import { meanSe } from "@kiln/rollout";
import { Tau2Error } from "./errors.js";

// pass^k (arXiv 2406.12045; tau2 src/tau2/metrics/agent_metrics.py): per task with n trials
// and c successes, C(c,k)/C(n,k); the reported value is the unweighted mean over tasks, for
// k = 1..max_k where max_k is the smallest trial count. Upstream reports no standard error;
// ours is the sample standard deviation (n−1) of the per-task values divided by √T.

/** Binomial coefficient C(n, k) as a float (exact for the small n used here). */
export function binomial(n: number, k: number): number {
  if (k < 0 || k > n) return 0;
  let r = 1;
  for (let i = 1; i <= Math.min(k, n - k); i++) r = (r * (n - i + 1)) / i;
  return Math.round(r);
}

/** C(c,k)/C(n,k) for one task. */
export function passHatKForTask(successes: number, trials: number, k: number): number {
  if (!Number.isInteger(successes) || !Number.isInteger(trials) || successes < 0 || successes > trials) {
    throw new Tau2Error(`pass^k: successes ${successes} must be an integer in [0, trials=${trials}]`);
  }
  if (k < 1 || k > trials) throw new Tau2Error(`pass^k: k=${k} must be in [1, trials=${trials}]`);
  return binomial(successes, k) / binomial(trials, k);
}

/** Mean and standard error (sample sd / √n; 0 when n < 2): rollout's `meanSe` under tau2's field names. */
export function meanAndStderr(values: readonly number[]): { mean: number; stderr: number } {
  const { mean, se } = meanSe(values);
  return { mean, stderr: se };
}

export interface TrialOutcome {
  taskId: string;
  reward: number;
  success: boolean;
}

export interface TaskRow {
  taskId: string;
  trials: number;
  successes: number;
  avgReward: number;
  /** pass^k for k = 1..maxK. */
  passHatK: number[];
}

export interface PassHatKSummary {
  numTasks: number;
  numSimulations: number;
  maxK: number;
  /** k = 1..maxK: mean over tasks and its standard error. */
  passHatK: { k: number; value: number; stderr: number }[];
  /** Plain mean over simulations (upstream avg_reward), with the per-task standard error. */
  avgReward: number;
  avgRewardStderr: number;
  perTask: TaskRow[];
  warnings: string[];
}

/** Aggregate trial outcomes (tasks in first-seen order). */
export function summarizePassHatK(outcomes: readonly TrialOutcome[]): PassHatKSummary {
  const byTask = new Map<string, TrialOutcome[]>();
  for (const o of outcomes) {
    const list = byTask.get(o.taskId) ?? [];
    list.push(o);
    byTask.set(o.taskId, list);
  }
  if (byTask.size === 0) throw new Tau2Error("pass^k: no trial outcomes to summarise");
  const counts = Array.from(byTask.values(), (l) => l.length);
  const maxK = Math.min(...counts);
  const warnings: string[] = [];
  if (Math.max(...counts) !== maxK)
    warnings.push(`tasks have between ${maxK} and ${Math.max(...counts)} trials; pass^k reported up to k=${maxK}`);
  const perTask: TaskRow[] = Array.from(byTask, ([taskId, list]) => {
    const successes = list.filter((o) => o.success).length;
    return {
      taskId,
      trials: list.length,
      successes,
      avgReward: list.reduce((a, o) => a + o.reward, 0) / list.length,
      passHatK: Array.from({ length: maxK }, (_, i) => passHatKForTask(successes, list.length, i + 1)),
    };
  });
  const passHatK = Array.from({ length: maxK }, (_, i) => {
    const { mean, stderr } = meanAndStderr(perTask.map((r) => r.passHatK[i]));
    return { k: i + 1, value: mean, stderr };
  });
  return {
    numTasks: perTask.length,
    numSimulations: outcomes.length,
    maxK,
    passHatK,
    avgReward: outcomes.reduce((a, o) => a + o.reward, 0) / outcomes.length,
    avgRewardStderr: meanAndStderr(perTask.map((r) => r.avgReward)).stderr,
    perTask,
    warnings,
  };
}

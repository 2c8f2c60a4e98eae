// The OEL table: base vs consolidated (deploy on training tasks without the memory, consolidate
// the memory-holding teacher into the weights, merge) with pass^1…pass^k ± SE on held-out tasks,
// and the memory-in-prompt upper bound: the base model with the memory in its system prompt. The
// memory is one lesson for every game (GUESS_NUMBER_LESSON), not a task's answer. Each held-out task
// is a fixed game (its saved state); its k trials differ only in the sampling seed.
import { join } from "node:path";
import type { tau2 } from "@kiln/benchmarks";
import { GuessNumberEnv, type Policy, type Trajectory } from "@kiln/rollout";
import { GUESS_NUMBER_LESSON } from "../agent-model/notes.js";
import { type OelTask, passHatKEval, runOel } from "../recipes/oel.js";
import { scaffoldedTeacher } from "../recipes/opd-samples.js";
import type { ReproIo } from "./arp-repro.js";
import type { ReproConfig } from "./config.js";
import type { ModelSource } from "./model-source.js";
import { type ReproEpisodeError, type ReproResult, secondsSince } from "./output.js";
import { type ReproTable, fmt, fmtDelta, scoreBar, summarizeScores } from "./table.js";

export interface OelRow {
  label: string;
  summary: tau2.PassHatKSummary;
  /** Mean reward per task over its trials (the paired Δ's instances). */
  perTask: Record<string, number>;
  seconds: number;
  /** Episodes that ended in an error (scored as failures). */
  errors: ReproEpisodeError[];
}

function guessTask(id: string, seed: number, memory: string): OelTask {
  const probe = new GuessNumberEnv();
  probe.reset({ seed });
  return { id, seed, memory, state: probe.getState() };
}

export function oelTasks(config: ReproConfig): { train: OelTask[]; heldout: OelTask[] } {
  return {
    train: Array.from({ length: config.oel.tasks }, (_, i) =>
      guessTask(`task-${i}`, config.oel.seed + i, GUESS_NUMBER_LESSON),
    ),
    heldout: Array.from({ length: config.heldout.oelTasks }, (_, i) =>
      guessTask(`heldout-${i}`, config.heldout.oelBaseSeed + i, GUESS_NUMBER_LESSON),
    ),
  };
}

function perTaskMeans(trajectories: readonly Trajectory[]): Record<string, number> {
  const sums: Record<string, [number, number]> = {};
  for (const t of trajectories) {
    const k = String(t.metadata.task);
    const s = (sums[k] ??= [0, 0]);
    s[0] += t.outcome.score;
    s[1] += 1;
  }
  return Object.fromEntries(Object.entries(sums).map(([k, [s, n]]) => [k, s / n]));
}

export function oelTable(title: string, rows: readonly OelRow[], notes: string[] = []): ReproTable {
  const base = rows[0];
  const maxK = Math.max(...rows.map((r) => r.summary.maxK));
  return {
    title,
    header: [
      "model",
      "tasks",
      "trials",
      "reward ± SE",
      ...Array.from({ length: maxK }, (_, i) => `pass^${i + 1} ± SE`),
      "Δ reward vs base ± SE",
    ],
    rows: rows.map((r) => [
      r.label,
      String(r.summary.numTasks),
      String(r.summary.numSimulations),
      fmt({ mean: r.summary.avgReward, se: r.summary.avgRewardStderr }),
      ...Array.from({ length: maxK }, (_, i) => {
        const p = r.summary.passHatK.find((x) => x.k === i + 1);
        return p ? fmt({ mean: p.value, se: p.stderr }) : "—";
      }),
      r === base ? "—" : fmtDelta(summarizeScores(r.perTask, base.perTask).delta),
    ]),
    notes,
    chart: {
      xLabel: "reward per trial, mean ± SE",
      bars: rows.map((r) =>
        scoreBar(
          r.label,
          { mean: r.summary.avgReward, se: r.summary.avgRewardStderr },
          r.summary.numSimulations,
          r === base ? undefined : summarizeScores(r.perTask, base.perTask).delta,
        ),
      ),
    },
  };
}

/** `kiln repro oel`: base, consolidated and the memory-in-prompt bound on held-out guess-number tasks. */
export async function reproOel(source: ModelSource, config: ReproConfig, io: ReproIo = {}): Promise<ReproResult> {
  const start = performance.now();
  const dir = join(io.out ?? "runs", "repro-oel");
  const c = structuredClone(config.oel);
  const { train, heldout } = oelTasks(config);
  const { model, codec } = await source.load();
  const makeEnv = () => new GuessNumberEnv();
  const rows: OelRow[] = [];
  const evalRow = async (label: string, policy: Policy): Promise<OelRow> => {
    const t0 = performance.now();
    const r = await passHatKEval({
      makeEnv,
      policy,
      tasks: heldout,
      trials: c.eval.trials,
      params: { maxTokens: c.rollout.maxTokens, temperature: c.eval.temperature },
      limits: { maxTurns: c.rollout.maxTurns },
      // Same game (the task's state), a different sampling seed per trial.
      trialSeed: (task, trial) => task.seed * 1000 + trial,
    });
    const errors = r.trajectories
      .filter((t) => t.outcome.status === "error")
      .map((t) => ({
        phase: label,
        id: t.episodeId,
        reason: t.outcome.error
          ? `${t.outcome.error.kind} error at turn ${t.outcome.error.turn}: ${t.outcome.error.message}`
          : "error",
      }));
    const row = { label, summary: r.summary, perTask: perTaskMeans(r.trajectories), seconds: secondsSince(t0), errors };
    rows.push(row);
    return row;
  };
  let mark = performance.now();
  const seconds: Record<string, number> = {};
  let memoryRow: OelRow | undefined;
  const result = await runOel({
    out: dir,
    name: "oel",
    mode: "overwrite",
    model,
    codec,
    makeEnv,
    tasks: train,
    config: c,
    baseModel: { source: source.label, dir: source.dir },
    progress: io.progress,
    log: io.log,
    evaluate: async (policy, phase) => {
      const row = await evalRow(phase, policy);
      if (phase === "base")
        memoryRow = await evalRow(
          "base + memory in prompt (upper bound)",
          scaffoldedTeacher(policy, GUESS_NUMBER_LESSON),
        );
      else seconds["deploy + consolidate + merge"] = secondsSince(mark) - row.seconds;
      mark = performance.now();
      return {
        avg_reward: row.summary.avgReward,
        ...Object.fromEntries(row.summary.passHatK.map((p) => [`pass^${p.k}`, p.value])),
      };
    },
  });
  // Base, consolidated, then the bound (evaluated beside the base, before any training).
  const ordered = [rows[0], rows[2], memoryRow as OelRow];
  for (const r of ordered) seconds[r.label] = r.seconds;
  return {
    recipe: "oel",
    dir,
    tables: [
      oelTable(`OEL on guess-number (seed ${config.seed}, base: ${source.label})`, ordered, [
        `Memory: "${GUESS_NUMBER_LESSON}" Deployed on ${train.length} training tasks; evaluated on ${heldout.length} held-out tasks × ${c.eval.trials} trials at temperature ${c.eval.temperature} (same game per task, a different sampling seed per trial).`,
        `pass^k = mean over tasks of C(successes, k) / C(trials, k) (tau2's estimator); Δ = paired per-task mean reward. Consolidation loss ${result.lossFirst.toFixed(4)} → ${result.lossLast.toFixed(4)} over ${result.samples} turns.`,
      ]),
    ],
    seconds,
    totalSeconds: secondsSince(start),
    details: {
      runDir: result.runDir,
      samples: result.samples,
      rows: ordered.map((r) => ({ label: r.label, perTask: r.perTask, summary: r.summary })),
    },
    errors: ordered.flatMap((r) => r.errors),
  };
}

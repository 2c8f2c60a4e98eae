// The OEL table on tau2 retail, as the OEL seed evaluates it: deploy and consolidate on the *train*
// split's tasks (the student plays without memory; each task's memory is `experienceMemory` of its
// deploy episode), then evaluate on the *test* split — disjoint task ids, checked here — with
// `trials` greedy trials per task, the memory never in a test prompt. Rows: base, consolidated, and
// the memory-in-prompt upper bound (the base with each test task's own experience memory, built
// from its first base trial, in its system prompt: it sees test-task experience, so it is a bound,
// not a result). pass^1…pass^k ± SE (tau2's estimator, per-task SE) and the paired Δ per task.
// The customer is tau2's scripted user (its reason for calling, then ###STOP###); no NL judge runs,
// so the reward is the DB match (docs/ARCHITECTURE.md §Recipes).
// Over several seeds the base and bound rows are seed-free (the same weights, test tasks, trial seeds and
// greedy decoding): the first seed plays them and later seeds reuse them (OelEvaluationCache), saying so.
import { join } from "node:path";
import { tau2 } from "@kiln/benchmarks";
import { type Policy, type Trajectory, pairedDelta } from "@kiln/rollout";
import { EXPERIENCE_MEMORY_HEADER, Tau2TasksEnvironment, experienceMemory } from "../recipes/oel-tau2.js";
import { type OelTask, passHatKEval, runOel } from "../recipes/oel.js";
import { scaffoldedTeacher } from "../recipes/opd-samples.js";
import { isSuccessful } from "../recipes/sft-set.js";
import type { ChatCodec } from "../trainer/chat-batches.js";
import type { StepRecord } from "../trainer/trainer.js";
import type { ReproIo } from "./arp-repro.js";
import { weightsDigest } from "./arp-clem.js";
import type { ReproConfig } from "./config.js";
import { ReproError } from "./errors.js";
import type { ModelSource } from "./model-source.js";
import { type ReproEpisodeError, type ReproResult, secondsSince } from "./output.js";
import { type ReproTable, fmt, fmtDelta, scoreBar } from "./table.js";

export interface OelRow {
  label: string;
  summary: tau2.PassHatKSummary;
  /** Turns whose prompt was recorded, and how many of them held an experience memory. */
  promptTurns: number;
  memoryTurns: number;
  seconds: number;
  /** Episodes that ended in an error (scored as failures). */
  errors: ReproEpisodeError[];
  /** The seed whose identical evaluation this row is (see OelEvaluationCache); absent when played here. */
  reusedFromSeed?: number;
}

/**
 * Rows of `kiln repro oel` that depend on no seed — the base's and the memory-in-prompt bound's: the same
 * weights, test tasks, trial seeds and greedy decoding play the same episodes — kept by the first seed that
 * played them so that a later seed of the same run takes them instead of playing them again. Keyed by
 * everything the episodes depend on (the weights' digest included); sampled evaluations are never reused.
 */
export class OelEvaluationCache {
  private readonly rows = new Map<string, { seed: number; row: OelRow; trajectories: Trajectory[] }>();
  get(key: string): { seed: number; row: OelRow; trajectories: Trajectory[] } | undefined {
    return this.rows.get(key);
  }
  set(key: string, seed: number, row: OelRow, trajectories: Trajectory[]): void {
    if (!this.rows.has(key)) this.rows.set(key, { seed, row, trajectories });
  }
}

/**
 * The tasks kiln ships for each split: the first `oel.tasks` of tau2's train split to deploy on,
 * the first `heldout.oelTasks` of its test split to evaluate on. Refuses overlapping ids.
 */
export function oelSplits(config: ReproConfig): { train: tau2.Tau2Task[]; test: tau2.Tau2Task[] } {
  const allTrain = tau2.loadSplitTasks("train");
  const allTest = tau2.loadSplitTasks("test");
  const want = (n: number, have: number, what: string) => {
    if (!Number.isInteger(n) || n < 1 || n > have)
      throw new ReproError(`${what} must be an integer in [1, ${have}] (tau2 retail's split), got ${n}`);
  };
  want(config.oel.tasks, allTrain.length, "oel.tasks");
  want(config.heldout.oelTasks, allTest.length, "heldout.oelTasks");
  const train = allTrain.slice(0, config.oel.tasks);
  const test = allTest.slice(0, config.heldout.oelTasks);
  const trainIds = new Set(train.map((t) => t.id));
  const shared = test.filter((t) => trainIds.has(t.id)).map((t) => t.id);
  if (shared.length > 0) throw new ReproError(`OEL: test task ids also in the train split: ${shared.join(", ")}`);
  return { train, test };
}

/** Turns with a recorded prompt, and those whose prompt holds an experience memory. */
function memoryInPrompts(codec: ChatCodec, trajectories: readonly Trajectory[]): { prompts: number; memory: number } {
  let prompts = 0;
  let memory = 0;
  for (const t of trajectories)
    for (const turn of t.turns) {
      if (!turn.promptTokenIds) continue;
      prompts += 1;
      if (codec.tokenizer.decode([...turn.promptTokenIds]).includes(EXPERIENCE_MEMORY_HEADER)) memory += 1;
    }
  return { prompts, memory };
}

function perTaskPassK(s: tau2.PassHatKSummary, k: number): Record<string, number> {
  return Object.fromEntries(s.perTask.map((r) => [r.taskId, r.passHatK[k - 1]]));
}

export function oelTable(title: string, rows: readonly OelRow[], notes: string[] = []): ReproTable {
  const base = rows[0];
  const maxK = Math.min(...rows.map((r) => r.summary.maxK));
  const delta = (r: OelRow, k: number) => pairedDelta(perTaskPassK(r.summary, k), perTaskPassK(base.summary, k));
  const ks = Array.from({ length: maxK }, (_, i) => i + 1);
  return {
    title,
    header: [
      "model",
      "tasks",
      "trials",
      "reward ± SE",
      ...ks.map((k) => `pass^${k} ± SE`),
      ...ks.map((k) => `Δ pass^${k} vs base ± SE`),
    ],
    rows: rows.map((r) => [
      r.label,
      String(r.summary.numTasks),
      String(r.summary.numSimulations),
      fmt({ mean: r.summary.avgReward, se: r.summary.avgRewardStderr }),
      ...ks.map((k) => {
        const p = r.summary.passHatK.find((x) => x.k === k);
        return p ? fmt({ mean: p.value, se: p.stderr }) : "—";
      }),
      ...ks.map((k) => (r === base ? "—" : fmtDelta(delta(r, k)))),
    ]),
    notes,
    chart: {
      xLabel: "pass^1 per task, mean ± SE",
      bars: rows.map((r) =>
        scoreBar(
          r.label,
          { mean: r.summary.passHatK[0].value, se: r.summary.passHatK[0].stderr },
          r.summary.numTasks,
          r === base ? undefined : delta(r, 1),
        ),
      ),
    },
  };
}

/** The consolidation stage as the seed reports it: pre-clip gradient norm against the clip, and the entropy. */
export function consolidationTable(history: readonly StepRecord[], clip: number): ReproTable {
  const norms = history.map((h) => h.grad_norm).filter(Number.isFinite);
  const sorted = [...norms].sort((a, b) => a - b);
  const median = sorted.length ? sorted[Math.floor((sorted.length - 1) / 2)] : Number.NaN;
  const clipped = clip > 0 ? norms.filter((g) => g > clip).length : 0;
  const num = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : Number.NaN);
  const first = history[0];
  const last = history[history.length - 1];
  const f = (v: number) => (Number.isFinite(v) ? v.toFixed(4) : "—");
  return {
    title: "OEL consolidation: gradient norm vs clip, divergence and entropy",
    header: ["quantity", "value"],
    rows: [
      ["optimizer steps", String(history.length)],
      ["peak lr", history.length ? Math.max(...history.map((h) => h.lr)).toExponential(1) : "—"],
      ["grad-norm clip (maxGradNorm)", clip > 0 ? String(clip) : "none"],
      ["pre-clip grad norm: first / median / max", `${f(norms[0])} / ${f(median)} / ${f(sorted[sorted.length - 1])}`],
      ["steps clipped (norm > clip)", `${clipped}/${norms.length}`],
      ["divergence (loss): first → last", `${f(num(first?.loss))} → ${f(num(last?.loss))}`],
      ["student entropy, nats/token: first → final", `${f(num(first?.entropy))} → ${f(num(last?.entropy))}`],
    ],
  };
}

/** `kiln repro oel`: base, consolidated and the memory-in-prompt bound on tau2 retail's test split. */
export async function reproOel(
  source: ModelSource,
  config: ReproConfig,
  io: ReproIo & { evaluations?: OelEvaluationCache } = {},
): Promise<ReproResult> {
  const start = performance.now();
  const dir = io.dir ?? join(io.out ?? "runs", "repro-oel");
  const c = structuredClone(config.oel);
  const { train, test } = oelSplits(config);
  const { model, codec } = await source.load();
  // What a seed-free row's episodes depend on; the digest is taken before runOel attaches any adapter.
  const digest = c.eval.temperature === 0 ? weightsDigest(model) : undefined;
  const cacheKey = (row: string) =>
    digest === undefined || !io.evaluations
      ? undefined
      : JSON.stringify({
          row,
          digest,
          test: test.map((t) => t.id),
          trials: c.eval.trials,
          maxTokens: c.rollout.maxTokens,
          maxTurns: c.rollout.maxTurns,
          trialSeed: config.heldout.oelBaseSeed,
        });
  /** A seed-free row from an earlier seed of this run, or played here and kept for the next. */
  const seedFreeRow = async (
    key: string | undefined,
    play: () => Promise<{ row: OelRow; trajectories: Trajectory[] }>,
  ): Promise<{ row: OelRow; trajectories: Trajectory[] }> => {
    const hit = key === undefined ? undefined : io.evaluations?.get(key);
    if (hit) return { row: { ...hit.row, seconds: 0, reusedFromSeed: hit.seed }, trajectories: hit.trajectories };
    const played = await play();
    if (key !== undefined) io.evaluations?.set(key, config.seed, played.row, played.trajectories);
    return played;
  };
  const user = (task: tau2.Tau2Task) => tau2.scriptedUser(task);
  // Each environment knows only its split's tasks: a test id cannot reach deploy, nor a train id the evaluation.
  const makeTrainEnv = () => new Tau2TasksEnvironment(train, user);
  const makeTestEnv = () => new Tau2TasksEnvironment(test, user);
  const testTasks: OelTask[] = test.map((t) => ({ id: t.id, seed: 0, memory: "", state: { taskId: t.id } }));
  /** One policy for every test task (base, consolidated: one batch of tasks × trials), or one per task (the bound). */
  const evalRow = async (label: string, policy: Policy | ((task: OelTask) => Policy)) => {
    const t0 = performance.now();
    const trajectories: Trajectory[] = [];
    const play = async (tasks: OelTask[], taskPolicy: Policy) => {
      const r = await passHatKEval({
        makeEnv: makeTestEnv,
        policy: taskPolicy,
        tasks,
        trials: c.eval.trials,
        params: { maxTokens: c.rollout.maxTokens, temperature: c.eval.temperature },
        limits: { maxTurns: c.rollout.maxTurns },
        // tau2 draws one seed per trial, the same for every task.
        trialSeed: (_task, trial) => config.heldout.oelBaseSeed + trial,
      });
      trajectories.push(...r.trajectories);
    };
    if (typeof policy === "function") for (const task of testTasks) await play([task], policy(task));
    else await play(testTasks, policy);
    const summary = tau2.summarizePassHatK(
      trajectories.map((t) => ({ taskId: String(t.metadata.task), reward: t.outcome.score, success: isSuccessful(t) })),
    );
    const seen = memoryInPrompts(codec, trajectories);
    const errors = trajectories
      .filter((t) => t.outcome.status === "error")
      .map((t) => ({
        phase: label,
        id: t.episodeId,
        reason: t.outcome.error
          ? `${t.outcome.error.kind} error at turn ${t.outcome.error.turn}: ${t.outcome.error.message}`
          : "error",
      }));
    const row: OelRow = {
      label,
      summary,
      promptTurns: seen.prompts,
      memoryTurns: seen.memory,
      seconds: secondsSince(t0),
      errors,
    };
    return { row, trajectories };
  };
  const rows: Record<string, OelRow> = {};
  const testMemories: Record<string, string> = {};
  let mark = performance.now();
  const seconds: Record<string, number> = {};
  const result = await runOel({
    out: dir,
    name: "oel",
    mode: "overwrite",
    model,
    codec,
    makeEnv: makeTrainEnv,
    tasks: train.map((t, i) => ({ id: t.id, seed: c.seed + i, memory: "", state: { taskId: t.id } })),
    memoryFrom: (_task, deployed) => experienceMemory(deployed),
    config: c,
    baseModel: { source: source.label, dir: source.dir },
    progress: io.progress,
    log: io.log,
    evaluate: async (policy, phase) => {
      const { row, trajectories } =
        phase === "base"
          ? await seedFreeRow(cacheKey("base"), () => evalRow(phase, policy))
          : await evalRow(phase, policy);
      // The memory never reaches a base or consolidated test prompt.
      if (row.memoryTurns > 0)
        throw new ReproError(`OEL: ${row.memoryTurns} ${phase} test prompts held an experience memory`);
      rows[phase] = row;
      if (phase === "base") {
        for (const t of trajectories)
          if (t.metadata.trial === 0) testMemories[String(t.metadata.task)] = experienceMemory(t);
        rows.bound = (
          await seedFreeRow(cacheKey("bound"), () =>
            evalRow("base + its test-task memory in prompt (upper bound)", (task) =>
              scaffoldedTeacher(policy, testMemories[task.id]),
            ),
          )
        ).row;
      } else seconds["deploy + consolidate + merge"] = secondsSince(mark) - row.seconds;
      mark = performance.now();
      return Object.fromEntries(row.summary.passHatK.map((p) => [`pass^${p.k}`, p.value]));
    },
  });
  const ordered = [rows.base, rows.consolidated, rows.bound];
  for (const r of ordered)
    seconds[r.reusedFromSeed === undefined ? r.label : `${r.label} (seed ${r.reusedFromSeed}'s evaluation)`] =
      r.seconds;
  const reused = ordered.filter((r) => r.reusedFromSeed !== undefined);
  const ids = (ts: readonly tau2.Tau2Task[]) => ts.map((t) => t.id).join(", ");
  return {
    recipe: "oel",
    dir,
    tables: [
      oelTable(
        `OEL on tau2 retail (seed ${config.seed}, base: ${source.label}); deploy + consolidate on train tasks [${ids(train)}]; evaluate on test tasks [${ids(test)}]`,
        ordered,
        [
          `Deployed on ${train.length} train-split tasks without memory; each memory is experienceMemory of the task's deploy episode (its outcome, failed calls with their errors, the calls that worked; never gold actions). Evaluated on ${test.length} test-split tasks × ${c.eval.trials} trials at temperature ${c.eval.temperature}, trial seeds ${config.heldout.oelBaseSeed}+trial; no test prompt of the base or consolidated row held a memory (${rows.base.promptTurns + rows.consolidated.promptTurns} prompts checked).`,
          "Customer: tau2's scripted user (its reason for calling, then ###STOP###), so greedy trials of a task replay one conversation and pass^k = pass^1 unless decoding differs; no NL judge, so reward = the DB match.",
          `Seed card: tau2 retail's test split, ${c.eval.trials} trials, greedy, memory never in a test prompt, consolidation by ${c.divergence} over the full vocabulary, lr ${c.train.lr} (the authors' LoRA range tops out at 5e-5), merge then evaluate. kiln's: the LoRA in f32 (the seed: bf16) at r ${c.lora.r} / α ${c.lora.alpha}, ${train.length} train tasks, rollouts of ≤ ${c.rollout.maxTurns} replies × ${c.rollout.maxTokens} tokens, the scripted customer, no NL judge, the model.`,
          "No seed column: the seed card (004) gives the protocol above but no per-row pass^k that kiln carries, so unlike ARP's clemscore and OPD's wall there is no published row to print beside kiln's.",
          `pass^k = mean over tasks of C(successes, k) / C(trials, k) (tau2's estimator; SE = per-task SD / √tasks); Δ = paired per-task pass^k. The bound row holds each test task's own memory (from its first base trial): it sees the test task, so it bounds, it does not score, consolidation. Consolidation: ${result.samples} turns, loss ${result.lossFirst.toFixed(4)} → ${result.lossLast.toFixed(4)}.`,
          ...(reused.length > 0
            ? [
                `Seed-free rows reused: ${reused.map((r) => `${r.label} is seed ${r.reusedFromSeed}'s evaluation`).join("; ")} — the same weights, test tasks, trial seeds and greedy decoding play the same episodes, so this run did not play them again.`,
              ]
            : []),
        ],
      ),
      consolidationTable(result.history, c.train.maxGradNorm),
    ],
    seconds,
    totalSeconds: secondsSince(start),
    details: {
      runDir: result.runDir,
      samples: result.samples,
      trainTaskIds: train.map((t) => t.id),
      testTaskIds: test.map((t) => t.id),
      testMemories,
      rows: ordered.map((r) => ({
        label: r.label,
        promptTurns: r.promptTurns,
        memoryTurns: r.memoryTurns,
        summary: r.summary,
        ...(r.reusedFromSeed === undefined ? {} : { reusedFromSeed: r.reusedFromSeed }),
      })),
    },
    errors: ordered.flatMap((r) => r.errors),
    seedSummary: Object.fromEntries(
      ordered.map((r) => [
        r.label,
        Object.fromEntries([
          ["reward", r.summary.avgReward],
          ...r.summary.passHatK.map((p): [string, number] => [`pass^${p.k}`, p.value]),
        ]),
      ]),
    ),
  };
}

// OEL (docs/ARCHITECTURE.md §Recipes): deploy → consolidate → merge → evaluate.
// Deploy: the student plays each task without its memory; turns are recorded with their tokens.
// Consolidate: the same turns are re-scored by the same model (adapter off = the model being
// consolidated) with the task's memory in its system prompt; those logits are the teacher's,
// and the student (adapter on, no memory) is fitted to them with a token-level full-vocabulary
// divergence (@kiln/losses distillationLoss; TRL SDFT/GKD full_logits, docs/NUMERICS.md §3.3).
// Merge the adapter in fp32, then evaluate pass^k with standard errors (tau2's estimator).
// With a rollout engine (e.g. llamaCppRollouts) the deploy episodes are played there — the base as
// deployed — while the memory-in-the-prompt teacher, training and evaluations stay in kiln.
import { tau2 } from "@kiln/benchmarks";
import type { DivergenceKind } from "@kiln/losses";
import { attachLora, mergeAdapter } from "@kiln/lora";
import { LocalPolicy, type Model } from "@kiln/models";
import {
  type EpisodeLimits,
  type Environment,
  type GenerateParams,
  type Message,
  type Policy,
  type ToolSchema,
  type Trajectory,
  messagesBeforeTurn,
  runEpisodes,
} from "@kiln/rollout";
import { baseModelId, writeAdapterCard, writeAdapterDir, writeMergedModel } from "../artifacts.js";
import type { RolloutEngine } from "../llama-cpp-rollouts.js";
import { writeReport } from "../report.js";
import { RunDir, type RunMode } from "../run-dir.js";
import { type ConsolidationSample, consolidationObjective } from "../trainer/objectives/index.js";
import { type StepRecord, train } from "../trainer/trainer.js";
import type { ChatCodec } from "../trainer/chat-batches.js";
import { RecipeError } from "../errors.js";
import { type OelConfig, oelTinyConfig, stageForward } from "./presets.js";
import {
  type PhaseEval,
  ROLLOUT_CONCURRENCY,
  type RecipeIo,
  phaseFromScores,
  phaseTable,
  writeRollouts,
} from "./recipe-run.js";
import { isSuccessful } from "./sft-set.js";
import { withSystemNote } from "./system-note.js";

export interface OelTask {
  id: string;
  seed: number;
  /** What the agent should remember for this task (notes, rules, a past solution). */
  memory: string;
  /** Optional saved environment state to start from. */
  state?: unknown;
}

function promptIds(codec: ChatCodec, messages: Message[], tools?: ToolSchema[]): number[] {
  return codec.tokenizer.encode(codec.template.render(messages, { tools, addGenerationPrompt: true }));
}

/** Consolidation samples: each deployed turn, with and without the task's memory. */
export function consolidationSamples(
  codec: ChatCodec,
  trajectories: readonly Trajectory[],
  memoryOf: (t: Trajectory) => string,
): ConsolidationSample[] {
  const out: ConsolidationSample[] = [];
  for (const traj of trajectories) {
    const memory = memoryOf(traj);
    for (const turn of traj.turns) {
      const ids = turn.completionTokenIds;
      if (!ids || ids.length === 0) continue;
      const messages = messagesBeforeTurn(traj, turn.index);
      out.push({
        episodeId: traj.episodeId,
        turn: turn.index,
        studentPromptIds: turn.promptTokenIds ? [...turn.promptTokenIds] : promptIds(codec, messages, traj.tools),
        teacherPromptIds: promptIds(codec, withSystemNote(messages, memory), traj.tools),
        completionIds: [...ids],
      });
    }
  }
  return out;
}

export interface OelOptions extends RecipeIo {
  model: Model;
  codec: ChatCodec;
  makeEnv: () => Environment;
  tasks: readonly OelTask[];
  config?: OelConfig;
  /**
   * Build each task's memory from its deploy trajectory (e.g. `experienceMemory`) instead of the
   * task's fixed `memory`.
   */
  memoryFrom?: (task: OelTask, deployed: Trajectory) => string;
  /** Override the evaluation (e.g. a real tau2 run against a served model). */
  evaluate?: (policy: Policy, phase: "base" | "consolidated") => Promise<Record<string, number>>;
  baseModel?: { source: string; dir?: string };
  mode?: RunMode;
  /**
   * Where the deploy episodes are played (e.g. llamaCppRollouts: the base in llama.cpp, no adapters);
   * default kiln's student. Consolidation scores those turns' tokens in kiln; evaluations stay in kiln.
   */
  rolloutEngine?: RolloutEngine;
}

/**
 * pass^k with standard errors over `trials` trials per task (tau2's estimator and SE). Every trial
 * of a task plays the same instance (the task's seed and state), so pass^k measures consistency
 * on one game, not luck over different games.
 */
export async function passHatKEval(options: {
  makeEnv: () => Environment;
  policy: Policy;
  tasks: readonly OelTask[];
  trials: number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
  /**
   * The episode seed of each trial (default: the task's seed for every trial). With a task `state`
   * the game stays the same while a different seed draws different samples.
   */
  trialSeed?: (task: OelTask, trial: number) => number;
  /** Episodes in flight (default ROLLOUT_CONCURRENCY); the trajectories are the same at any value. */
  concurrency?: number;
}): Promise<{ summary: tau2.PassHatKSummary; trajectories: Trajectory[] }> {
  const specs = options.tasks.flatMap((task) =>
    Array.from({ length: options.trials }, (_, i) => ({
      id: `${task.id}#${i}`,
      seed: options.trialSeed ? options.trialSeed(task, i) : task.seed,
      state: task.state,
      metadata: { task: task.id, trial: i },
    })),
  );
  const r = await runEpisodes({
    makeEnv: options.makeEnv,
    policy: options.policy,
    episodes: specs,
    params: options.params,
    limits: options.limits,
    concurrency: options.concurrency ?? ROLLOUT_CONCURRENCY,
  });
  const outcomes = r.trajectories.map((t) => ({
    taskId: String(t.metadata.task ?? t.episodeId.split("#")[0]),
    reward: t.outcome.score,
    success: isSuccessful(t),
  }));
  return { summary: tau2.summarizePassHatK(outcomes), trajectories: r.trajectories };
}

function flatPassK(s: tau2.PassHatKSummary): Record<string, number> {
  const out: Record<string, number> = {
    tasks: s.numTasks,
    simulations: s.numSimulations,
    avg_reward: s.avgReward,
    avg_reward_se: s.avgRewardStderr,
  };
  for (const p of s.passHatK) {
    out[`pass^${p.k}`] = p.value;
    out[`pass^${p.k}_se`] = p.stderr;
  }
  return out;
}

export interface OelResult {
  runDir: string;
  samples: number;
  lossFirst: number;
  lossLast: number;
  /** The consolidation stage's steps (loss, lr, pre-clip grad_norm, divergence, entropy). */
  history: StepRecord[];
  before: Record<string, number>;
  after: Record<string, number>;
  /** Per-task mean reward, paired Δ against the base. */
  phases: PhaseEval[];
  /** Episodes that errored in deploy or evaluation, with the reason. */
  errors: { id: string; reason: string }[];
  modelDir: string;
}

export async function runOel(options: OelOptions): Promise<OelResult> {
  const log = options.log ?? ((line: string) => console.error(line));
  const { model, codec } = options;
  if (options.tasks.length === 0) throw new RecipeError("runOel: no tasks to deploy on");
  const config = options.config ?? oelTinyConfig();
  const seed = config.seed;
  const params: GenerateParams = { temperature: config.rollout.temperature, maxTokens: config.rollout.maxTokens };
  const limits: EpisodeLimits = { maxTurns: config.rollout.maxTurns };
  const run = await RunDir.create(
    options.out ?? "runs",
    options.name ?? "oel",
    { ...config, taskIds: options.tasks.map((t) => t.id) },
    { seeds: { recipe: seed, lora: seed, sampling: seed }, mode: options.mode },
  );
  if (!run.resumed) await run.recordBaseModel(options.baseModel?.source ?? "in-memory model", options.baseModel?.dir);
  log(`[kiln oel] run directory: ${run.path}${run.resumed ? " (resumed)" : ""}`);
  const student = new LocalPolicy({
    id: "oel-student",
    model,
    tokenizer: codec.tokenizer,
    chatTemplate: codec.template,
    defaults: params,
  });
  const errors: { id: string; reason: string }[] = [];
  const noteErrors = (phase: string, trajectories: readonly Trajectory[]) => {
    for (const t of trajectories)
      if (t.outcome.status === "error") {
        const reason = `${t.outcome.error?.kind ?? "?"} error: ${t.outcome.error?.message ?? "unknown"}`;
        errors.push({ id: `${phase}/${t.episodeId}`, reason });
        log(`[kiln oel] ${phase}: episode ${t.episodeId} errored: ${reason}`);
      }
  };
  const phases: PhaseEval[] = [];
  const evaluate = async (phase: "base" | "consolidated"): Promise<Record<string, number>> => {
    const saved = await run.stage(`eval-${phase}`, async () => {
      if (options.evaluate) return { flat: await options.evaluate(student, phase), perTask: null, errs: [] };
      const r = await passHatKEval({
        makeEnv: options.makeEnv,
        policy: student,
        tasks: options.tasks,
        trials: config.eval.trials,
        params: { ...params, temperature: config.eval.temperature },
        limits,
      });
      await writeRollouts(run, `eval-${phase}.jsonl.gz`, r.trajectories);
      const perTask: Record<string, number[]> = {};
      for (const t of r.trajectories) (perTask[String(t.metadata.task)] ??= []).push(t.outcome.score);
      const errs = r.trajectories
        .filter((t) => t.outcome.status === "error")
        .map((t) => ({ id: t.episodeId, reason: t.outcome.error?.message ?? "unknown" }));
      const flat = flatPassK(r.summary);
      run.logMetrics({ stage: `eval-${phase}`, ...flat, errors: errs.length });
      return {
        flat,
        perTask: Object.fromEntries(
          Object.entries(perTask).map(([k, v]) => [k, v.reduce((a, b) => a + b, 0) / v.length]),
        ),
        errs,
      };
    });
    if (saved.perTask) phases.push(phaseFromScores(phase, saved.perTask, { errors: saved.errs, base: phases[0] }));
    for (const e of saved.errs) errors.push({ id: `eval-${phase}/${e.id}`, reason: e.reason });
    return saved.flat;
  };
  const before = await evaluate("base");

  // Deploy: no memory in the prompt; consolidation samples from the recorded turns.
  const memory = new Map(options.tasks.map((t) => [t.id, t.memory]));
  const samples = await run.stage("deploy", async () => {
    const engine = options.rolloutEngine;
    const deployer = engine ? await engine.policy({ student, round: 1, adapters: [] }) : student;
    const deployed = await runEpisodes({
      makeEnv: options.makeEnv,
      policy: deployer,
      episodes: options.tasks.map((t) => ({ id: t.id, seed: t.seed, state: t.state })),
      params,
      limits,
      concurrency: ROLLOUT_CONCURRENCY,
      progress: options.progress === false ? undefined : true,
      label: "OEL deploy",
    });
    await writeRollouts(run, "deploy.jsonl.gz", deployed.trajectories);
    run.logMetrics({ stage: "deploy", engine: engine?.name ?? "kiln", episodes: deployed.trajectories.length });
    noteErrors("deploy", deployed.trajectories);
    const byId = new Map(options.tasks.map((t) => [t.id, t]));
    const memoryOf = (t: Trajectory) => {
      const task = byId.get(t.episodeId);
      return task && options.memoryFrom ? options.memoryFrom(task, t) : (memory.get(t.episodeId) ?? "");
    };
    const memories = Object.fromEntries(deployed.trajectories.map((t) => [t.episodeId, memoryOf(t)]));
    await run.writeJson("memories.json", memories);
    return consolidationSamples(codec, deployed.trajectories, memoryOf);
  });
  if (samples.length === 0) throw new RecipeError("runOel: the deployed episodes have no recorded completion tokens");

  // Consolidate: adapter-on student without memory ← adapter-off model with the memory.
  const lora = config.lora;
  const adapter = attachLora(model, {
    r: lora.r,
    alpha: lora.alpha,
    dropout: lora.dropout ?? 0,
    useRslora: lora.useRslora ?? false,
    targetModules: lora.targetModules ?? "all-linear",
    seed,
    name: "oel",
    baseModelNameOrPath: baseModelId(options.baseModel?.source),
  });
  const result = await train<ConsolidationSample>({
    stage: "consolidate",
    adapter,
    data: samples,
    objective: consolidationObjective(
      model,
      adapter,
      { kind: config.divergence as DivergenceKind, ...stageForward(config.train) },
      codec.tokenizer.padTokenId ?? 0,
    ),
    config: { ...config.train, seed },
    run,
    resume: run.resumed,
    progress: options.progress === false ? null : undefined,
  });
  const baseModel = options.baseModel?.source ?? "in-memory model";
  const recipe = `OEL (deploy with the memory in the prompt → consolidate by ${config.divergence} → merge at scale ${config.scale})`;
  const adapterCard = {
    baseModel,
    recipe,
    run: run.metadata,
    title: `${options.name ?? "oel"}: OEL adapter`,
    tags: ["oel"],
  };
  await writeAdapterDir(adapter, run.file("adapter"), adapterCard);
  const report = mergeAdapter(adapter, { scale: config.scale, dtype: "f32", keepOriginal: false });
  await run.stage("merge", async () => {
    run.logMetrics({ stage: "merge", scale: config.scale, mean_bf16_delta_loss: report.meanBf16DeltaLoss });
    return null;
  });

  const after = await evaluate("consolidated");
  const modelDir = run.file("model");
  const table = phases.length ? phaseTable(phases) : "";
  await writeMergedModel(modelDir, model, {
    tokenizer: codec.tokenizer,
    template: codec.template,
    dtype: "f32",
    baseModel,
    recipe,
    run: run.metadata,
    title: `${options.name ?? "oel"}: OEL (deploy → consolidate → merge)`,
    body: `## Evaluation

${table}

pass^k before: ${JSON.stringify(before)}

pass^k after: ${JSON.stringify(after)}
`,
    tags: ["oel"],
  });
  await writeAdapterCard(run.file("adapter"), {
    ...adapterCard,
    body: `## Evaluation (the model with this adapter merged)\n\n${table}\n\npass^k before: ${JSON.stringify(before)}\n\npass^k after: ${JSON.stringify(after)}\n`,
  });
  const h = result.history;
  const out: OelResult = {
    runDir: run.path,
    samples: samples.length,
    lossFirst: Number(h[0]?.loss ?? Number.NaN),
    lossLast: Number(h[h.length - 1]?.loss ?? Number.NaN),
    history: h,
    before,
    after,
    phases,
    errors,
    modelDir,
  };
  await run.writeJson("summary.json", out);
  await writeReport(run, {
    title: `OEL run ${options.name ?? "oel"}`,
    phases,
    tables: {
      "pass^k (± SE)": [
        ["metric", "base", "consolidated"],
        ...Object.keys(before).map((k) => [k, before[k], after[k] ?? ""]),
      ],
    },
    config,
  });
  const files = await run.finalize();
  log(
    `[kiln oel] consolidation loss ${out.lossFirst.toFixed(4)} → ${out.lossLast.toFixed(4)}; ${errors.length} errored episodes; SHA256SUMS over ${files} files`,
  );
  return out;
}

// OPD rounds (docs/ARCHITECTURE.md §Recipes; docs/NUMERICS.md §4): each round the current policy
// plays (plus seeded wall-state starts), the teacher scores the same tokens, the per-token
// advantage −(log q_student − log p_teacher) is clamped to ±c and early turns are weighted, a
// fresh LoRA (r 64, α 64, no rsLoRA) on the merged previous round is updated with the PPO-clipped
// importance-sampled objective through the one trainer loop, then merged in f32. Round r writes
// rounds/r<r>/adapter (relative to the merged round r−1) and rounds/r<r>/model (merged). Every
// round is evaluated against the base with a paired Δ ± SE (the CLI: questworld Core-3 over ≥ 3
// seeds, with the wall table).
// The sampler log-probs are those LocalPolicy records: log-softmax of the raw logits (before
// temperature or top-k/p), i.e. the rollout policy's own log-probs, the PPO "old policy". At the
// default temperature 1 without truncation they are also the sampling distribution's.
import { AdapterChain } from "@kiln/lora";
import { LocalPolicy, type Model } from "@kiln/models";
import {
  type EpisodeLimits,
  type EpisodeSpec,
  type Environment,
  type GenerateParams,
  type Message,
  type Policy,
  type Trajectory,
  episodeSpecs,
  runEpisodes,
} from "@kiln/rollout";
import { baseModelId, writeAdapterCard, writeAdapterDir, writeMergedModel } from "../artifacts.js";
import { writeReport } from "../report.js";
import { RunDir, type RunMode } from "../run-dir.js";
import { opdObjective } from "../trainer/objectives/index.js";
import { type TrainResult, epochOrder, train } from "../trainer/trainer.js";
import type { ChatCodec } from "../trainer/chat-batches.js";
import { RecipeError } from "../errors.js";
import type { RolloutEngine } from "../llama-cpp-rollouts.js";
import type { AdapterSpec } from "../policies.js";
import {
  type AdvantageStats,
  type OpdSample,
  advantageStats,
  packEpisodeTurns,
  scoreWithTeacher,
  type TeacherPrompt,
  viewPolicy,
} from "./opd-samples.js";
import { type OpdConfig, opdTinyConfig, stageForward } from "./presets.js";
import {
  type PhaseEval,
  ROLLOUT_CONCURRENCY,
  type RecipeIo,
  evaluatePhase,
  phaseFromScores,
  phaseMetrics,
  phaseTable,
  writeRollouts,
} from "./recipe-run.js";

export interface OpdEvaluation {
  /** Score per evaluation instance (e.g. Core-3 total per seed). */
  scores: Record<string, number>;
  success?: Record<string, number>;
  errors?: PhaseEval["errors"];
  /** An extra table for the report (e.g. questworld's wall table): header row first. */
  table?: (string | number)[][];
  /** Per evaluated episode, 1 when it passed the setup's wall (questworld: the moonpetal hand-in). */
  wall?: { label: string; passed: Record<string, number> };
}

export interface OpdOptions extends RecipeIo {
  model: Model;
  codec: ChatCodec;
  makeEnv: () => Environment;
  /** Any Policy with score(): a bigger local model, or scaffoldedTeacher(student, hint). */
  teacher: Policy | ((student: Policy) => Policy);
  config?: OpdConfig;
  /** Seeded starts (e.g. questworld wall states) mixed into each round's episodes. */
  starts?: (round: number) => EpisodeSpec[];
  /** Evaluation after each round (default: greedy episodes of the environment on held-out seeds). */
  evaluate?: (policy: Policy, round: number) => Promise<OpdEvaluation>;
  /**
   * What the student sees of a conversation (e.g. questworldView: a bounded window of a long
   * episode). Rollouts and evaluations generate from it and the teacher scores it, so the
   * recorded prompt tokens and the teacher's context agree. Default: the whole conversation.
   */
  view?: (messages: Message[]) => Message[];
  baseModel?: { source: string; dir?: string };
  mode?: RunMode;
  /** Where each round's rollouts are played (e.g. llamaCppRollouts); default kiln's student. Evaluations stay in kiln. */
  rolloutEngine?: RolloutEngine;
  /**
   * The turns the round's diagnostics single out (OpdRoundResult.advantage.focus), e.g. questworld's
   * turns at the wall: called with a rollout and a turn index.
   */
  focusTurn?: (trajectory: Trajectory, turn: number) => boolean;
  /**
   * Teacher-score and train on this many of a round's student turns, a seeded draw (default: every
   * turn). Teacher scoring and the update cost one pass per turn over its windowed prompt; on 2 CPU
   * cores this is what bounds a questworld round.
   */
  turnsPerRound?: number;
  /**
   * The teacher's prompt for a student turn (scoreWithTeacher's teacherPrompt): privileged
   * information the student does not see, rebuilt from what the rollout recorded (e.g. questworld's
   * expert note from the turn's state). Default: the teacher scores the student's own prompt.
   */
  teacherPrompt?: TeacherPrompt;
}

/** A round's view of the seed's objective on its own samples (kit README, "OPD"). */
export interface OpdRoundDiagnostics {
  /** Sampled-token advantage log p_teacher − log q over every trained turn, and over the focus turns. */
  advantage: { all: AdvantageStats; focus?: AdvantageStats };
  /** Rollouts per distinct start state (seeded starts repeated, each fresh start once). */
  samplesPerState: number;
  /** Mean share of tokens whose PPO ratio was clipped, over the round's micro-batches. */
  clipFraction: number;
}

export interface OpdRoundResult {
  round: number;
  samples: number;
  steps: number;
  teacherKlFirst: number;
  teacherKlLast: number;
  lossFirst: number;
  lossLast: number;
  eval: PhaseEval;
  diagnostics: OpdRoundDiagnostics;
  modelDir: string;
  adapterDir: string;
}

/**
 * A seeded draw of `n` (episode, turn) keys among the turns that carry tokens and log-probs; undefined
 * (every turn) when `n` is absent or covers them all.
 */
export function drawTurns(
  trajectories: readonly Trajectory[],
  n: number | undefined,
  seed: number,
): Set<string> | undefined {
  if (n === undefined) return undefined;
  if (!(Number.isSafeInteger(n) && n >= 1))
    throw new RecipeError(`OPD turnsPerRound must be a positive integer, got ${n}`);
  const keys = trajectories.flatMap((t) =>
    t.turns
      .filter((x) => x.completionTokenIds?.length && x.logprobs?.length === x.completionTokenIds.length)
      .map((x) => `${t.episodeId}\u0000${x.index}`),
  );
  if (n >= keys.length) return undefined;
  const order = epochOrder(keys.length, seed, 0, true);
  return new Set(Array.from(order.slice(0, n), (i) => keys[i]));
}

export async function runOpdRounds(
  options: OpdOptions,
): Promise<{ runDir: string; rounds: OpdRoundResult[]; baseline: PhaseEval; phaseTable: string }> {
  const log = options.log ?? ((line: string) => console.error(line));
  const { model, codec } = options;
  const config = options.config ?? opdTinyConfig();
  const seed = config.seed;
  const params: GenerateParams = {
    temperature: config.rollout.temperature,
    maxTokens: config.rollout.maxTokens,
    logprobs: true,
  };
  const limits: EpisodeLimits = { maxTurns: config.rollout.maxTurns };
  const run = await RunDir.create(
    options.out ?? "runs",
    options.name ?? "opd",
    { ...config },
    {
      seeds: { recipe: seed, lora: seed, sampling: seed },
      mode: options.mode,
    },
  );
  if (!run.resumed) await run.recordBaseModel(options.baseModel?.source ?? "in-memory model", options.baseModel?.dir);
  log(`[kiln opd] run directory: ${run.path}${run.resumed ? " (resumed)" : ""}`);
  const student = new LocalPolicy({
    id: "opd-student",
    model,
    tokenizer: codec.tokenizer,
    chatTemplate: codec.template,
    defaults: params,
  });
  const teacher = typeof options.teacher === "function" ? options.teacher(student) : options.teacher;
  // The view wraps the player only: the teacher gets the viewed conversation from scoreWithTeacher.
  const player = options.view ? viewPolicy(student, options.view) : student;
  const evaluate =
    options.evaluate ??
    (async (p: Policy, round: number): Promise<OpdEvaluation> => {
      const r = await evaluatePhase({
        phase: `r${round}`,
        makeEnv: options.makeEnv,
        policy: p,
        specs: episodeSpecs(Math.max(3, config.eval.seeds.length), 100_000 + seed, "eval"),
        params: { maxTokens: params.maxTokens, temperature: 0 },
        limits,
      });
      await writeRollouts(run, `eval-r${round}.jsonl.gz`, r.trajectories);
      return { scores: r.eval.scores, errors: r.eval.errors };
    });
  const phases: PhaseEval[] = [];
  const tables: Record<string, (string | number)[][]> = {};
  const evalRound = async (round: number): Promise<PhaseEval> => {
    const phase = round === 0 ? "base" : `r${round}`;
    const saved = await run.stage(`eval-${phase}`, async () => {
      const e = await evaluate(player, round);
      const ev = phaseFromScores(phase, e.scores, { success: e.success, errors: e.errors, base: phases[0] });
      run.logMetrics({ stage: `eval-${phase}`, round, ...phaseMetrics(ev) });
      return { ev, table: e.table };
    });
    phases.push(saved.ev);
    if (saved.table) tables[`Wall table after ${phase}`] = saved.table;
    for (const e of saved.ev.errors) log(`[kiln opd] eval ${phase}: ${e.id} errored: ${e.reason}`);
    return saved.ev;
  };
  const baseline = await evalRound(0);

  const chain = new AdapterChain(model, {
    r: config.lora.r,
    alpha: config.lora.alpha,
    dropout: config.lora.dropout ?? 0,
    useRslora: config.lora.useRslora ?? false,
    targetModules: config.lora.targetModules ?? "all-linear",
    seed,
    name: "opd",
    baseModelNameOrPath: baseModelId(options.baseModel?.source),
  });
  const results: OpdRoundResult[] = [];
  // The rounds merged so far, for a rollout engine that applies them as adapters on the base.
  const merged: AdapterSpec[] = [];
  for (let round = 1; round <= config.rounds; round++) {
    const { samples, advantage, samplesPerState } = await run.stage(`round-${round}-samples`, async () => {
      const episodes = [
        ...episodeSpecs(config.episodesPerRound, seed + round, `round-${round}`),
        ...(options.starts?.(round) ?? []),
      ];
      const engine = options.rolloutEngine;
      const roller = engine ? await engine.policy({ student, round, adapters: merged }) : undefined;
      const rollouts = await runEpisodes({
        makeEnv: options.makeEnv,
        policy: roller ? (options.view ? viewPolicy(roller, options.view) : roller) : player,
        episodes,
        params,
        limits,
        concurrency: ROLLOUT_CONCURRENCY,
        progress: options.progress === false ? undefined : true,
        label: `OPD round ${round} rollouts`,
      });
      await writeRollouts(run, `round-${round}.jsonl.gz`, rollouts.trajectories);
      const errored = rollouts.trajectories.filter((t) => t.outcome.status === "error");
      for (const t of errored)
        log(`[kiln opd] round ${round}: episode ${t.episodeId} errored: ${t.outcome.error?.message ?? "unknown"}`);
      const fullDistribution = (config.objective.divergence ?? "sampled") !== "sampled";
      const chosen = drawTurns(rollouts.trajectories, options.turnsPerRound, seed + round);
      const { samples, skipped } = await scoreWithTeacher(rollouts.trajectories, teacher, {
        include: chosen ? (t, turn) => chosen.has(`${t.episodeId}\u0000${turn}`) : undefined,
        view: options.view,
        teacherPrompt: options.teacherPrompt,
        topLogprobs: fullDistribution ? (config.objective.teacherTopK ?? 20) : undefined,
      });
      const focus = options.focusTurn;
      const byId = new Map(rollouts.trajectories.map((t) => [t.episodeId, t]));
      const advantage = {
        all: advantageStats(samples, config.objective.clamp),
        ...(focus
          ? {
              focus: advantageStats(samples, config.objective.clamp, (x) => {
                const t = byId.get(x.episodeId);
                return t !== undefined && focus(t, x.turn);
              }),
            }
          : {}),
      };
      const states = new Set(episodes.map((e) => (e.state === undefined ? `fresh:${e.id}` : JSON.stringify(e.state))));
      run.logMetrics({
        stage: `round-${round}-samples`,
        episodes: episodes.length,
        errored: errored.length,
        samples: samples.length,
        skipped,
        advantage_mean: advantage.all.mean,
        advantage_positive: advantage.all.positive,
        advantage_clamped: advantage.all.clamped,
        ...(advantage.focus
          ? {
              focus_turns: advantage.focus.turns,
              focus_advantage_mean: advantage.focus.mean,
              focus_advantage_positive: advantage.focus.positive,
              focus_advantage_clamped: advantage.focus.clamped,
            }
          : {}),
      });
      return { samples, advantage, samplesPerState: episodes.length / Math.max(1, states.size) };
    });
    if (samples.length === 0) throw new RecipeError(`OPD round ${round}: no student turn carried tokens and log-probs`);
    const adapter = chain.current;
    const result: TrainResult = await train<OpdSample>({
      stage: `round-${round}`,
      adapter,
      data: config.packTurns ? packEpisodeTurns(samples) : samples,
      objective: opdObjective(model, { ...config.objective, ...stageForward(config.train) }),
      config: { ...config.train, seed: seed + round },
      run,
      resume: run.resumed,
      progress: options.progress === false ? null : undefined,
    });
    const adapterDir = run.file("rounds", `r${round}`, "adapter");
    const baseModel = options.baseModel?.source ?? "in-memory model";
    const recipe = `OPD round ${round} of ${config.rounds}: on-policy distillation towards the teacher, each earlier round merged at scale ${config.scale}`;
    const adapterCard = {
      // Round r's adapter applies to the model with rounds 1 … r − 1 merged, shipped beside it.
      baseModel: round === 1 ? baseModel : run.file("rounds", `r${round - 1}`, "model"),
      recipe,
      run: run.metadata,
      title: `${options.name ?? "opd"} round ${round} (OPD adapter)`,
      tags: ["opd"],
    };
    await writeAdapterDir(adapter, adapterDir, adapterCard);
    await chain.advance({ scale: config.scale });
    merged.push({ dir: adapterDir, scale: config.scale });
    const modelDir = run.file("rounds", `r${round}`, "model");
    const ev = await evalRound(round);
    // The chain's next adapter is fresh (B = 0); the written weights are the merged round.
    chain.current.disable();
    await writeMergedModel(modelDir, model, {
      tokenizer: codec.tokenizer,
      template: codec.template,
      dtype: "f32",
      baseModel,
      recipe: `${recipe}; this round merged too`,
      run: run.metadata,
      title: `${options.name ?? "opd"} round ${round} (OPD, merged)`,
      body: `## Evaluation\n\n${phaseTable(phases)}\n`,
      tags: ["opd"],
    });
    await writeAdapterCard(adapterDir, {
      ...adapterCard,
      body: `## Evaluation (the model with this round merged)\n\n${phaseTable(phases)}\n`,
    });
    chain.current.enable();
    const h = result.history;
    const r: OpdRoundResult = {
      round,
      samples: samples.length,
      steps: result.steps,
      teacherKlFirst: Number(h[0]?.teacher_kl),
      teacherKlLast: Number(h[h.length - 1]?.teacher_kl),
      lossFirst: Number(h[0]?.loss),
      lossLast: Number(h[h.length - 1]?.loss),
      eval: ev,
      diagnostics: {
        advantage,
        samplesPerState,
        clipFraction: h.length === 0 ? Number.NaN : h.reduce((a, x) => a + Number(x.clip_fraction ?? 0), 0) / h.length,
      },
      modelDir,
      adapterDir,
    };
    results.push(r);
    log(
      `[kiln opd] round ${round}: ${samples.length} turns, teacher_kl ${r.teacherKlFirst.toFixed(3)} → ${r.teacherKlLast.toFixed(3)}, eval ${ev.score.mean.toFixed(3)} ± ${ev.score.se.toFixed(3)}${ev.delta ? ` (Δ ${ev.delta.mean.toFixed(3)} ± ${ev.delta.se.toFixed(3)})` : ""}`,
    );
  }
  // The chain attached a fresh (zero-B, identity) adapter after the last merge; drop it.
  chain.current.detach();
  const table = phaseTable(phases);
  await run.writeJson("summary.json", { baseline, rounds: results, phaseTable: table });
  await writeReport(run, { title: `OPD run ${options.name ?? "opd"}`, phases, tables, config });
  const files = await run.finalize();
  log(`[kiln opd] phases:\n${table}\n[kiln opd] wrote SHA256SUMS over ${files} files`);
  return { runDir: run.path, rounds: results, baseline, phaseTable: table };
}

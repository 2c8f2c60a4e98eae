// ARP — Acquire, Repair, Preserve (docs/ARCHITECTURE.md §Recipes), stage by stage as the
// seed system ran it:
//   A  broad SFT on the success-only corpus over every game (per-game cap, seeded holdout) → merge (f32)
//   A2 game-targeted SFT on the games the base plays worst (its mean score on training instances) → merge
//   B1 turn-local DPO on repeat / length faults → merge
//   B2 turn-local DPO on invalid / duplicate-field faults → merge
//      With the game's corruption (Wordle) the pairs are synthetic, as the seed built them: a good
//      turn of a successful episode is chosen, the same turn corrupted by one fault is rejected.
//      Without one, the current policy's diagnosed failures are paired with a reference reply.
//   C  branch DPO from the current (B2) policy: fork at a turn, K continuations, pair the
//      immediately diverging replies whose downstream episode scores differ by at least
//      minMargin (β 0.2; ties are dropped and counted) → merge
//   Preserve: the whole delta scaled by s, W = W₀ + s·Σᵢ ΔWᵢ, merged in f32 and written as a
//   Hugging Face directory, with the scaled adapter (the stages' adapters concatenated) beside it.
// Each DPO stage is a fresh LoRA whose reference is the adapter-off model, i.e. the previous
// stage's merged policy. Every phase is evaluated greedily on held-out instances with mean ± SE
// and the paired Δ ± SE against the base. Each stage resumes from its checkpoints or its saved
// result (`resume: true`).
import {
  type LoraAdapter,
  type MergeReport,
  attachLora,
  combineAdapters,
  mergeAdapter,
  parameterReport,
} from "@kiln/lora";
import { ChatTemplateError, LocalPolicy, type Model } from "@kiln/models";
import {
  type EpisodeLimits,
  type Environment,
  type GenerateParams,
  type Policy,
  type FailureMode,
  type PreferencePair,
  type Trajectory,
  branchEpisode,
  branchPairs,
  diagnoseTrajectory,
  episodeSpecs,
  isSuccessful,
  runEpisodes,
  trajectoryMessages,
  turnLocalPairs,
} from "@kiln/rollout";
import { noGrad } from "@kiln/tensor";
import { baseModelId, writeAdapterCard, writeAdapterDir, writeMergedModel } from "../artifacts.js";
import { writeReport } from "../report.js";
import { type RunDir, RunDir as RunDirClass, type RunMode } from "../run-dir.js";
import { dpoObjective, sftObjective } from "../trainer/objectives/index.js";
import { type TrainConfig, type TrainResult, train } from "../trainer/trainer.js";
import {
  type ChatCodec,
  type Conversation,
  type PreferenceExample,
  renderConversation,
} from "../trainer/chat-batches.js";
import type { DiagnoseOptions, RepairFn } from "./diagnose.js";
import {
  type ArpConfig,
  type DpoStageSettings,
  type LoraSettings,
  type StageTrainSettings,
  arpTinyConfig,
  stageForward,
} from "./presets.js";
import { type TurnCorruption, syntheticTurnPairs } from "./arp-pairs.js";
import {
  type PhaseEval,
  ROLLOUT_CONCURRENCY,
  type RecipeIo,
  evaluatePhase,
  phaseMetrics,
  phaseTable,
  writeRollouts,
} from "./recipe-run.js";
import { holdoutSplit, successOnlySftSet } from "./sft-set.js";

export type { LoraSettings };

export interface BranchDpoOptions {
  trajectories: readonly Trajectory[];
  makeEnv: () => Environment;
  policy: Policy;
  /** Alternatives per fork (default 4). */
  k?: number;
  /** Fork turn per trajectory (default: its first diagnosed turn, else turn 0). */
  pickTurn?: (t: Trajectory) => number;
  params?: GenerateParams;
  limits?: EpisodeLimits;
  /** Smallest downstream-score difference that makes a pair (rollout's branchPairs default when unset). */
  minMargin?: number;
  diagnose?: DiagnoseOptions;
  /** Told, per fork, how many distinct-reply candidate pairs it had and how many fell below minMargin. */
  onFork?: (counts: { candidates: number; ties: number }) => void;
}

/** Branch-DPO pairs: fork each trajectory at a turn, sample K continuations, pair by downstream score. */
export async function branchDpoPairs(options: BranchDpoOptions): Promise<PreferencePair[]> {
  const pairs: PreferencePair[] = [];
  for (const t of options.trajectories) {
    if (t.turns.length === 0 || t.players) continue;
    const turn = options.pickTurn?.(t) ?? diagnoseTrajectory(t, options.diagnose)[0]?.turn ?? 0;
    const result = await branchEpisode({
      trajectory: t,
      turn,
      k: options.k ?? 4,
      makeEnv: options.makeEnv,
      policy: options.policy,
      params: options.params,
      limits: options.limits,
      concurrency: ROLLOUT_CONCURRENCY,
    });
    const kept = branchPairs(result, { minMargin: options.minMargin });
    // Every distinct reply against the best one, whatever the margin: the candidates before the cut.
    const candidates = branchPairs(result, { minMargin: Number.NEGATIVE_INFINITY }).length;
    options.onFork?.({ candidates, ties: candidates - kept.length });
    pairs.push(...kept);
  }
  return pairs;
}

/** ARP's acquired episodes: `expert` plays `episodes` games of `makeEnv` from `seed` (the SFT source). */
export async function acquireExpertEpisodes(
  setup: { makeEnv: () => Environment; expert: Policy; expertTurns: number },
  episodes: number,
  seed: number,
): Promise<Trajectory[]> {
  const run = await runEpisodes({
    makeEnv: setup.makeEnv,
    policy: setup.expert,
    episodes,
    baseSeed: seed,
    limits: { maxTurns: setup.expertTurns },
    concurrency: ROLLOUT_CONCURRENCY,
  });
  return run.trajectories as Trajectory[];
}

export interface ArpOptions extends RecipeIo {
  model: Model;
  codec: ChatCodec;
  makeEnv: () => Environment;
  /** Acquired episodes (an expert's, a bigger model's, or earlier runs'): the SFT source and DPO references. */
  sourceTrajectories: readonly Trajectory[];
  config?: ArpConfig;
  /** The held-out evaluation instances (default: makeEnv with seeds disjoint from training's). */
  makeEvalEnv?: () => Environment;
  /**
   * Game rules for the diagnosers (Wordle: wrong length, invalid word) and, optionally, the game's
   * repair: the chosen reply of a failing turn that no reference trajectory answers.
   */
  diagnose?: Omit<DiagnoseOptions, "maxChars"> & { repair?: RepairFn };
  /** Where the base model came from (recorded in metadata.json and the model card). */
  baseModel?: { source: string; dir?: string };
  /** "new" (default: refuse an existing run), "overwrite", or "resume". */
  mode?: RunMode;
  /**
   * Called after each phase's evaluation while the model holds that phase's weights (e.g. to add a
   * static score such as held-out perplexity).
   */
  onPhase?: (phase: PhaseEval) => void | Promise<void>;
  /**
   * The DPO stages' reference: by default the adapter-off model (the previous stage's merged
   * policy, i.e. the SFT model for B1); a model given here (e.g. the untouched base) replaces it.
   */
  dpoReferenceModel?: Model;
  /**
   * A multi-game run's training environments (one per game, training instances only): phase A2
   * plays the base on them to find its weakest games. Without them A2 is skipped.
   */
  games?: readonly ArpTrainingGame[];
  /**
   * The game's turn corruption (e.g. `wordleTurnCorruption()`): B1/B2 train on synthetic pairs
   * derived from good turns of `makeEnv`'s game in `sourceTrajectories`. Without it, B1/B2 pair the
   * current policy's diagnosed failures with reference replies.
   */
  corruptTurn?: TurnCorruption;
  /** An episode's SFT documents (default: its whole conversation; e.g. privateshared's player views). */
  sftDocuments?: (t: Trajectory) => Conversation[];
  /**
   * The run's in-process generation (probe, rollouts, evaluations): LocalPolicy's batching scheduler (the
   * default) or, with false, one plain generate per reply. Same greedy episodes either way; the cost differs.
   */
  batching?: false;
}

export interface ArpTrainingGame {
  /** The environment id its trajectories carry (e.g. "clembench/taboo"). */
  envId: string;
  makeEnv: () => Environment;
  maxTurns?: number;
  /** The policy as it plays this game (e.g. from the player's view of the conversation). */
  wrapPolicy?: (policy: Policy) => Policy;
}

export interface ArpStageSummary {
  stage: string;
  examples: number;
  steps: number;
  first: Record<string, number>;
  last: Record<string, number>;
}

export interface ArpResult {
  runDir: string;
  sftSize: number;
  holdoutSize: number;
  /** Phase A's training episodes per environment id (after the per-game cap and the holdout). */
  sftPerGame: Record<string, number>;
  /** Successful episodes left out of A/A2 because the tokenizer cannot render them, per environment id. */
  unrenderable: Record<string, number>;
  /** Phase A2: the base's mean score per game on training instances, the weakest games, its data size. */
  targeted: { probe: Record<string, number>; games: string[]; size: number };
  stages: ArpStageSummary[];
  phases: PhaseEval[];
  turnPairs: { b1: number; b2: number };
  /** Pairs per failure mode of B1 and B2, whether they were synthetic, and the candidates before the per-mode cap. */
  turnPairsByMode: {
    b1: Record<FailureMode, number>;
    b2: Record<FailureMode, number>;
    synthetic: boolean;
    candidates: { b1: Record<FailureMode, number>; b2: Record<FailureMode, number> };
  };
  branchPairs: number;
  /** Phase C: minMargin, the distinct-reply candidate pairs of all forks and how many were dropped as ties. */
  branch: { minMargin: number; candidates: number; ties: number; forks: number };
  meanBf16DeltaLoss: number;
  modelDir: string;
  adapterDir: string;
}

function trainConfig(s: StageTrainSettings, seed: number): TrainConfig {
  return {
    lr: s.lr,
    microBatchSize: s.microBatchSize,
    gradAccum: s.gradAccum,
    epochs: s.epochs,
    maxSteps: s.maxSteps,
    schedule: s.schedule,
    warmupRatio: s.warmupRatio,
    weightDecay: s.weightDecay,
    maxGradNorm: s.maxGradNorm,
    checkpointEvery: s.checkpointEvery,
    evalEvery: s.evalEvery,
    seed,
  };
}

function pick(record: Record<string, unknown> | undefined, keys: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const k of keys) if (typeof record?.[k] === "number") out[k] = record[k] as number;
  return out;
}

function summary(stage: string, examples: number, r: TrainResult | null, keys: string[]): ArpStageSummary {
  return {
    stage,
    examples,
    steps: r?.steps ?? 0,
    first: pick(r?.history[0], keys),
    last: pick(r?.history[r.history.length - 1], keys),
  };
}

export async function runArp(options: ArpOptions): Promise<ArpResult> {
  const log = options.log ?? ((line: string) => console.error(line));
  const { model, codec } = options;
  const config = options.config ?? arpTinyConfig();
  const seed = config.seed;
  const params: GenerateParams = {
    temperature: config.rollout.temperature,
    maxTokens: config.rollout.maxTokens,
    logprobs: true,
  };
  const limits: EpisodeLimits = { maxTurns: config.rollout.maxTurns };
  const diagnose: DiagnoseOptions & { repair?: RepairFn } = { ...options.diagnose, maxChars: config.maxChars };
  const run: RunDir = await RunDirClass.create(
    options.out ?? "runs",
    options.name ?? "arp",
    { ...config },
    {
      seeds: { recipe: seed, lora: seed, shuffle: seed, eval: config.eval.baseSeed },
      mode: options.mode,
    },
  );
  if (!run.resumed) await run.recordBaseModel(options.baseModel?.source ?? "in-memory model", options.baseModel?.dir);
  log(`[kiln arp] run directory: ${run.path}${run.resumed ? " (resumed)" : ""}`);
  const policy = new LocalPolicy({
    id: "arp-student",
    model,
    tokenizer: codec.tokenizer,
    chatTemplate: codec.template,
    defaults: params,
    ...(options.batching === false ? { batching: false as const } : {}),
  });
  const evalSpecs = episodeSpecs(config.eval.episodes, config.eval.baseSeed, "eval");
  const phases: PhaseEval[] = [];
  const evaluate = async (phase: string): Promise<PhaseEval> => {
    const evalStart = performance.now();
    const ev = await run.stage(`eval-${phase}`, async () => {
      const r = await evaluatePhase({
        phase,
        makeEnv: options.makeEvalEnv ?? options.makeEnv,
        policy,
        specs: evalSpecs,
        params: { maxTokens: params.maxTokens, temperature: 0 },
        limits,
        base: phases[0],
      });
      await writeRollouts(run, `eval-${phase}.jsonl.gz`, r.trajectories);
      run.logMetrics({ stage: `eval-${phase}`, phase, ...phaseMetrics(r.eval) });
      return r.eval;
    });
    phases.push(ev);
    const evalSeconds = (performance.now() - evalStart) / 1000;
    await options.onPhase?.(ev);
    for (const e of ev.errors) log(`[kiln arp] eval ${phase}: episode ${e.id} errored: ${e.reason}`);
    log(
      `[kiln arp] eval ${phase}: score ${ev.score.mean.toFixed(3)} ± ${ev.score.se.toFixed(3)} (n ${ev.n})${ev.delta ? `, Δ vs base ${ev.delta.mean.toFixed(3)} ± ${ev.delta.se.toFixed(3)}` : ""}; ${evalSeconds.toFixed(1)} s`,
    );
    return ev;
  };
  const studentEpisodes = async (label: string, count: number, offset: number): Promise<Trajectory[]> => {
    const r = await runEpisodes({
      makeEnv: options.makeEnv,
      policy,
      // The students replay the acquired episodes' instances (their seeds), so a failing turn can
      // be paired with the expert's reply at the same state.
      episodes:
        options.sourceTrajectories.length > 0
          ? Array.from({ length: count }, (_, i) => {
              const t = options.sourceTrajectories[(offset * count + i) % options.sourceTrajectories.length];
              return { id: `${label}-${i}`, seed: t.seed };
            })
          : episodeSpecs(count, seed + offset, label),
      params,
      limits,
      concurrency: ROLLOUT_CONCURRENCY,
      progress: options.progress === false ? undefined : true,
      label: `ARP ${label} episodes`,
    });
    await writeRollouts(run, `${label}.jsonl.gz`, r.trajectories);
    return r.trajectories;
  };
  const newAdapter = (stage: string, offset: number): LoraAdapter => {
    const lora = config.lora;
    return attachLora(model, {
      r: lora.r,
      alpha: lora.alpha,
      dropout: lora.dropout ?? 0,
      useRslora: lora.useRslora ?? false,
      targetModules: lora.targetModules ?? "all-linear",
      seed: seed + offset,
      name: stage,
      baseModelNameOrPath: baseModelId(options.baseModel?.source),
    });
  };
  const progress = options.progress === false ? null : undefined;
  const resume = run.resumed;
  const stageAdapters: LoraAdapter[] = [];
  const stages: ArpStageSummary[] = [];
  let base: MergeReport | null = null;

  await evaluate("base");

  // A2's choice of games: the base's mean score per game on training instances (never the held-out ones).
  const targetedSettings = config.targetedSft;
  const probe = await run.stage("targeted-sft-probe", async () => {
    const games = options.games ?? [];
    if (games.length === 0 || targetedSettings.weakestGames === 0) return {} as Record<string, number>;
    const runs = await Promise.all(
      games.map((g) =>
        runEpisodes({
          makeEnv: g.makeEnv,
          policy: g.wrapPolicy?.(policy) ?? policy,
          episodes: episodeSpecs(targetedSettings.probeEpisodes, seed + 7, `probe-${g.envId}`),
          params: { maxTokens: params.maxTokens, temperature: 0 },
          limits: { maxTurns: g.maxTurns ?? config.rollout.maxTurns },
          concurrency: ROLLOUT_CONCURRENCY,
        }),
      ),
    );
    const means: Record<string, number> = {};
    games.forEach((g, i) => {
      const scores = runs[i].trajectories.map((t) => t.outcome.score);
      means[g.envId] = scores.reduce((a, b) => a + b, 0) / scores.length;
    });
    run.logMetrics({ stage: "targeted-sft-probe", ...means });
    return means;
  });

  // A: success-only SFT over every game.
  await writeRollouts(run, "source.jsonl.gz", options.sourceTrajectories);
  const documentsOf =
    options.sftDocuments ?? ((t: Trajectory) => [{ messages: trajectoryMessages(t), tools: t.tools }]);
  const envOf = new Map<string, string>();
  for (const t of options.sourceTrajectories)
    for (const d of documentsOf(t as Trajectory)) envOf.set(JSON.stringify(d.messages), t.environment.id);
  const conversationEnv = (c: Conversation) => envOf.get(JSON.stringify(c.messages)) ?? "unknown";
  const unrenderable: Record<string, number> = {};
  const renderable = (list: Conversation[], maxLength: number) =>
    list.filter((c) => {
      try {
        renderConversation(codec, c, maxLength, "left");
        return true;
      } catch (e) {
        if (!(e instanceof ChatTemplateError)) throw e;
        unrenderable[conversationEnv(c)] = (unrenderable[conversationEnv(c)] ?? 0) + 1;
        return false;
      }
    });
  // A tokenizer that cannot encode a game's text (e.g. imagegame's grid characters) cannot learn it:
  // those episodes are left out, counted per game and said.
  const corpus = renderable(
    successOnlySftSet(options.sourceTrajectories, {
      capPerEnv: config.data.capPerGame,
      seed,
      documents: options.sftDocuments,
    }),
    config.sft.maxLength,
  );
  if (Object.keys(unrenderable).length > 0)
    log(`[kiln arp] left out episodes the tokenizer cannot render: ${JSON.stringify(unrenderable)}`);
  const { train: sftTrain, holdout } = holdoutSplit(corpus, config.data.holdoutFraction, seed);
  const sftPerGame: Record<string, number> = {};
  for (const c of sftTrain) sftPerGame[conversationEnv(c)] = (sftPerGame[conversationEnv(c)] ?? 0) + 1;
  log(
    `[kiln arp] SFT corpus: ${corpus.length} successful episodes (${sftTrain.length} train, ${holdout.length} held out); per game ${JSON.stringify(sftPerGame)}`,
  );
  const sftAdapter = newAdapter("sft", 0);
  const counts = parameterReport(model, [sftAdapter]);
  log(`[kiln arp] LoRA r=${config.lora.r} α=${config.lora.alpha}: ${counts.trainable} trainable parameters per stage`);
  // Game conversations outgrow maxLength (privateshared: ~3k tokens): keep their end, where the later replies are.
  const sft = sftObjective(model, codec, { ...stageForward(config.sft), truncationSide: "left" });
  let sftResult: TrainResult | null = null;
  if (sftTrain.length > 0) {
    const holdoutLoss = (): Record<string, number> => {
      if (holdout.length === 0) return {};
      const items = sft.items(holdout);
      const loss = noGrad(() => sft.loss(holdout, items).loss.item());
      return { holdout_loss: loss };
    };
    sftResult = await train<Conversation>({
      stage: "sft",
      adapter: sftAdapter,
      data: sftTrain,
      objective: sft,
      config: trainConfig(config.sft, seed),
      run,
      resume,
      evaluate: holdout.length > 0 ? holdoutLoss : undefined,
      progress,
    });
  } else log("[kiln arp] no successful source episodes: SFT skipped");
  stages.push(summary("sft", sftTrain.length, sftResult, ["loss", "mean_token_accuracy"]));
  // keepOriginal: the pre-SFT weights W₀ are what the final scaled merge starts from.
  base = mergeAdapter(sftAdapter, { scale: 1, dtype: "f32", keepOriginal: true });
  stageAdapters.push(sftAdapter);
  await evaluate("sft");

  // A2: game-targeted SFT on the weakest games (among those with successful episodes to imitate).
  const sourceGames = new Set(
    options.sourceTrajectories.filter((t) => !t.players && isSuccessful(t)).map((t) => t.environment.id),
  );
  const targetedGames = Object.entries(probe)
    .filter(([env]) => sourceGames.has(env))
    .sort(([a, x], [b, y]) => x - y || (a < b ? -1 : 1))
    .slice(0, targetedSettings.weakestGames)
    .map(([env]) => env);
  let targetedSize = 0;
  if (Object.keys(probe).length > 0) {
    const heldKeys = new Set(holdout.map((c) => JSON.stringify(c.messages)));
    const targetedData = renderable(
      successOnlySftSet(
        options.sourceTrajectories.filter((t) => targetedGames.includes(t.environment.id)),
        { capPerEnv: targetedSettings.capPerGame, seed: seed + 1, documents: options.sftDocuments },
      ),
      targetedSettings.maxLength,
    ).filter((c) => !heldKeys.has(JSON.stringify(c.messages)));
    targetedSize = targetedData.length;
    log(
      `[kiln arp] targeted SFT: base score on training instances ${JSON.stringify(probe)}; weakest ${targetedGames.join(", ")}: ${targetedData.length} episodes`,
    );
    const adapter = newAdapter("targeted-sft", 4);
    let result: TrainResult | null = null;
    if (targetedData.length > 0)
      result = await train<Conversation>({
        stage: "targeted-sft",
        adapter,
        data: targetedData,
        objective: sftObjective(model, codec, { ...stageForward(targetedSettings), truncationSide: "left" }),
        config: trainConfig(targetedSettings, seed + 1),
        run,
        resume,
        progress,
      });
    stages.push(summary("targeted-sft", targetedData.length, result, ["loss", "mean_token_accuracy"]));
    mergeAdapter(adapter, { scale: 1, dtype: "f32", keepOriginal: false });
    stageAdapters.push(adapter);
    await evaluate("targeted-sft");
  }

  const dpoStage = async (
    stage: string,
    settings: DpoStageSettings,
    pairs: PreferenceExample[],
    offset: number,
  ): Promise<void> => {
    const adapter = newAdapter(stage, offset);
    let result: TrainResult | null = null;
    if (pairs.length > 0)
      result = await train<PreferenceExample>({
        stage,
        adapter,
        data: pairs,
        objective: dpoObjective(model, adapter, codec, {
          beta: settings.beta,
          ...stageForward(settings),
          referenceModel: options.dpoReferenceModel,
        }),
        config: trainConfig(settings, seed),
        run,
        resume,
        progress,
      });
    else log(`[kiln arp] ${stage}: no pairs, stage skipped`);
    stages.push(
      summary(stage, pairs.length, result, ["loss", "rewards/margins", "rewards/accuracies", "rewards/chosen"]),
    );
    mergeAdapter(adapter, { scale: 1, dtype: "f32", keepOriginal: false });
    stageAdapters.push(adapter);
    await evaluate(stage);
  };

  // B1 and B2: synthetic turn-local pairs from the game's corruption of good turns, or pairs from
  // the current policy's failures.
  const focusEnv = options.corruptTurn ? options.makeEnv().id : "";
  const byMode: Record<string, Record<FailureMode, number>> = {};
  const candidatesByMode: Record<string, Record<FailureMode, number>> = {};
  const turnStage = async (stage: string, s: ArpConfig["turnDpo1"], offset: number) => {
    const corrupt = options.corruptTurn;
    const pairs = await run.stage(`${stage}-data`, async () => {
      if (corrupt) {
        const r = syntheticTurnPairs(
          options.sourceTrajectories.filter((t) => t.environment.id === focusEnv),
          {
            modes: s.modes,
            corrupt,
            pairsPerMode: s.pairsPerMode,
            variantsPerTurn: s.variantsPerTurn,
            seed: seed + offset,
            diagnose,
          },
        );
        run.logMetrics({
          stage: `${stage}-data`,
          synthetic: 1,
          good_turns: r.goodTurns,
          pairs: r.pairs.length,
          ...Object.fromEntries(s.modes.map((m) => [m, r.byMode[m]])),
          ...Object.fromEntries(s.modes.map((m) => [`candidates_${m}`, r.candidates[m]])),
        });
        log(
          `[kiln arp] ${stage}: ${r.pairs.length} synthetic pairs on ${focusEnv} from ${r.goodTurns} good turns (${s.modes.map((m) => `${m} ${r.byMode[m]} of ${r.candidates[m]}`).join(", ")})`,
        );
        return {
          byMode: r.byMode,
          candidates: r.candidates,
          pairs: r.pairs.map(({ prompt, chosen, rejected, tools }) => ({ prompt, chosen, rejected, tools })),
        };
      }
      const episodes = await studentEpisodes(stage, s.studentEpisodes, offset);
      const r = turnLocalPairs(episodes, options.sourceTrajectories, { ...diagnose, modes: s.modes });
      run.logMetrics({
        stage: `${stage}-data`,
        diagnosed: r.diagnosed.length,
        pairs: r.pairs.length,
        unpaired: r.unpaired,
        ...r.byMode,
      });
      log(
        `[kiln arp] ${stage}: ${r.diagnosed.length} failing turns (${JSON.stringify(r.byMode)}), ${r.pairs.length} pairs, ${r.unpaired} unpaired`,
      );
      // Pairs per mode: a failing turn counts under each of the stage's modes it shows.
      const counted = { repeat: 0, length: 0, invalid: 0, duplicate_field: 0 };
      for (const p of r.pairs) for (const m of p.source.modes) if (s.modes.includes(m)) counted[m]++;
      return {
        byMode: counted,
        candidates: r.byMode,
        pairs: r.pairs.map(({ prompt, chosen, rejected, tools }) => ({ prompt, chosen, rejected, tools })),
      };
    });
    byMode[stage] = pairs.byMode;
    candidatesByMode[stage] = pairs.candidates;
    await dpoStage(stage, s, pairs.pairs, offset);
    return pairs.pairs.length;
  };
  const b1 = await turnStage("turn-dpo-1", config.turnDpo1, 1);
  const b2 = await turnStage("turn-dpo-2", config.turnDpo2, 2);

  // C: branch pairs from the current (B2-merged) policy.
  const branchData = await run.stage("branch-dpo-data", async () => {
    const forks = await studentEpisodes("branch-dpo", config.branchDpo.forks, 3);
    let candidates = 0;
    let ties = 0;
    const pairs = await branchDpoPairs({
      trajectories: forks,
      makeEnv: options.makeEnv,
      policy,
      k: config.branchDpo.k,
      params,
      limits,
      minMargin: config.branchDpo.minMargin,
      diagnose,
      onFork: (c) => {
        candidates += c.candidates;
        ties += c.ties;
      },
    });
    run.logMetrics({ stage: "branch-dpo-data", forks: forks.length, pairs: pairs.length, candidates, ties });
    log(
      `[kiln arp] branch-dpo: ${pairs.length} pairs from ${forks.length} forks; ${ties} of ${candidates} candidate pairs dropped as ties (downstream scores closer than minMargin ${config.branchDpo.minMargin})`,
    );
    const kept = pairs.map((p) => ({
      prompt: p.prompt,
      chosen: p.chosen,
      rejected: p.rejected,
      tools: forks[0]?.tools,
      chosenScore: p.chosenScore,
      rejectedScore: p.rejectedScore,
    }));
    return { pairs: kept, candidates, ties, forks: forks.length };
  });
  const branch = branchData.pairs;
  await dpoStage("branch-dpo", config.branchDpo, branch, 3);

  // Preserve: W = W₀ + s·ΣΔᵢ in f32. The stages' adapters concatenated with weight s are exactly
  // that delta (lora's combineAdapters), so the shipped adapter and the merged model agree.
  for (const [module, w0] of base.original ?? []) sftAdapter.linear(module).weight = w0;
  const scaled = combineAdapters(
    model,
    stageAdapters.map((adapter) => ({ adapter, weight: config.scale })),
    "arp-scaled",
  );
  const adapterDir = run.file("adapter");
  const baseModel = options.baseModel?.source ?? "in-memory model";
  const recipe = `ARP (SFT${targetedGames.length > 0 ? " → targeted SFT" : ""} → turn-DPO ×2 → branch-DPO; the stages' adapters concatenated, scaled by s = ${config.scale})`;
  const adapterCard = {
    baseModel,
    recipe,
    run: run.metadata,
    title: `${options.name ?? "arp"}: ARP adapter`,
    tags: ["arp"],
  };
  await writeAdapterDir(scaled, adapterDir, adapterCard);
  const report = mergeAdapter(scaled, { scale: 1, dtype: config.mergeDtype, keepOriginal: false });
  await run.stage("merge", async () => {
    run.logMetrics({
      stage: "merge",
      scale: config.scale,
      mean_bf16_delta_loss: report.meanBf16DeltaLoss,
      max_bf16_delta_loss: report.maxBf16DeltaLoss,
    });
    return null;
  });
  log(
    `[kiln arp] merged W₀ + ${config.scale}·ΣΔ in ${config.mergeDtype} (rank ${scaled.config.r} adapter in adapter/)`,
  );
  await evaluate("final");

  const table = phaseTable(phases);
  const modelDir = run.file("model");
  await writeMergedModel(modelDir, model, {
    tokenizer: codec.tokenizer,
    template: codec.template,
    dtype: config.mergeDtype,
    baseModel,
    recipe: `${recipe}, merged in f32 as W₀ + s·ΣΔ`,
    run: run.metadata,
    title: `${options.name ?? "arp"}: ARP (SFT → turn-DPO ×2 → branch-DPO → s = ${config.scale} merge)`,
    body: `## Evaluation (held-out, greedy)\n\n${table}\n\n## Configuration\n\n\`\`\`json\n${JSON.stringify(config, null, 2)}\n\`\`\`\n`,
    tags: ["arp", "lora-merged"],
  });
  await writeAdapterCard(adapterDir, {
    ...adapterCard,
    body: `## Evaluation (held-out, greedy; the merged model)\n\n${table}\n`,
  });
  const result: ArpResult = {
    runDir: run.path,
    sftSize: sftTrain.length,
    holdoutSize: holdout.length,
    sftPerGame,
    unrenderable,
    targeted: { probe, games: targetedGames, size: targetedSize },
    stages,
    phases,
    turnPairs: { b1, b2 },
    turnPairsByMode: {
      b1: byMode["turn-dpo-1"],
      b2: byMode["turn-dpo-2"],
      synthetic: options.corruptTurn !== undefined,
      candidates: { b1: candidatesByMode["turn-dpo-1"], b2: candidatesByMode["turn-dpo-2"] },
    },
    branchPairs: branch.length,
    branch: {
      minMargin: config.branchDpo.minMargin,
      candidates: branchData.candidates,
      ties: branchData.ties,
      forks: branchData.forks,
    },
    meanBf16DeltaLoss: report.meanBf16DeltaLoss,
    modelDir,
    adapterDir,
  };
  await run.writeJson("summary.json", { ...result, phaseTable: table });
  const skipped: Record<string, string> = {
    sft: "no successful source episodes to imitate",
    "targeted-sft": "no successful source episodes of the weakest games",
    "branch-dpo": "no preference pairs (no fork's continuations differed enough in downstream score)",
  };
  await writeReport(run, {
    title: `ARP run ${options.name ?? "arp"}`,
    phases,
    stages: stages.map((s) => ({
      ...s,
      note:
        s.steps > 0
          ? undefined
          : (skipped[s.stage] ??
            (options.corruptTurn
              ? "no synthetic pairs (no good turn of the game admitted the stage's faults)"
              : "no preference pairs (no diagnosed failure of its modes had an expert reply to pair with)")),
    })),
    config,
  });
  const files = await run.finalize();
  log(`[kiln arp] phases:\n${table}\n[kiln arp] wrote ${modelDir}, ${adapterDir}, SHA256SUMS over ${files} files`);
  return result;
}

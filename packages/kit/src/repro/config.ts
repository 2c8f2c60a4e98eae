// Sizes of the repro tables, as overrides of each recipe's default (the seed card's configuration).
// `reproConfig()` is sized so `kiln repro all` (ARP, OPD, OEL, seeds 42 and 43) aims at 30 minutes of 2
// quiet cores; measured end to end it took 39 min, ≈ 34.5 without stolen CPU (ARP ≈ 7 min a seed, OPD 5.5–6,
// OEL 4.5: kit README, "All three"); `reproQuickConfig()` runs
// in seconds (tests, a smoke check). Every field can be changed with --set / --config like the
// recipes' (e.g. `--set "arp.eval.episodes=40;opd.rounds=2"`).
import {
  type ArpConfig,
  type ConfigOverrides,
  type DpoStageSettings,
  type OelConfig,
  type OpdConfig,
  type RecipeConfigOf,
  recipeConfig,
  resolveConfig,
} from "../recipes/presets.js";
import type { ProvenanceLayer } from "../recipes/preset-provenance.js";
import { ARP_EVAL_GAMES, ARP_STATIC_GAMES, type ArpClemConfig } from "./arp-clem.js";

/** Sizes of the questworld teacher's SFT (ReproConfig.opdQuestworld.teacher). */
export interface QuestworldTeacherSettings {
  /** Expert episodes from the wall start (questworldOpdStart) whose windowed turns it trains on. */
  episodes: number;
  /** Assistant turns per expert episode at most. */
  maxTurns: number;
  epochs: number;
  lr: number;
  /** LoRA rank and alpha of the SFT adapter (merged in f32 before the rounds). */
  r: number;
  alpha: number;
  microBatchSize: number;
}

export const OPD_TEACHERS = ["guided", "privileged", "sft", "scaffold"] as const;
export type OpdTeacher = (typeof OPD_TEACHERS)[number];

export interface ReproConfig {
  seed: number;
  arp: ArpConfig;
  opd: OpdConfig;
  oel: OelConfig;
  /** What OPD plays: questworld (Core-3 from the quest-2 wall) or guess-number. */
  opdEnv: "questworld" | "guess-number";
  /**
   * OPD's teacher when --teacher names no directory (all trained or built in the run, opd-teacher.ts):
   * "guided" (questworld only; the default) = the base with a bonus of `opdQuestworld.guidance` nats on
   * every token that continues the expert planner's next call for its state (GuidedPolicy, nothing
   * trained); "privileged" (questworld only) = the base after SFT to act on the expert planner's next call
   * shown in its prompt, given that note for every state it plays or scores; "sft" = the base after
   * SFT on expert turns (questworld) or ARP's phase A (guess-number); "scaffold" = the base with the
   * environment's note in its prompt.
   */
  opdTeacher: OpdTeacher;
  /** Questworld OPD (opdEnv "questworld"). */
  opdQuestworld: {
    /** The "sft" teacher: the base after SFT on expert turns from the wall (opd-teacher.ts). */
    teacher: QuestworldTeacherSettings;
    /**
     * The "privileged" teacher: the base after SFT to act on the expert's note, on states mixed-skill
     * players visit from the wall (`episodes` of them, `maxTurns` turns each; opd-teacher.ts).
     */
    privilegedTeacher: QuestworldTeacherSettings;
    /**
     * The "guided" teacher's bonus, in nats, on the token that continues the expert's call (GuidedPolicy).
     * 8: the base copies the call on 24 of 24 held-out states and passes the wall 9/9; at 4 it copies 22
     * and passes 0/9 (kit README, "OPD on questworld").
     */
    guidance: number;
    /**
     * Which model the guided teacher tilts in the rounds: "base" (the default: a fixed copy of the base) or
     * "student" (each round, the student as its rollouts found it — a teacher as close to the student as it
     * gets, whose advantage is the tilt alone). The teacher's row evaluates the guided base either way.
     */
    guideFrom: "base" | "student";
    /** Assistant turns per evaluated agent (rollouts take opd.rollout.maxTurns). */
    evalTurns: number;
    /** Student turns teacher-scored and trained on per round: a seeded draw from the round's rollouts. */
    turnsPerRound: number;
    /**
     * Training starts per archetype and round on the expert planner's own way through the wall (the state
     * after k of its calls from a wall start, k spread over the calls before the hand-in), beside
     * `heldout.questworldStartsPerArchetype` wall starts; each takes `heldout.questworldSamplesPerStart`
     * rollouts. 0 (the default) adds none.
     */
    pathStartsPerArchetype: number;
  };
  /** Held-out instances (seeds disjoint from every training seed). */
  heldout: {
    /** Questworld OPD: Core-3 evaluation seeds (held out: training starts use seeds ≥ 1,000,000). */
    questworldSeeds: number[];
    /** Questworld OPD: wall-state training starts per archetype and round. */
    questworldStartsPerArchetype: number;
    /** Questworld OPD: rollouts from each wall-state start per round (the seed's "samples per state"). */
    questworldSamplesPerStart: number;
    /** Guess-number OPD (until questworld's setup is wired): greedy episodes from this seed base. */
    opdEpisodes: number;
    opdBaseSeed: number;
    /** OEL: tau2 retail test-split tasks evaluated (never deployed on); trial t's episode seed is oelBaseSeed + t. */
    oelTasks: number;
    oelBaseSeed: number;
  };
  /** The static score: mean NLL per token (and perplexity) on a fixed held-out text set. */
  staticScore: { maxTexts: number; windowTokens: number };
  /** ARP's clemscore and statscore per phase: which held-out clembench instances every phase plays. */
  arpClem: ArpClemConfig;
  ablations: {
    /** Delta scales re-merged from the same ARP delta (no retraining). */
    scales: number[];
    earlyTurnWeights: number[];
    /** OPD advantage clamps; 0 = no clamp. */
    clamps: number[];
  };
}

/** The DPO stages of the repro ARP table: one epoch, lr 10× below SFT's (see REPRO_SIZES). */
const REPRO_DPO: ConfigOverrides<DpoStageSettings> = {
  warmupRatio: 0.1,
  lr: 3e-4,
  microBatchSize: 2,
  gradAccum: 1,
  maxLength: 512,
  checkpointEvery: 1000,
};

/**
 * What the repro tables change in each recipe's default (the seed card's configuration), sized on the
 * embedded agent model (853k parameters), measured on 2 shared cores with wasm. The DPO and OPD
 * learning rates are 10× below SFT's: at 2e-3 a DPO stage on 26 invalid-move pairs, or an OPD round,
 * collapsed the policy (score 0.57 → 0.20, and 0.22 → 0.00).
 */
export const REPRO_SIZES: {
  arp: ConfigOverrides<ArpConfig>;
  opd: ConfigOverrides<OpdConfig>;
  oel: ConfigOverrides<OelConfig>;
} = {
  arp: {
    // Per game (ARP trains on arpClem.games): 96 expert episodes (Wordle: its 24 training instances × 4
    // opening words; acquiring all 768 takes ~5 CPU-s), at most 4 successful ones each in A (privateshared's
    // become ~6 documents each, its player's views); A2 on the 2 weakest games, 4 episodes each.
    // Training costs ~1.6 CPU-ms per token (forward + backward, wasm): 12 per game at 1024 tokens,
    // 2 epochs, was ~8 CPU-minutes for A alone; 512 tokens keeps each conversation's end (left truncation).
    data: { capPerGame: 4, holdoutFraction: 0.1, sourceEpisodes: 96 },
    sft: {
      ...REPRO_DPO,
      epochs: 2,
      lr: 4e-3,
      microBatchSize: 4,
      gradAccum: 2,
      maxLength: 512,
      gradientCheckpointing: false,
    },
    targetedSft: {
      ...REPRO_DPO,
      lr: 4e-3,
      microBatchSize: 4,
      maxLength: 512,
      weakestGames: 2,
      probeEpisodes: 1,
      capPerGame: 4,
    },
    // B1/B2: synthetic Wordle pairs, 16 per failure mode (32 a stage), two corruptions tried per good turn.
    // studentEpisodes only matters without a turn corruption (Wordle has one: the pairs are synthetic).
    turnDpo1: { ...REPRO_DPO, studentEpisodes: 24, pairsPerMode: 16, variantsPerTurn: 2, maxLength: 512 },
    turnDpo2: { ...REPRO_DPO, studentEpisodes: 24, pairsPerMode: 16, variantsPerTurn: 2, maxLength: 512 },
    branchDpo: { ...REPRO_DPO, k: 3, forks: 8, maxLength: 512 },
    // Wordle: six rounds plus reprompts; runArp's own evaluation plays its six held-out instances.
    rollout: { maxTokens: 48, maxTurns: 12 },
    eval: { episodes: 6 },
    maxChars: 200,
  },
  // The seed's adapter (r 64, α 64, no rsLoRA) and the seed's objective (the default's): the sampled-token
  // advantage −(log q − log p_T), clamp ±3, PPO-clipped, turn 0 weighted 1.5. The top-20 reverse KL
  // (GKD λ = 1) is the `objective` ablation's second arm, the top-20 forward KL its third (kit README, "Why the
  // rounds do not pass the wall"). Questworld rounds: 2
  // fresh-start rollouts (quest 1) + the seeded wall starts (heldout.questworld*: 1 per archetype × 2
  // samples); guess-number's table ran 64 a round with the reverse KL.
  opd: {
    rounds: 3,
    episodesPerRound: 2,
    // One packed sample per episode (every turn's tokens in one pass, 4.3× fewer tokens than per-turn
    // samples here) and one episode per step: about the turns per step of 4 × 2 per-turn samples.
    packTurns: true,
    train: { lr: 1e-3, microBatchSize: 1, gradAccum: 1, maxLength: 1024, epochs: 2, checkpointEvery: 1000 },
    // A guess-number reply is 28 tokens with this tokenizer, a questworld call up to ~45. Questworld
    // rollouts take 24 turns (the expert hands the moonpetals in at turn 16–20 from most wall starts),
    // evaluations opdQuestworld.evalTurns = 24 on seeds 0–2, where the expert hands in at turn 16–20 (seed 3
    // needs 32–33; at 16 turns no policy, the expert included, could pass the wall).
    rollout: { maxTokens: 64, maxTurns: 24 },
    eval: { seeds: [1, 2, 3, 4, 5, 6] },
  },
  // OEL on tau2 retail: deploy on the first `tasks` train-split tasks, evaluate on `heldout.oelTasks`
  // test-split tasks × 3 greedy trials (the seed's protocol). lr 5e-5 (the default's) is the top of the
  // authors' LoRA range (the seed card as kiln's issue tracker states it: kiln's earlier 5e-4 was 10×
  // their upper bound). kiln's LoRA is the same update (W + α/r·BA, AdamW), kept in f32 where the seed
  // trains bf16: Adam's step does not scale with the gradient, so the lr carries over as is; f32 only
  // keeps the small updates bf16 would round away. maxLength 4096 (the seed's) holds a retail prompt
  // (~3.9k tokens).
  oel: {
    lora: { r: 8, alpha: 16 },
    // 4 train tasks deployed and consolidated (OEL's share of `repro all` for two seeds: 8 took 594 CPU-seconds
    // a seed on wasm before the scheduler's prefix cache), evaluated on all 40 test tasks (heldout.oelTasks) × 3
    // trials as the seed does. Measured inside `kiln repro all` on the 2026-12-06 agent model (native, 2 quiet AMD
    // EPYC cores): 378.5 s wall for seed 42 and 126.6 s for seed 43, which takes seed 42's base and bound rows
    // (OelEvaluationCache; kit README, "Measured on the 2026-12-06 agent model, every held-out instance"). The
    // 102–119 s a seed measured on 2026-12-02 were the previous model's (sha edcc89ad…).
    tasks: 4,
    train: { microBatchSize: 2, checkpointEvery: 1000 },
    // Room for a task's gold solution: the scripted oracle passes 40 of the 40 test tasks within 30 replies
    // (16 within 4, the earlier cap), and a gold call takes up to 159 tokens (median 48) in the agent
    // model's vocabulary. tau2's own limit is 200 steps; the embedded model ends its episodes within a few.
    rollout: { maxTokens: 192, maxTurns: 30 },
  },
};

/** Why the repro sizes take the values they do (path patterns as in DEFAULT_SOURCES); the rest: REPRO_ABOUT. */
export const REPRO_WHY: Record<"arp" | "opd" | "oel", [string, string][]> = {
  arp: [
    [
      "data",
      "96 acquired episodes per game, at most 4 successful ones per game in A: phase A's training fits the budget (the seed: ≤ 700 per game)",
    ],
    ["*.maxLength", "512 tokens (the conversation's end): training costs ~1.6 CPU-ms per token on wasm"],
    ["turnDpo*.pairsPerMode", "16 synthetic pairs per failure mode (32 a stage) fit the budget (the seed: ~3.8k)"],
    [
      "*Dpo*.lr",
      "3e-4, 10× below SFT's: at 2e-3 a DPO stage on 26 invalid-move pairs collapsed the policy (0.57 → 0.20)",
    ],
    ["rollout.maxTurns", "Wordle's six rounds plus reprompts"],
  ],
  opd: [
    ["episodesPerRound", "2 fresh-start rollouts a round beside the 6 seeded wall starts: OPD's share of repro all"],
    ["packTurns", "one packed sample per episode: 4.3× fewer tokens than per-turn samples, the same per-token loss"],
    ["train.lr", "1e-3 (2e-3 collapsed a round: 0.22 → 0.00)"],
    ["rollout.maxTokens", "a guess-number reply is 28 tokens, a questworld call up to ~45"],
  ],
  oel: [
    ["lora", "a smaller adapter for 2 CPU cores"],
    ["tasks", "4 train-split tasks to deploy and consolidate on: OEL's share of repro all, two seeds"],
  ],
};
export const REPRO_ABOUT = "sized for 2 CPU cores and the embedded agent model";

/** The override layers of a repro table's recipe configuration, for its provenance block. */
export function reproLayers<R extends "arp" | "opd" | "oel">(
  recipe: R,
  quick: boolean,
): ProvenanceLayer<RecipeConfigOf<R>>[] {
  const layers: ProvenanceLayer<RecipeConfigOf<R>>[] = [
    {
      label: "repro",
      overrides: REPRO_SIZES[recipe] as ConfigOverrides<RecipeConfigOf<R>>,
      why: REPRO_WHY[recipe],
      about: REPRO_ABOUT,
    },
  ];
  const q = REPRO_QUICK[recipe];
  if (quick && q)
    layers.push({
      label: "--quick",
      overrides: q as ConfigOverrides<RecipeConfigOf<R>>,
      about: "seconds-scale pipeline check",
    });
  return layers;
}

/** One training step of every stage: what --quick changes in the stages of the budget-sized tables. */
const QUICK_STAGE = { maxSteps: 1, epochs: 1, microBatchSize: 1, gradAccum: 1, maxLength: 256 };

/** What --quick changes in the budget-sized configuration: seconds-scale, every row and column exists. */
export const REPRO_QUICK: ConfigOverrides<ReproConfig> = {
  arp: {
    lora: { r: 2, alpha: 4 },
    data: { capPerGame: 2, holdoutFraction: 0, sourceEpisodes: 2 },
    sft: QUICK_STAGE,
    targetedSft: { ...QUICK_STAGE, weakestGames: 1, probeEpisodes: 1, capPerGame: 1 },
    turnDpo1: { ...QUICK_STAGE, studentEpisodes: 1, pairsPerMode: 1, variantsPerTurn: 1 },
    turnDpo2: { ...QUICK_STAGE, studentEpisodes: 1, pairsPerMode: 1, variantsPerTurn: 1 },
    branchDpo: { ...QUICK_STAGE, forks: 1, k: 2 },
    rollout: { temperature: 1, maxTokens: 6, maxTurns: 2 },
    eval: { episodes: 3, baseSeed: 100_000 },
  },
  opd: {
    lora: { r: 2, alpha: 2 },
    rounds: 3,
    episodesPerRound: 1,
    wallStarts: false,
    train: QUICK_STAGE,
    rollout: { temperature: 1, maxTokens: 6, maxTurns: 2 },
    eval: { seeds: [1, 2, 3] },
  },
  oel: {
    lora: { r: 2, alpha: 4 },
    tasks: 1,
    train: { ...QUICK_STAGE, maxLength: 8192 },
    rollout: { temperature: 1, maxTokens: 6, maxTurns: 1 },
    eval: { trials: 3, temperature: 0 },
  },
  heldout: {
    questworldSeeds: [0, 1],
    questworldStartsPerArchetype: 1,
    questworldSamplesPerStart: 1,
    opdEpisodes: 3,
    opdBaseSeed: 300_000,
    oelTasks: 2,
    oelBaseSeed: 200_000,
  },
  opdQuestworld: {
    teacher: { episodes: 1, maxTurns: 2, epochs: 1, r: 2, alpha: 4 },
    privilegedTeacher: { episodes: 1, maxTurns: 2, epochs: 1, r: 2, alpha: 4 },
    evalTurns: 2,
    turnsPerRound: 8,
    pathStartsPerArchetype: 0,
  },
  staticScore: { maxTexts: 3, windowTokens: 32 },
  arpClem: { instancesPerGame: 1, staticInstances: 1, maxTokens: 8, maxTurns: 3 },
};

function withSeed(c: ReproConfig, seed: number): ReproConfig {
  c.seed = seed;
  c.arp.seed = seed;
  c.opd.seed = seed;
  c.oel.seed = seed;
  return c;
}

/** The budget-sized configuration: each recipe's default with REPRO_SIZES merged on, and the held-out sets. */
export function reproConfig(seed = 42): ReproConfig {
  return withSeed(
    {
      seed,
      arp: recipeConfig("arp", REPRO_SIZES.arp),
      opd: recipeConfig("opd", REPRO_SIZES.opd),
      oel: recipeConfig("oel", REPRO_SIZES.oel),
      opdEnv: "questworld",
      opdTeacher: "guided",
      // Questworld OPD sized for its share of `repro all`: an evaluation is 3 seeds × 3 archetypes × 24
      // turns (was 4 × 3 × 40; a batched evaluation costs about its turns, not its agents), the teacher's
      // SFT 3 expert wall episodes, each round 8 rollouts (2 fresh, 3 wall starts × 2 samples) and 32
      // teacher-scored turns.
      opdQuestworld: {
        teacher: { episodes: 3, maxTurns: 22, epochs: 2, lr: 4e-3, r: 16, alpha: 32, microBatchSize: 8 },
        privilegedTeacher: { episodes: 6, maxTurns: 24, epochs: 3, lr: 1e-2, r: 16, alpha: 32, microBatchSize: 4 },
        guidance: 8,
        guideFrom: "base",
        evalTurns: 24,
        turnsPerRound: 32,
        pathStartsPerArchetype: 0,
      },
      heldout: {
        questworldSeeds: [0, 1, 2],
        questworldStartsPerArchetype: 1,
        questworldSamplesPerStart: 2,
        opdEpisodes: 100,
        opdBaseSeed: 300_000,
        // tau2 retail's whole test split, as the seed evaluates (40 tasks × 3 greedy trials)
        oelTasks: 40,
        oelBaseSeed: 200_000,
      },
      staticScore: { maxTexts: 32, windowTokens: 128 },
      // Every held-out instance of each game (82 episodes a phase: the agent model's own clembench benchmark's
      // set, so the base row equals the model card's clemscore) and 3 of each static benchmark. With 3 per game
      // (24 episodes) the base read 37.57 ± 6.09 against 19.28 ± 3.57 on all of them; all of them cost ~11 s wall
      // more a phase on 2 cores (kit README).
      // imagegame capped at 20 turns: the base never said DONE and played all 40 (79 of its phase's 111 CPU-s);
      // the expert's training episodes take 11 turns (median), 16 (p90), 26 (max). The agent model's own
      // benchmark lets imagegame run to the game's own limit (scored there); here an episode cut at 20 counts
      // as aborted: `--set arpClem.turnCaps.imagegame=60` plays to that limit, at several times this game's cost.
      arpClem: {
        games: [...ARP_EVAL_GAMES],
        instancesPerGame: 0,
        staticGames: [...ARP_STATIC_GAMES],
        staticInstances: 3,
        maxTokens: 64,
        maxTurns: 80,
        turnCaps: { imagegame: 20 },
        // Replies through the batching scheduler (here and in runArp's probe, rollouts and evaluation): with its
        // prefix cache the games' long shared prompts are prefilled once; seed 42 on native, the same tables as one
        // plain generate per reply, each phase's clemscore+statscore 11–12 CPU-s against 23–26 (kit README).
        batching: true,
      },
      ablations: { scales: [0.7, 0.85, 1], earlyTurnWeights: [1, 1.5], clamps: [3, 0] },
    },
    seed,
  );
}

/** Seconds-scale sizes: every row and column exists, the numbers mean little. */
export function reproQuickConfig(seed = 42): ReproConfig {
  return resolveConfig(reproConfig(seed), REPRO_QUICK);
}

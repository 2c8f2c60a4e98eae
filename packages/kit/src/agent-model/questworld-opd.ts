// The questworld evaluation behind the embedded agent model's OPD table, shaped for the repro's
// time budget. A full Core-3 episode is 145–300 turns; here every agent starts at the quest-2 wall
// with the skill to pass it (questworldOpdStart: quest 1 done, The Healer's Remedy accepted,
// foraging 5) and gets `maxTurns` turns, so the score is the stage reached (4 at the start, 10 at the
// end of the chain) and the wall table says which of the six remaining stages held each agent up.
// The model plays from the questworld window (questworldView), in evaluation, in OPD's rollouts
// and in the teacher's scoring alike.
import { questworld } from "@kiln/benchmarks";
import {
  type EpisodeSpec,
  type Environment,
  type Message,
  type Policy,
  type Trajectory,
  deriveSeed,
  mulberry32,
} from "@kiln/rollout";
import { RecipeError } from "../errors.js";
import type { OpdEvaluation } from "../recipes/opd.js";
import { ROLLOUT_CONCURRENCY } from "../recipes/recipe-run.js";
import { questworldOpdStart, questworldTrainSeed } from "./questworld-corpus.js";
import { QUESTWORLD_WINDOW_KEEP, WindowedPolicy, questworldView } from "./questworld-window.js";

export interface QuestworldOpdSetupOptions {
  /** Evaluation seeds (default [0, 1, 2]); must stay below QUESTWORLD_TRAIN_SEED_BASE. */
  seeds?: number[];
  /**
   * Assistant turns per evaluated agent (default 40): the expert planner gathers every herb before it
   * walks back, so it hands the moonpetals in at turn 16–33 from this start; a budget under that
   * scores even the expert as stuck at the wall.
   */
  maxTurns?: number;
  /** Tokens per reply (default 64). */
  maxTokens?: number;
  keep?: number;
  opening?: boolean;
  /** Foraging level of the start (default 5). */
  foragingLevel?: number;
  /** Seeds the rounds' training starts. */
  seed?: number;
  /** Training starts per archetype per round (default 2). */
  startsPerArchetype?: number;
  /** Rollouts from each training start (default 1): the same state, another world and sampling seed each. */
  samplesPerStart?: number;
  /**
   * Training starts per archetype per round on the expert planner's own way through the wall (default 0):
   * each is the state the planner reaches from a wall start after k of its calls, k spread over the calls
   * before the moonpetal hand-in (expertWallPath), so a round also trains where its own rollouts rarely
   * get — carrying the moonpetals, on the way back to Ysolde. Each takes `samplesPerStart` rollouts too.
   */
  pathStartsPerArchetype?: number;
}

export interface QuestworldOpdEvaluation extends OpdEvaluation {
  core3: questworld.Core3Result;
  seconds: number;
}

export interface QuestworldOpdSetup {
  makeEnv: () => Environment;
  /** The student's view for OpdOptions.view. */
  view: (messages: Message[]) => Message[];
  /** Core-3 from the wall start over `seeds`: per-seed totals (of 30) and the wall table. */
  evaluate: (policy: Policy | questworld.PolicyFactory) => Promise<QuestworldOpdEvaluation>;
  /** Each round's seeded training starts (the evaluation's start, training seeds), for OpdOptions.starts. */
  starts: (round: number) => EpisodeSpec[];
  /** For OpdConfig.rollout: turns per episode and tokens per reply. */
  limits: { maxTurns: number; maxTokens: number };
  seeds: number[];
}

/** The wall: The Healer's Remedy's moonpetal hand-in, the stage it reaches (quests.ts). */
const WALL_STAGE = 2;
export const QUESTWORLD_WALL_LABEL = questworld.QUEST_INFO.healers_remedy.stages[WALL_STAGE - 1];

function stagesOf(info: unknown): Partial<Record<questworld.QuestId, number>> | undefined {
  const stages = (info as { stages?: unknown } | undefined)?.stages;
  return stages && typeof stages === "object" ? (stages as Partial<Record<questworld.QuestId, number>>) : undefined;
}

/**
 * Whether turn `turn` of a questworld rollout was played at the wall: quest 1 finished and the
 * moonpetals not yet handed in, read from the stages the environment reported before the turn
 * (the last executed step's, else the reset's).
 */
export function atQuestworldWall(trajectory: Trajectory, turn: number): boolean {
  // A malformed reply is not executed and records no info: the stages are those of the last executed step.
  let before: ReturnType<typeof stagesOf>;
  for (let t = turn - 1; t >= 0 && !before; t--) before = stagesOf(trajectory.turns[t]?.info);
  before ??= stagesOf(trajectory.metadata.resetInfo);
  if (!before) return false;
  const timberDone = (before.timber_for_the_mill ?? 0) >= questworld.QUEST_INFO.timber_for_the_mill.stages.length;
  return timberDone && (before.healers_remedy ?? 0) < WALL_STAGE;
}

/**
 * The expert planner's way through the wall from `start` (episode seed `seed`, as the environment plays
 * it): the state before each of its calls, from `start` itself to the state whose next call hands the
 * moonpetals in. Throws if the planner does not reach the hand-in within the start's call budget.
 */
export function expertWallPath(start: questworld.QuestworldState, seed: number): questworld.QuestworldState[] {
  const env = new questworld.QuestworldEnvironment();
  env.reset({ seed, state: start });
  const path: questworld.QuestworldState[] = [];
  for (let turn = 0; ; turn++) {
    const state = env.getState();
    path.push(state);
    const call = questworld.nextExpertCall(state);
    if (!call) break;
    const result = env.step({
      message: { role: "assistant", content: null },
      toolCalls: [{ id: `call_${turn}`, name: call.name, arguments: call.arguments }],
    });
    if ((stagesOf(result.info)?.healers_remedy ?? 0) >= WALL_STAGE) return path;
    if (result.done) break;
  }
  throw new RecipeError(
    `expertWallPath: the expert planner did not hand the moonpetals in from this ${start.archetype} start (seed ${seed})`,
  );
}

export function questworldOpdSetup(options: QuestworldOpdSetupOptions = {}): QuestworldOpdSetup {
  const seeds = options.seeds ?? [0, 1, 2];
  const maxTurns = options.maxTurns ?? 40;
  const maxTokens = options.maxTokens ?? 64;
  const keep = options.keep ?? QUESTWORLD_WINDOW_KEEP;
  const foragingLevel = options.foragingLevel ?? 5;
  const perArchetype = options.startsPerArchetype ?? 2;
  const perStart = options.samplesPerStart ?? 1;
  const pathStarts = options.pathStartsPerArchetype ?? 0;
  const seed = options.seed ?? 0;
  if (seeds.length < 2) throw new RecipeError("questworldOpdSetup: at least 2 seeds are needed for a standard error");
  for (const s of seeds)
    if (!Number.isSafeInteger(s) || s < 0 || s >= 1_000_000)
      throw new RecipeError(
        `questworldOpdSetup: seed ${s} must be an integer in [0, 1000000) (training seeds lie above)`,
      );
  for (const [name, v] of [
    ["maxTurns", maxTurns],
    ["maxTokens", maxTokens],
    ["startsPerArchetype", perArchetype],
    ["samplesPerStart", perStart],
  ] as const)
    if (!Number.isSafeInteger(v) || v < 1)
      throw new RecipeError(`questworldOpdSetup: ${name} must be a positive integer, got ${v}`);
  if (!Number.isSafeInteger(pathStarts) || pathStarts < 0)
    throw new RecipeError(
      `questworldOpdSetup: pathStartsPerArchetype must be a non-negative integer, got ${pathStarts}`,
    );
  const view = questworldView(keep, { opening: options.opening });
  const windowed = (p: Policy) => new WindowedPolicy(p, { keep, opening: options.opening });

  const evaluate = async (policy: Policy | questworld.PolicyFactory): Promise<QuestworldOpdEvaluation> => {
    const t0 = performance.now();
    const core3 = await questworld.evaluateCore3({
      policy: typeof policy === "function" ? (ctx) => windowed(policy(ctx)) : windowed(policy),
      seeds,
      maxTurns,
      start: (archetype, s) => questworldOpdStart(archetype, s, foragingLevel),
      params: { maxTokens, temperature: 0 },
      concurrency: ROLLOUT_CONCURRENCY,
    });
    return {
      scores: Object.fromEntries(core3.perSeed.map((s) => [`seed-${s.seed}`, s.total])),
      wall: {
        label: QUESTWORLD_WALL_LABEL,
        passed: Object.fromEntries(
          core3.episodes.map((e) => [`seed-${e.seed}-${e.archetype}`, e.stages.healers_remedy >= WALL_STAGE ? 1 : 0]),
        ),
      },
      table: [
        ["#", "quest stage", "passed", "of", "stopped here"],
        ...core3.wall.map((w) => [w.index, w.label, w.passed, w.of, w.stoppedHere]),
      ],
      core3,
      seconds: (performance.now() - t0) / 1000,
    };
  };

  // Sample k of a start reuses the start's state; its episode seed (world and sampling) is the start's
  // for k = 0, so samplesPerStart = 1 plays exactly the starts it always did. A path start's sample 0
  // keeps the planner's episode seed, so its world goes on with the random stream the planner left.
  const samples = (id: string, s: number, state: questworld.QuestworldState, sampleSeed: (k: number) => number) =>
    Array.from({ length: perStart }, (_, k) => ({
      id: k === 0 ? id : `${id}-s${k}`,
      seed: k === 0 ? s : sampleSeed(k),
      state,
    }));
  const starts = (round: number): EpisodeSpec[] =>
    questworld.ARCHETYPES.flatMap((archetype) => [
      ...Array.from({ length: perArchetype }, (_, i) => {
        const s = questworldTrainSeed(seed, "questworld-opd-start", round, archetype, i);
        const state = questworldOpdStart(archetype, s, foragingLevel);
        return samples(`wall-${archetype}-r${round}-${i}`, s, state, (k) =>
          questworldTrainSeed(seed, "questworld-opd-sample", round, archetype, i, k),
        );
      }).flat(),
      ...Array.from({ length: pathStarts }, (_, i) => {
        const s = questworldTrainSeed(seed, "questworld-opd-path-start", round, archetype, i);
        const path = expertWallPath(questworldOpdStart(archetype, s, foragingLevel), s);
        // Stratified over the calls before the hand-in (at least one played), jittered per start.
        const u = mulberry32(deriveSeed(seed, "questworld-opd-path-call", round, archetype, i))();
        const k = 1 + Math.min(path.length - 2, Math.floor(((i + u) * (path.length - 1)) / pathStarts));
        return samples(`wall-path-${archetype}-r${round}-${i}-c${k}`, s, path[k], (j) =>
          questworldTrainSeed(seed, "questworld-opd-path-sample", round, archetype, i, j),
        );
      }).flat(),
    ]);

  return {
    makeEnv: () => new questworld.QuestworldEnvironment(),
    view,
    evaluate,
    starts,
    limits: { maxTurns, maxTokens },
    seeds: [...seeds],
  };
}

// codenames (clembench a717f238 `codenames/`): a cluegiver and a guesser against a mock opponent.
import { PythonRandom } from "../../../tau2/python-random.js";
import { readDataJson, resolveDataDir } from "../../data-dir.js";
import type { GameContext, GameDefinition } from "../../game.js";
import { type Experiment, type GameInstance, type InstancesFile, parseInstancesFile } from "../../instances.js";
import type { PlayerBackend } from "../../player.js";
import { EpisodeSequencer } from "./episode-sequencer.js";
import { CodenamesMaster } from "./master.js";
import { CodenamesScorer } from "./scorer.js";

/** `constants.SEED`: `CodenamesGameBenchmark.__init__` calls `random.seed(42)` once per benchmark run. */
export const CODENAMES_SEED = 42;

/**
 * The codenames game with its own Python `random` state. The reference seeds it once when the benchmark
 * starts and the mock opponent draws from it in every episode, so an episode's draws depend on the episodes
 * played before it. Episodes therefore play one after the other in the order their masters were created (the
 * runner's episode order), whatever the runner's concurrency; a master must be played (or fail its setup) for
 * later codenames episodes to start. Use a fresh definition (`createCodenames()`) or `resetRandom()` per
 * benchmark run to reproduce a reference run.
 */
export interface CodenamesDefinition extends GameDefinition {
  /** The shared generator (Python MT19937). */
  readonly rng: PythonRandom;
  /** `random.seed(seed)`, as at benchmark start; also restarts the episode order. */
  resetRandom(seed?: number): void;
}

export function createCodenames(seed = CODENAMES_SEED): CodenamesDefinition {
  const rng = new PythonRandom(seed);
  const sequencer = new EpisodeSequencer();
  return {
    name: "codenames",
    players: 2,
    roles: ["Cluegiver", "Guesser"],
    rng,
    resetRandom(s = CODENAMES_SEED) {
      rng.seed(s);
      sequencer.reset();
    },
    // Every runBenchmark run starts from random.seed(seed), like a fresh `clem run`.
    startRun() {
      rng.seed(seed);
      sequencer.reset();
    },
    createMaster: (experiment: Experiment, backends: PlayerBackend[], ctx: GameContext) =>
      new CodenamesMaster("codenames", experiment, backends, ctx, rng, sequencer),
    createScorer: (experiment: Experiment, instance: GameInstance) =>
      new CodenamesScorer("codenames", experiment, instance),
  };
}

/**
 * A codenames instance file: `instances` (the v2.0 set the runner plays) or `generous_instances` (the same
 * boards with every relaxing flag on; play it with `listEpisodes("codenames", file)` and `playEpisode`).
 */
export function loadCodenamesInstances(
  variant: "instances" | "generous_instances" = "instances",
  dataDir?: string,
): InstancesFile {
  const file = `${variant}.json`;
  return parseInstancesFile(readDataJson(resolveDataDir(dataDir), "codenames", file), `codenames/${file}`);
}

/** The registered codenames game: `runBenchmark` reseeds it (42) at the start of every run, as each `clem run` does. */
export const codenames: CodenamesDefinition = createCodenames();

export { ASSASSIN, type Assignment, type BoardStatus, CodenamesBoard, INNOCENT, OPPONENT, TEAM } from "./board.js";
export { EpisodeSequencer } from "./episode-sequencer.js";
export { type CodenamesFlags, FLAG_NAMES, parseFlags } from "./flags.js";
export {
  BOARD_END_STATUS,
  CodenamesMaster,
  GAME_ENDED_THROUGH_ASSASSIN,
  MAX_RETRIES,
  NUMBER_OF_TURNS,
  TurnLogs,
} from "./master.js";
export { addSpaceAfterComma, CHARS_TO_STRIP, ClueGiver, Guesser, NUMBERS_TO_STRIP } from "./players.js";
export { pyMean, rationalToDouble } from "./python-mean.js";
export { pySample, randbelow } from "./python-sample.js";
export { CodenamesScorer, TURN_SCORES } from "./scorer.js";
export { type CluegiverMode, type CodenamesScriptOptions, codenamesCluegiver, codenamesGuesser } from "./scripted.js";
export { templateSubstitute } from "./template.js";
export { CodenamesRuleViolation, ErrorType as CodenamesErrorType } from "./validation-errors.js";
export { loadWordNetLemmatizer, WordNetLemmatizer, type WordNetNounTable } from "./wordnet-lemmatizer.js";

import type { DialogueGameMaster } from "./dialogue-game-master.js";
import type { Experiment, GameInstance } from "./instances.js";
import type { PlayerBackend } from "./player.js";
import type { GameScorer } from "./scorer.js";

/** What a game master may need beyond the instance: the resolved data directory. */
export interface GameContext {
  dataDir: string;
}

/** A clembench game: how to build its master for an episode and its scorer for the record. */
export interface GameDefinition {
  /** Directory name in results and in data/clembench (e.g. "wordle_withclue"). */
  readonly name: string;
  /** Folder below data/clembench holding instances.json (default: `name`). */
  readonly dataPath?: string;
  /** Number of LLM players (programmatic partners are not counted). */
  readonly players: number;
  /** Roles of the LLM players, in call order. */
  readonly roles: readonly string[];
  /**
   * Called by `runBenchmark` once per run before the game's first episode is created: reset state
   * that a reference benchmark sets up once per run (codenames seeds Python's `random` here).
   */
  startRun?(): void;
  createMaster(experiment: Experiment, backends: PlayerBackend[], ctx: GameContext): DialogueGameMaster;
  createScorer(experiment: Experiment, instance: GameInstance): GameScorer;
}

import { ScoringError } from "./errors.js";
import type { GameContext, GameDefinition } from "./game.js";
import type { EpisodeSpec } from "./instances.js";
import type { Interactions } from "./interactions.js";
import * as M from "./metrics.js";
import type { PlayerBackend } from "./player.js";
import { parsePyJson, pyJsonDumps, toNumber } from "./py.js";
import type { ScoresFile } from "./scorer.js";

export interface EpisodeResult {
  game: string;
  experiment: string;
  gameId: number | string;
  interactions: Interactions | null;
  /** null when the reference writes no scores.json (a scorer error, or the episode itself failed) */
  scores: ScoresFile | null;
  /** why the episode or its scoring failed */
  error?: string;
}

/** Score an interactions record as clemcore does after the run (the record is read back from JSON first). */
export function scoreEpisode(def: GameDefinition, spec: EpisodeSpec, interactions: Interactions): ScoresFile {
  const record = parsePyJson(pyJsonDumps(interactions)) as Interactions;
  const scorer = def.createScorer(spec.experiment, spec.instance);
  scorer.computeScores(record);
  return scorer.scores;
}

/**
 * Play one episode: build the game master, run the turn loop with the given players (one backend per LLM
 * role, or one for all), then score it. A failing player call ends the episode without scores, as in
 * clemcore's runner; a scorer that raises in the reference leaves `scores` null.
 */
export async function playEpisode(
  def: GameDefinition,
  spec: EpisodeSpec,
  backends: PlayerBackend[],
  ctx: GameContext,
): Promise<EpisodeResult> {
  const base = { game: def.name, experiment: spec.experiment.name, gameId: spec.instance.game_id };
  const players = backends.length === 1 && def.players > 1 ? new Array(def.players).fill(backends[0]) : backends;
  const master = def.createMaster(spec.experiment, players, ctx);
  try {
    await master.setup(spec.instance);
    await master.play();
  } catch (e) {
    const interactions = master.recorder ? master.recorder.interactions : null;
    return { ...base, interactions, scores: null, error: `episode failed: ${(e as Error).message}` };
  }
  const interactions = master.recorder.interactions;
  try {
    return { ...base, interactions, scores: scoreEpisode(def, spec, interactions) };
  } catch (e) {
    if (e instanceof ScoringError) return { ...base, interactions, scores: null, error: e.message };
    throw e;
  }
}

/** Outcome of a scored episode: "success" | "lose" | "aborted" (null without scores). */
export function episodeOutcome(scores: ScoresFile | null): "success" | "lose" | "aborted" | null {
  if (!scores) return null;
  const s = scores["episode scores"];
  if (toNumber(s[M.METRIC_ABORTED]) === 1) return "aborted";
  if (toNumber(s[M.METRIC_SUCCESS]) === 1) return "success";
  return "lose";
}

// The embedded agent model's clembench measurement: a policy plays every held-out instance of each game
// (clem-split.ts) through ClemGameEnvironment, from the player's view (clemPlayerView), beside the same scripted partners its corpus was made
// with, and clemeval's own table (clemTable) turns the episode scores into quality, % played and
// clemscore. An aborted episode's Main Score is NaN, as clemcore writes it (the environment reports 0).
import { clembench } from "@kiln/benchmarks";
import { type GenerateParams, type Policy, type Trajectory, runEpisodes } from "@kiln/rollout";
import { type AgentClemGame, clemEnvironment, clemPlayer, clemViewPolicy } from "./clem-players.js";
import { clemSplitIndices, isHeldOutInstance } from "./clem-split.js";
import { wordlePlayer, wordleVocabulary } from "./wordle-players.js";

/** Turn limits per game at evaluation: above what the games allow, so the game ends them. */
export const EVAL_MAX_TURNS: Record<AgentClemGame, number> = {
  wordle: 10,
  wordle_withclue: 10,
  wordle_withcritic: 20,
  taboo: 6,
  referencegame: 3,
  imagegame: 60, // the game itself stops at 2 × 25 rounds
  privateshared: 80,
  guesswhat: 12,
};

export interface ClemEvalOptions {
  games: readonly AgentClemGame[];
  /** The player; a function of the game and instance for scripted players that read their instance. */
  policy: Policy | ((game: AgentClemGame, instance: clembench.GameInstance) => Policy);
  /** The model's name in the table. */
  model: string;
  params?: GenerateParams;
  /** Episodes in flight at once (a shared policy only; default 1). */
  concurrency?: number;
}

export interface ClemEvalResult {
  table: clembench.ClemTable;
  rows: clembench.ScoreRow[];
  /** Every episode played, in the order of the games and their held-out instances. */
  trajectories: Trajectory[];
}

/** Play every held-out instance of `games` once and tabulate them with clemeval. */
export async function evaluateClemHeldout(options: ClemEvalOptions): Promise<ClemEvalResult> {
  const rows: clembench.ScoreRow[] = [];
  const trajectories: Trajectory[] = [];
  for (const game of options.games) {
    const def = clembench.getGame(game);
    const all = clembench.listEpisodes(def.name, clembench.loadGameInstances(def.name));
    const heldout = clemSplitIndices(game, "heldout");
    const specs = heldout.map((index, position) => ({ id: `${game}-${index}`, seed: position }));
    const perInstance = typeof options.policy === "function";
    const groups = perInstance ? specs.map((s) => [s]) : [specs];
    for (const group of groups) {
      const instance = all[heldout[group[0].seed]].instance;
      const player = typeof options.policy === "function" ? options.policy(game, instance) : options.policy;
      const policy = clemViewPolicy(player, game);
      const r = await runEpisodes({
        makeEnv: () => clemEnvironment(game, isHeldOutInstance),
        policy,
        episodes: group,
        params: { temperature: 0, ...options.params },
        limits: { maxTurns: EVAL_MAX_TURNS[game] },
        concurrency: perInstance ? 1 : (options.concurrency ?? 1),
      });
      trajectories.push(...r.trajectories);
      for (const t of r.trajectories) {
        const index = Number(t.episodeId.slice(game.length + 1));
        const s = t.outcome.scores;
        // An episode the game never scored (an error, the turn limit) counts as aborted.
        const scored = t.outcome.status !== "error" && s.aborted !== undefined;
        const aborted = !scored || s.aborted === 1;
        const base = {
          game,
          model: options.model,
          experiment: all[index].experiment.name,
          episode: `episode_${index}`,
        };
        rows.push({ ...base, metric: clembench.metrics.METRIC_ABORTED, value: aborted ? 1 : 0 });
        rows.push({ ...base, metric: clembench.metrics.BENCH_SCORE, value: aborted ? Number.NaN : s.main_score });
      }
    }
  }
  const withPlayed = clembench.addPlayedRows(rows);
  return { table: clembench.clemTable(withPlayed), rows: withPlayed, trajectories };
}

/** The scripted experts of the corpus as evaluation players (the table's upper reference). */
export function clemExpertPlayers(seed = 0): (game: AgentClemGame, instance: clembench.GameInstance) => Policy {
  const vocabulary = wordleVocabulary(400, seed);
  return (game, instance) =>
    game.startsWith("wordle")
      ? wordlePlayer("solver", vocabulary, seed + 1)
      : clemPlayer(game as Exclude<AgentClemGame, `wordle${string}`>, "expert", instance, seed + 1);
}

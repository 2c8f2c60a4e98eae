import { ScoringError } from "./errors.js";
import type { Interactions } from "./interactions.js";
import * as M from "./metrics.js";
import { pyFloat, toNumber } from "./py.js";

export type ScoreValue = unknown;

/** The scores.json document: {meta, players, "turn scores", "episode scores", player_models}. */
export interface ScoresFile {
  meta: unknown;
  players: unknown;
  "turn scores": Record<string, Record<string, ScoreValue>>;
  "episode scores": Record<string, ScoreValue>;
  [key: string]: unknown;
}

/**
 * clemcore's legacy `GameScorer` (`clemgame/legacy/scorer.py`): scores are computed after the game
 * from the interactions record alone, so they can be recomputed from files.
 */
export abstract class GameScorer {
  readonly scores: ScoresFile = { meta: {}, players: {}, "turn scores": {}, "episode scores": {} };

  constructor(
    readonly gameName: string,
    readonly experiment: Record<string, unknown>,
    readonly gameInstance: Record<string, unknown>,
  ) {}

  logTurnScore(turnIdx: number, name: string, value: ScoreValue): void {
    const turns = this.scores["turn scores"];
    const key = String(turnIdx);
    if (!turns[key]) turns[key] = {};
    turns[key][name] = value;
  }

  logEpisodeScore(name: string, value: ScoreValue): void {
    this.scores["episode scores"][name] = value;
  }

  /** Copy meta/players info, then score turns and the game (legacy `compute_scores`). */
  computeScores(interactions: Interactions): void {
    this.copyMeta(interactions);
    this.scoreTurns(interactions);
    this.scoreGame(interactions);
  }

  protected copyMeta(interactions: Interactions): void {
    if ("meta" in interactions) this.scores.meta = interactions.meta;
    if ("player_models" in interactions) this.scores.player_models = interactions.player_models;
    if ("players" in interactions) this.scores.players = interactions.players;
  }

  protected scoreTurns(_interactions: Interactions): void {
    throw new ScoringError(`${this.gameName}: scoreTurns is not implemented`);
  }

  protected scoreGame(interactions: Interactions): void {
    this.scoreGameEnd(interactions);
    this.scoreRequests(interactions);
    this.logMainScore(interactions);
  }

  /** Aborted / Lose / Success from the logged keys (Lose and Success are 0 when aborted). */
  protected scoreGameEnd(interactions: Interactions): void {
    const aborted = toNumber(interactions[M.METRIC_ABORTED]) ? 1 : 0;
    const lose = aborted ? 0 : toNumber(interactions[M.METRIC_LOSE]) ? 1 : 0;
    const success = aborted ? 0 : 1 - lose;
    this.logEpisodeScore(M.METRIC_ABORTED, aborted);
    this.logEpisodeScore(M.METRIC_LOSE, lose);
    this.logEpisodeScore(M.METRIC_SUCCESS, success);
  }

  /**
   * Aborted, Success, Lose and the main score, in that order (taboo's and adventuregame's end of game): an
   * aborted episode is neither won nor lost and its main score is NaN.
   */
  protected logOutcome(aborted: boolean, won: boolean, mainScore: ScoreValue): void {
    this.logEpisodeScore(M.METRIC_ABORTED, aborted ? 1 : 0);
    this.logEpisodeScore(M.METRIC_SUCCESS, !aborted && won ? 1 : 0);
    this.logEpisodeScore(M.METRIC_LOSE, !aborted && !won ? 1 : 0);
    this.logEpisodeScore(M.BENCH_SCORE, aborted ? Number.NaN : mainScore);
  }

  protected scoreRequests(interactions: Interactions): void {
    const req = toNumber(interactions[M.METRIC_REQUEST_COUNT]);
    const parsed = toNumber(interactions[M.METRIC_REQUEST_COUNT_PARSED]);
    const violated = toNumber(interactions[M.METRIC_REQUEST_COUNT_VIOLATED]);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT, req);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_PARSED, parsed);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_VIOLATED, violated);
    if (req === 0) throw new ScoringError(`${this.gameName}: "Request Count" is 0 (division by zero in the reference)`);
    this.logEpisodeScore(M.METRIC_REQUEST_SUCCESS_RATIO, pyFloat(parsed / req));
  }

  protected logMainScore(_interactions: Interactions): void {
    throw new ScoringError(`${this.gameName}: logMainScore is not implemented`);
  }
}

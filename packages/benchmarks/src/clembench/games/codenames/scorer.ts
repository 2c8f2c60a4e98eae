// clembench `codenames/scorer.py` (a717f238), `CodenamesScorer`: per-turn precision/recall of both roles, their
// averages, recall/efficiency of the episode, and Main Score = 100 · Success (NaN when aborted).
import { ScoringError } from "../../errors.js";
import type { Interactions } from "../../interactions.js";
import * as M from "../../metrics.js";
import { PyFloat, pyRound, toNumber } from "../../py.js";
import { GameScorer } from "../../scorer.js";
import { type BoardStatus, TEAM } from "./board.js";
import { BOARD_END_STATUS, GAME_ENDED_THROUGH_ASSASSIN, NUMBER_OF_TURNS, TurnLogs } from "./master.js";
import { type PyNum, pyMean } from "./python-mean.js";
import { CLUEGIVER, GUESSER } from "./validation-errors.js";

/** `constants.Turn_Scores`, in enum order (the averages are logged in this order). */
export const TURN_SCORES = [
  "Cluegiver Number of Targets",
  "Cluegiver Team Precision",
  "Cluegiver Team Recall",
  "Cluegiver Team F1",
  "Guesser Number of Guesses",
  "Guesser Number of Revealed Words",
  "Guesser Number of Unrevealed Guesses",
  "Guesser Target Precision",
  "Guesser Target Recall",
  "Guesser Target F1",
  "Guesser Team Precision",
  "Guesser Team Recall",
  "Guesser Team F1",
] as const;

export const EPISODE_RECALL = "Episode Recall";
export const EPISODE_NEGATIVE_RECALL = "Episode Negative Recall";
export const EFFICIENCY = "Efficiency";
const EXPECTED_WORDS_PER_TURN = 2;

const fl = (x: number) => new PyFloat(x);
const val = (x: PyNum) => (x instanceof PyFloat ? x.value : x);
/** Python `/` always gives a float. */
const div = (a: PyNum, b: PyNum) => fl(val(a) / val(b));

/** `f1(p, r)`: the int 0 when p + r == 0, else the float 2·p·r/(p + r) (evaluated left to right, as Python). */
function f1(p: PyNum, r: PyNum): PyNum {
  const a = val(p);
  const b = val(r);
  if (a + b === 0) return 0;
  return fl((2 * a * b) / (a + b));
}

/** Python `round(x, 3)` keeping int/float. */
function round3(x: PyNum): PyNum {
  return x instanceof PyFloat ? fl(pyRound(x.value, 3)) : x;
}

interface TurnScore {
  Cluegiver: { "validation error": number };
  Guesser: { "validation error": number };
  targeted: { team: number; opponent: number; innocent: number; assassin: number; total: number };
  guesses: unknown[];
  revealed: { target: number; team: number; opponent: number; innocent: number; assassin: number; total: number };
}

export class CodenamesScorer extends GameScorer {
  /** Numbers are rounded to 3 decimals (ints stay ints). */
  override logTurnScore(turnIdx: number, name: string, value: unknown): void {
    super.logTurnScore(turnIdx, name, typeof value === "number" || value instanceof PyFloat ? round3(value) : value);
  }

  /** Every value is `round(value, 3)`-ed (booleans become 0/1); `scale` multiplies by 100 afterwards. */
  override logEpisodeScore(name: string, value: unknown, scale = false): void {
    let v: PyNum;
    if (typeof value === "boolean") v = value ? 1 : 0;
    else if (typeof value === "number" || value instanceof PyFloat) v = round3(value);
    else throw new ScoringError(`codenames: episode score "${name}" is not a number`);
    if (scale) v = v instanceof PyFloat ? fl(v.value * 100) : v * 100;
    super.logEpisodeScore(name, v);
  }

  protected override scoreTurns(interactions: Interactions): void {
    interactions.turns.forEach((turn, turnIdx) => {
      let boardStatus: BoardStatus | null = null;
      const ts: TurnScore = {
        Cluegiver: { "validation error": 0 },
        Guesser: { "validation error": 0 },
        targeted: { team: 0, opponent: 0, innocent: 0, assassin: 0, total: 0 },
        guesses: [],
        revealed: { target: 0, team: 0, opponent: 0, innocent: 0, assassin: 0, total: 0 },
      };
      for (const event of turn) {
        const { type, content } = event.action;
        const c = content as Record<string, unknown>;
        if (type === TurnLogs.VALIDATION_ERROR) {
          const player = c.player as typeof CLUEGIVER | typeof GUESSER;
          ts[player]["validation error"] += 1;
        } else if (type === TurnLogs.GUESSES) ts.guesses = content as unknown[];
        else if (type === TurnLogs.WORD_TARGETED) {
          if (!c.assignment) continue; // the reference's FIXME: unassigned targets are skipped
          ts.targeted[c.assignment as keyof TurnScore["targeted"]] += 1;
          ts.targeted.total += 1;
        } else if (type === TurnLogs.TEAM_REVEALED) {
          ts.revealed[c.assignment as keyof TurnScore["revealed"]] += 1;
          ts.revealed.total += 1;
        } else if (type === TurnLogs.TARGET_REVEALED) ts.revealed.target += 1;
        else if (type === TurnLogs.BOARD_STATUS) boardStatus = content as BoardStatus;
      }
      if (!boardStatus) throw new ScoringError(`codenames: turn ${turnIdx} has no "board status" event (KeyError)`);
      this.logTurnScore(turnIdx, "turn", structuredClone(ts));
      this.logTurnScore(turnIdx, `${CLUEGIVER} validation error`, ts.Cluegiver["validation error"]);
      this.logTurnScore(turnIdx, `${GUESSER} validation error`, ts.Guesser["validation error"]);

      const cgTargets = ts.targeted.total;
      const remainingTeam = (boardStatus as BoardStatus).hidden[TEAM].length;
      if (remainingTeam === 0)
        throw new ScoringError(`codenames: turn ${turnIdx} starts without team words (ZeroDivisionError)`);
      let cgPrecision: PyNum = 0;
      let cgF1: PyNum = 0;
      if (cgTargets > 0) cgPrecision = div(ts.targeted.team, cgTargets);
      const cgRecall = div(ts.targeted.team, remainingTeam);
      if (val(cgPrecision) + val(cgRecall) > 0) cgF1 = f1(cgPrecision, cgRecall);
      this.logTurnScore(turnIdx, TURN_SCORES[0], cgTargets);
      this.logTurnScore(turnIdx, TURN_SCORES[1], cgPrecision);
      this.logTurnScore(turnIdx, TURN_SCORES[2], cgRecall);
      this.logTurnScore(turnIdx, TURN_SCORES[3], cgF1);

      const nGuesses = ts.guesses.length;
      const nRevealed = ts.revealed.total;
      let targetPrecision: PyNum = 0;
      let targetRecall: PyNum = 0;
      let targetF1: PyNum = 0;
      let teamPrecision: PyNum = 0;
      if (nRevealed) {
        targetPrecision = div(ts.revealed.target, nRevealed);
        teamPrecision = div(ts.revealed.team, nRevealed);
      }
      if (ts.targeted.total > 0) targetRecall = div(ts.revealed.target, cgTargets);
      if (val(targetPrecision) + val(targetRecall) > 0) targetF1 = f1(targetPrecision, targetRecall);
      const teamRecall = div(ts.revealed.team, remainingTeam);
      const teamF1 = f1(teamPrecision, teamRecall);
      this.logTurnScore(turnIdx, TURN_SCORES[4], nGuesses);
      this.logTurnScore(turnIdx, TURN_SCORES[5], nRevealed);
      this.logTurnScore(turnIdx, TURN_SCORES[6], nGuesses - nRevealed);
      this.logTurnScore(turnIdx, TURN_SCORES[7], targetPrecision);
      this.logTurnScore(turnIdx, TURN_SCORES[8], targetRecall);
      this.logTurnScore(turnIdx, TURN_SCORES[9], targetF1);
      this.logTurnScore(turnIdx, TURN_SCORES[10], teamPrecision);
      this.logTurnScore(turnIdx, TURN_SCORES[11], teamRecall);
      this.logTurnScore(turnIdx, TURN_SCORES[12], teamF1);
    });
  }

  protected override scoreGame(interactions: Interactions): void {
    // these two bypass the rounding override (the reference calls super().log_episode_score)
    GameScorer.prototype.logEpisodeScore.call(this, "experiment variable", this.experiment.variable);
    GameScorer.prototype.logEpisodeScore.call(this, "experiment name", this.experiment.name);
    const flags = this.experiment.flags as Record<string, boolean>;
    const cgFlags = interactions["Cluegiver engaged flags"] as Record<string, number>;
    const gFlags = interactions["Guesser engaged flags"] as Record<string, number>;
    for (const [name, on] of Object.entries(flags))
      if (on) {
        this.logEpisodeScore(`Cluegiver ${name.toLowerCase()}`, cgFlags[name]);
        this.logEpisodeScore(`Guesser ${name.toLowerCase()}`, gFlags[name]);
      }
    const turns = Object.values(this.scores["turn scores"]);
    for (const name of TURN_SCORES) this.logEpisodeScore(`Average ${name}`, pyMean(turns.map((t) => t[name] as PyNum)));
    super.scoreGame(interactions);
  }

  protected override scoreGameEnd(interactions: Interactions): void {
    super.scoreGameEnd(interactions);
    this.logEpisodeScore(GAME_ENDED_THROUGH_ASSASSIN, interactions[GAME_ENDED_THROUGH_ASSASSIN]);
    const end = interactions[BOARD_END_STATUS] as BoardStatus;
    const counts = this.experiment.assignments as Record<string, number>;
    const teamWords = counts.team;
    const nonTeam = counts.opponent + counts.innocent + counts.assassin;
    const rt = end.revealed.team;
    this.logEpisodeScore(EPISODE_RECALL, div(rt.team.length, teamWords));
    this.logEpisodeScore(
      EPISODE_NEGATIVE_RECALL,
      fl(1 - (rt.assassin.length + rt.opponent.length + rt.innocent.length) / nonTeam),
    );
    const nTurns = toNumber(interactions[NUMBER_OF_TURNS]);
    this.logEpisodeScore(NUMBER_OF_TURNS, nTurns);
    let guesses = 0;
    for (const t of Object.values(this.scores["turn scores"])) guesses += t[TURN_SCORES[4]] as number;
    const g = (1 / EXPECTED_WORDS_PER_TURN) * (guesses / nTurns);
    // Python min(float, 1) keeps the float unless 1 is strictly smaller, then it is the int 1
    this.logEpisodeScore(EFFICIENCY, 1 < g ? 1 : fl(g));
  }

  protected override logMainScore(): void {
    if (toNumber(this.scores["episode scores"][M.METRIC_ABORTED])) {
      this.logEpisodeScore(M.BENCH_SCORE, fl(Number.NaN));
      return;
    }
    const success = toNumber(this.scores["episode scores"][M.METRIC_SUCCESS]);
    this.logEpisodeScore(M.BENCH_SCORE, success ? 1 : 0, true);
  }
}

// imagegame: clembench `imagegame/master.py` and `imagegame/evaluator.py` (clembench a717f238).
import { DialogueGameMaster } from "../dialogue-game-master.js";
import { ScoringError } from "../errors.js";
import type { GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend } from "../player.js";
import { type PyFloat, pyFloat, pyMatch, pyReplace, pyRound, pyStrip } from "../py.js";
import { GameScorer } from "../scorer.js";

/** Python list indexing: out of range raises (IndexError), which the reference scorer catches. */
function at<T>(xs: T[], i: number): T {
  if (i >= xs.length) throw new RangeError(`index ${i} out of range`);
  return xs[i];
}

function gridSize(grid: string): [number, number] {
  const rows = pyStrip(grid).split("\n");
  return [rows.length, rows[0].split(" ").length];
}

/**
 * `evaluate(target, generated)`: precision and recall over filled cells (letters compared case-insensitively),
 * each rounded to 4 decimals, F1 from them (4 decimals), then all scaled to 0–100 and rounded to an integer.
 * Different grid shapes give 0.0 for all. Throws where Python raises (an empty generated grid divides by zero).
 */
export function evaluateGrid(
  target: string,
  generated: string,
): [PyFloat | number, PyFloat | number, PyFloat | number] {
  const [tr, tc] = gridSize(target);
  const [gr, gc] = gridSize(generated);
  if (tr !== gr || tc !== gc) return [pyFloat(0), pyFloat(0), pyFloat(0)];
  const targetRows = pyStrip(target).split("\n");
  const generatedRows = pyStrip(generated).split("\n");
  let recallCounter = 0;
  let totalRecall = 0;
  let precisionCounter = 0;
  let totalPrecision = 0;
  for (let r = 0; r < targetRows.length; r++) {
    const tCells = targetRows[r].split(" ");
    const gCells = at(generatedRows, r).split(" ");
    for (let c = 0; c < tCells.length; c++) {
      const g = at(gCells, c);
      if (tCells[c] !== "▢") {
        totalRecall++;
        if (tCells[c].toLowerCase() === g.toLowerCase()) recallCounter++;
      }
      if (g !== "▢") {
        totalPrecision++;
        if (tCells[c].toLowerCase() === g.toLowerCase()) precisionCounter++;
      }
    }
  }
  if (totalRecall === 0 || totalPrecision === 0) throw new RangeError("float division by zero");
  const recall = pyRound(recallCounter / totalRecall, 4);
  const precision = pyRound(precisionCounter / totalPrecision, 4);
  let f1: number | PyFloat;
  if (precision === 0 || recall === 0) f1 = 0;
  else f1 = pyFloat(pyRound(pyRound((2 * precision * recall) / (precision + recall), 4) * 100, 0));
  return [pyFloat(pyRound(100 * precision, 0)), pyFloat(pyRound(100 * recall, 0)), f1];
}

/** `calculate_flipped_pixels`: cells that differ (case-insensitively) between two grids. */
export function flippedCells(previous: string, current: string): number {
  const prevRows = pyStrip(previous).split("\n");
  const curRows = pyStrip(current).split("\n");
  let n = 0;
  for (let r = 0; r < prevRows.length; r++) {
    const p = prevRows[r].split(" ");
    const c = at(curRows, r).split(" ");
    for (let i = 0; i < p.length; i++) if (p[i].toLowerCase() !== at(c, i).toLowerCase()) n++;
  }
  return n;
}

export class ImageGameMaster extends DialogueGameMaster {
  giver!: Player;
  follower!: Player;
  terminate = false;
  maxRounds = 50;
  private inst!: GameInstance;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
  ) {
    super(gameName, experiment);
  }

  protected onSetup(instance: GameInstance): void {
    this.inst = instance;
    const where = `${this.gameName}/${this.experiment.name}/${instance.game_id}`;
    const dim = Number(field(instance, "grid_dimension", where));
    this.maxRounds = dim * dim * 2;
    const p1 =
      field<string>(instance, "player_1_prompt_header", where) +
      "\n" +
      field<string>(instance, "target_grid", where) +
      "\n" +
      field<string>(instance, "player_1_question", where);
    this.giver = new Player(this.backends[0], "Instruction Giver");
    this.follower = new Player(this.backends[1] ?? this.backends[0], "Instruction Follower");
    this.addPlayer(this.giver, { initialContext: p1 });
    this.addPlayer(this.follower, { initialPrompt: field<string>(instance, "player_2_prompt_header", where) });
  }

  protected validatePlayerResponse(player: Player, response: string): boolean {
    const i = this.inst;
    if (player === this.giver) {
      if (pyMatch(i.player_1_terminate_pattern as string, response, true)) return true;
      if (pyMatch(i.player_1_response_pattern as string, response, true)) return true;
      this.terminate = true;
      this.logToSelf("invalid format", "Invalid instruction format");
      return false;
    }
    if (pyMatch(i.player_2_response_pattern as string, response, false)) return true;
    this.terminate = true;
    this.logToSelf("invalid format", "Invalid grid format");
    return false;
  }

  protected override parseResponse(player: Player, response: string): string | null {
    const i = this.inst;
    if (player === this.giver) {
      if (pyMatch(i.player_1_terminate_pattern as string, response, true)) {
        this.terminate = true;
        this.logToSelf("found terminate pattern", response);
        return null;
      }
      const instruction = response.includes("\n") ? response.split("\n")[0] : response;
      this.logToSelf("found instruction", instruction);
      return instruction;
    }
    this.logToSelf("found grid", response);
    return response;
  }

  protected onValidPlayerResponse(player: Player, parsed: string | null): void {
    if (player === this.giver) this.setContextFor(this.follower, parsed ?? "");
    else this.setContextFor(this.giver, this.inst.player_1_question as string);
  }

  protected doesGameProceed(): boolean {
    if (this.terminate) return false;
    if (this.currentRound >= this.maxRounds) {
      this.logToSelf("game end", "turn limit reached");
      return false;
    }
    return true;
  }
}

const EMPTY_GRID = "▢ ▢ ▢ ▢ ▢\n▢ ▢ ▢ ▢ ▢\n▢ ▢ ▢ ▢ ▢\n▢ ▢ ▢ ▢ ▢\n▢ ▢ ▢ ▢ ▢";

/**
 * `ImageGameScorer`. Every logged event of a round counts as a request (the reference's loop), the final
 * grid's F1 is the Main Score, Success iff F1 ≥ 99. DONE in the very first round leaves no scored round and
 * the reference divides by zero: no scores (ScoringError).
 */
export class ImageGameScorer extends GameScorer {
  override computeScores(interactions: Interactions): void {
    const target = this.gameInstance.target_grid as string;
    let precision: PyFloat | number = 0;
    let recall: PyFloat | number = 0;
    let f1: PyFloat | number = 0;
    let previousGrid: string | null = EMPTY_GRID;
    let flippedSum = 0;
    let lengthSum = 0;
    let tokensSum = 0;
    let currentGrid: string | null = "";
    let requests = 0;
    let parsed = 0;
    let violated = 0;
    let aborted = false;
    let terminated = false;
    let turns = 0;
    for (let t = 0; t < interactions.turns.length; t++) {
      const turn = interactions.turns[t];
      let tReq = 0;
      let tParsed = 0;
      let tViolated = 0;
      let p1: string | null = null;
      let p2: string | null = null;
      for (const event of turn) {
        let invalid = false;
        const a = event.action;
        if (a.type === "found terminate pattern") {
          terminated = true;
          break;
        } else if (a.type === "invalid format") invalid = true;
        else if (a.type === "found instruction") p1 = a.content as string;
        else if (a.type === "found grid") p2 = a.content as string;
        tReq++;
        requests++;
        if (invalid) {
          tViolated++;
          violated++;
          aborted = true;
          break;
        }
        tParsed++;
        parsed++;
      }
      if (aborted || terminated) break;
      try {
        if (p2 === null) throw new TypeError("no grid");
        [precision, recall, f1] = evaluateGrid(target, p2);
      } catch {
        // the reference ignores any error here and keeps the previous values
      }
      turns++;
      if (p1 === null) throw new ScoringError(`imagegame: round ${t} has no instruction`);
      const expr = pyStrip(pyReplace(p1, "Instruction:", ""));
      const length = [...expr].length;
      this.logTurnScore(t, "Generated Expression Length", length);
      lengthSum += length;
      const nTokens = expr.split(" ").length;
      this.logTurnScore(t, "Generated Expression Number of Tokens", nTokens);
      tokensSum += nTokens;
      this.logTurnScore(t, "Precision", precision);
      this.logTurnScore(t, "Recall", recall);
      this.logTurnScore(t, "F1", f1);
      let flipped = 0;
      try {
        currentGrid = p2;
        if (previousGrid === null || currentGrid === null) throw new TypeError("no grid");
        flipped = flippedCells(previousGrid, currentGrid);
      } catch {
        // as the reference
      }
      flippedSum += flipped;
      previousGrid = currentGrid;
      this.logTurnScore(t, "Changed Cell Count", flipped);
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT, tReq);
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT_PARSED, tParsed);
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT_VIOLATED, tViolated);
    }
    if (aborted) {
      for (const k of ["Precision", "Recall", "F1", M.BENCH_SCORE]) this.logEpisodeScore(k, Number.NaN);
      this.logEpisodeScore("Average Changed Cell Count", Number.NaN);
      this.logEpisodeScore("Average Generated Instruction Length", Number.NaN);
      this.logEpisodeScore("Average Generated Expression Number of Tokens", Number.NaN);
      this.logEpisodeScore(M.METRIC_SUCCESS, 0);
      this.logEpisodeScore(M.METRIC_LOSE, 0);
      this.logEpisodeScore(M.METRIC_ABORTED, 1);
    } else {
      if (turns === 0) throw new ScoringError("imagegame: no round was played before DONE (float division by zero)");
      this.logEpisodeScore("Precision", precision);
      this.logEpisodeScore("Recall", recall);
      this.logEpisodeScore("F1", f1);
      this.logEpisodeScore(M.BENCH_SCORE, f1);
      this.logEpisodeScore("Average Changed Cell Count", pyFloat(pyRound(flippedSum / turns, 4)));
      this.logEpisodeScore("Average Generated Instruction Length", pyFloat(pyRound(lengthSum / turns, 4)));
      this.logEpisodeScore("Average Generated Expression Number of Tokens", pyFloat(pyRound(tokensSum / turns, 4)));
      const f = Number(f1);
      this.logEpisodeScore(M.METRIC_SUCCESS, f >= 99 ? 1 : 0);
      this.logEpisodeScore(M.METRIC_LOSE, f >= 99 ? 0 : 1);
      this.logEpisodeScore(M.METRIC_ABORTED, 0);
    }
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT, requests);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_VIOLATED, violated);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_PARSED, parsed);
    this.logEpisodeScore(M.METRIC_REQUEST_SUCCESS_RATIO, requests === 0 ? 0 : pyFloat(pyRound(parsed / requests, 4)));
  }
}

export const imagegame: GameDefinition = {
  name: "imagegame",
  players: 2,
  roles: ["Instruction Giver", "Instruction Follower"],
  createMaster: (experiment, backends) => new ImageGameMaster("imagegame", experiment, backends),
  createScorer: (experiment, instance) => new ImageGameScorer("imagegame", experiment, instance),
};

// matchit_ascii: clembench `matchit_ascii/master.py` (clembench a717f238).
import { DialogueGameMaster } from "../dialogue-game-master.js";
import type { GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend } from "../player.js";
import { pyReplace, pyStrip } from "../py.js";
import { GameScorer } from "../scorer.js";

class MatchItPlayer extends Player {
  description = "";
  question = "";
  answer = "";
  decision = "";
  /** replies in the current round */
  responseCounter = 0;
  constructor(
    backend: PlayerBackend,
    readonly role: "A" | "B",
  ) {
    super(backend, "MatchItPlayer");
  }
  resetRound(): void {
    this.description = "";
    this.question = "";
    this.answer = "";
    this.decision = "";
    this.responseCounter = 0;
  }
}

/** The first whitespace-separated token of the first non-empty line (after strip), as the reference reads it. */
export function matchItFirstWord(utterance: string): string {
  const parts = pyStrip(utterance)
    .split("\n")
    .filter((l) => l.length > 0);
  return (parts[0] ?? "").split(" ")[0];
}

/**
 * Rounds: 0: A description, B description, B question; 1..decision_turn: A answer + question, B answer +
 * question (in the decision round B answers and then decides); decision_turn + 1: A decides. Every reply's first
 * word must be the expected flag (case-sensitive); decisions must read exactly "decision: same grid" or
 * "decision: different grids" (lowercased, "." and newlines stripped at the ends). Any violation aborts.
 */
export class MatchItAsciiMaster extends DialogueGameMaster {
  playerA!: MatchItPlayer;
  playerB!: MatchItPlayer;
  aborted = false;
  finalDecision = false;
  private flags: Record<"description" | "question" | "answer" | "decision", string>;
  private decisionTurn = 3;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
  ) {
    super(gameName, experiment);
    this.flags = field(experiment, "flags", `${gameName}/${experiment.name}`);
  }

  private get exp(): Record<string, string> {
    return this.experiment as unknown as Record<string, string>;
  }

  protected onSetup(instance: GameInstance): void {
    const where = `${this.gameName}/${this.experiment.name}/${instance.game_id}`;
    const prompt = field<string>(this.experiment, "initial_prompt", where);
    this.decisionTurn = Number(field(instance, "decision_turn", where));
    this.playerA = new MatchItPlayer(this.backends[0], "A");
    this.playerB = new MatchItPlayer(this.backends[1] ?? this.backends[0], "B");
    this.addPlayer(this.playerA, { initialContext: pyReplace(prompt, "$GRID$", field(instance, "grid_a", where)) });
    this.addPlayer(this.playerB, { initialContext: pyReplace(prompt, "$GRID$", field(instance, "grid_b", where)) });
  }

  protected override onBeforeRound(): void {
    this.playerA.resetRound();
    this.playerB.resetRound();
  }

  protected doesGameProceed(): boolean {
    if (this.aborted) {
      this.logToSelf("Game over", "Aborted");
      return false;
    }
    return !this.finalDecision;
  }

  private checkFlag(firstWord: string, flag: string): boolean {
    if (firstWord === flag) {
      this.logToSelf("valid format", "continue");
      return true;
    }
    this.logToSelf("invalid format", `abort, first word: ${firstWord}, but expected ${flag}`);
    this.aborted = true;
    return false;
  }

  private checkDecision(player: MatchItPlayer, utterance: string): boolean {
    const said = pyStrip(utterance.toLowerCase(), ".\n");
    if (said === `${this.flags.decision} ${this.exp.solution}`.toLowerCase()) {
      this.logToSelf(`Decision Player ${player.role}`, "success");
      return true;
    }
    if (said === `${this.flags.decision} ${this.exp.wrong_solution}`.toLowerCase()) {
      this.logToSelf(`Decision Player ${player.role}`, "loss");
      return true;
    }
    this.logToSelf("invalid content", "abort, wrong message content.");
    this.aborted = true;
    return false;
  }

  protected validatePlayerResponse(p: Player, utterance: string): boolean {
    const player = p as MatchItPlayer;
    player.responseCounter += 1;
    if (!pyStrip(utterance)) {
      this.logToSelf("invalid content", "abort, empty message");
      this.aborted = true;
      return false;
    }
    const first = matchItFirstWord(utterance);
    if (this.currentRound === 0)
      return this.checkFlag(first, player.responseCounter === 1 ? this.flags.description : this.flags.question);
    if (this.currentRound === this.decisionTurn && player === this.playerB) {
      if (player.responseCounter === 1) return this.checkFlag(first, this.flags.answer);
      if (player.responseCounter === 2) {
        if (!this.checkFlag(first, this.flags.decision)) return false;
        return this.checkDecision(player, utterance);
      }
    }
    if (this.currentRound === this.decisionTurn + 1) {
      this.finalDecision = true;
      if (!this.checkFlag(first, this.flags.decision)) return false;
      return this.checkDecision(player, utterance);
    }
    return this.checkFlag(first, player.responseCounter === 1 ? this.flags.answer : this.flags.question);
  }

  protected override parseResponse(p: Player, utterance: string): string {
    const player = p as MatchItPlayer;
    const u = pyStrip(utterance);
    if (u.startsWith(this.flags.description)) player.description = u;
    else if (u.startsWith(this.flags.question)) player.question = u;
    else if (u.startsWith(this.flags.answer)) player.answer = u;
    else if (u.startsWith(this.flags.decision)) player.decision = u;
    return u;
  }

  protected onValidPlayerResponse(p: Player): void {
    const player = p as MatchItPlayer;
    const e = this.exp;
    if (this.currentRound === 0 && player === this.playerB) {
      if (player.responseCounter === 1) {
        this.setContextFor(this.playerB, `${e.desc_intro}${this.playerA.description}\n${e.q_reprompt}`);
        return;
      }
      if (player.responseCounter === 2) {
        this.setContextFor(
          this.playerA,
          `${e.desc_intro}${this.playerB.description}\n${this.playerB.question}${e.a_request}`,
        );
        return;
      }
    }
    if (this.currentRound === this.decisionTurn && player === this.playerB) {
      if (player.responseCounter === 1) {
        this.setContextFor(this.playerB, e.d_reprompt);
        return;
      }
      if (player.responseCounter === 2) {
        this.setContextFor(this.playerA, `${this.playerB.answer}\n${e.d_reprompt}`);
        return;
      }
    }
    if (player.responseCounter === 1) this.setContextFor(player, e.q_reprompt);
    if (player.responseCounter === 2) {
      const other = player === this.playerB ? this.playerA : this.playerB;
      this.setContextFor(other, `${player.answer}\n${player.question}${e.a_request}`);
    }
  }

  protected override startNextRound(): boolean {
    return this.playerB.responseCounter === 2;
  }

  protected override shouldPassTurn(): boolean {
    const player = this.currentPlayer as MatchItPlayer;
    if (this.currentRound === 0 && player === this.playerA) return true;
    return player.responseCounter === 2;
  }
}

/**
 * `MatchItScorer`: requests are the logged format checks; an event whose content starts with "Abort" marks the
 * abort (the master's "Game over" event); Main Score 100 only if both decisions were right ("Player Score" 50
 * for one).
 */
export class MatchItScorer extends GameScorer {
  override computeScores(interactions: Interactions): void {
    const all: { req: number; viol: number; parsed: number }[] = [];
    let successA = false;
    let successB = false;
    let aborted = false;
    interactions.turns.forEach((turn, t) => {
      const ts = { req: 0, viol: 0, parsed: 0 };
      for (const event of turn) {
        const a = event.action;
        if (a.type === "invalid format" || a.type === "invalid content") {
          ts.viol++;
          ts.req++;
        } else if (a.type === "valid format") {
          ts.parsed++;
          ts.req++;
        } else if (String(a.content).startsWith("Abort")) aborted = true;
        else if (a.type === "Decision Player A") successA ||= a.content === "success";
        else if (a.type === "Decision Player B") successB ||= a.content === "success";
      }
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT_VIOLATED, ts.viol);
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT_PARSED, ts.parsed);
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT, ts.req);
      all.push(ts);
      this.logEpisodeScore(
        M.METRIC_REQUEST_COUNT_VIOLATED,
        all.reduce((s, x) => s + x.viol, 0),
      );
      this.logEpisodeScore(
        M.METRIC_REQUEST_COUNT_PARSED,
        all.reduce((s, x) => s + x.parsed, 0),
      );
      this.logEpisodeScore(
        M.METRIC_REQUEST_COUNT,
        all.reduce((s, x) => s + x.req, 0),
      );
      const both = successA && successB;
      const one = successA !== successB;
      this.logEpisodeScore(M.METRIC_ABORTED, aborted ? 1 : 0);
      this.logEpisodeScore(M.METRIC_SUCCESS, !aborted && both ? 1 : 0);
      this.logEpisodeScore(M.METRIC_LOSE, !aborted && !both ? 1 : 0);
      this.logEpisodeScore(M.BENCH_SCORE, aborted ? Number.NaN : both ? 100 : 0);
      this.logEpisodeScore("Player Score", aborted ? Number.NaN : both ? 100 : one ? 50 : 0);
    });
  }
}

export const matchitAscii: GameDefinition = {
  name: "matchit_ascii",
  players: 2,
  roles: ["Player A", "Player B"],
  createMaster: (experiment, backends) => new MatchItAsciiMaster("matchit_ascii", experiment, backends),
  createScorer: (experiment, instance) => new MatchItScorer("matchit_ascii", experiment, instance),
};

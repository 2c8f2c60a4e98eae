// clembench `codenames/board.py` (a717f238): hidden and revealed words per assignment.
import { GameProtocolError } from "../../errors.js";
import type { CodenamesFlags } from "./flags.js";

export const TEAM = "team";
export const OPPONENT = "opponent";
export const INNOCENT = "innocent";
export const ASSASSIN = "assassin";
export type Assignment = typeof TEAM | typeof OPPONENT | typeof INNOCENT | typeof ASSASSIN;
export type Side = typeof TEAM | typeof OPPONENT;

/** Key order as in the reference dicts (it shows in the logged board status). */
const ASSIGNMENTS: readonly Assignment[] = [TEAM, INNOCENT, OPPONENT, ASSASSIN];

export interface BoardStatus {
  hidden: Record<Assignment, string[]>;
  revealed: Record<Side, Record<Assignment, string[]>>;
}

function emptyAssignments(): Record<Assignment, string[]> {
  return { team: [], innocent: [], opponent: [], assassin: [] };
}

export class CodenamesBoard {
  readonly hidden: Record<Assignment, string[]>;
  readonly revealed: Record<Side, Record<Assignment, string[]>>;

  constructor(
    team: readonly string[],
    opponent: readonly string[],
    innocent: readonly string[],
    assassin: readonly string[],
    /** The instance's `board`: the display order of the words. */
    readonly randomOrder: readonly string[],
    readonly flags: CodenamesFlags,
  ) {
    this.hidden = { team: [...team], innocent: [...innocent], opponent: [...opponent], assassin: [...assassin] };
    this.revealed = { team: emptyAssignments(), opponent: emptyAssignments() };
  }

  getCurrentBoard(): BoardStatus {
    return { hidden: this.hidden, revealed: this.revealed };
  }

  /**
   * The assignment of a hidden word. The reference's fallback for revealed words tests `word in
   * revealed[team]`, i.e. against the assignment *names*, so it only answers "team" for a word spelled like
   * an assignment and None otherwise (quirk kept: revealed words give null).
   */
  getWordAssignment(word: string): Assignment | null {
    for (const a of ASSIGNMENTS) if (this.hidden[a].includes(word)) return a;
    for (const side of [TEAM, OPPONENT] as const)
      for (const a of ASSIGNMENTS) if (a in this.revealed[side] && (ASSIGNMENTS as string[]).includes(word)) return a;
    return null;
  }

  /** Every hidden word, in board order. */
  getAllHiddenWords(): string[] {
    const hidden = new Set(ASSIGNMENTS.flatMap((a) => this.hidden[a]));
    return this.randomOrder.filter((w) => hidden.has(w));
  }

  /** The live list of hidden words of one assignment (the mock opponent samples from it). */
  getHiddenWords(assignment: Assignment): string[] {
    return this.hidden[assignment];
  }

  getRevealedWords(by: Side): string[] {
    return ASSIGNMENTS.flatMap((a) => this.revealed[by][a]);
  }

  /** Reveal a hidden word for `by`; returns its assignment, or null when it is not hidden (only with the flag). */
  revealWord(word: string, by: Side = TEAM): Assignment | null {
    for (const a of ASSIGNMENTS) {
      const i = this.hidden[a].indexOf(word);
      if (i >= 0) {
        this.revealed[by][a].push(word);
        this.hidden[a].splice(i, 1);
        return a;
      }
    }
    if (!this.flags["IGNORE FALSE TARGETS OR GUESSES"])
      throw new GameProtocolError(
        `Word '${word}' was not found amongst the hidden words on the board, cannot be revealed.`,
      );
    return null;
  }

  shouldContinueAfterRevealing(word: string, by: Side = TEAM): boolean {
    return this.revealed[by][by].includes(word);
  }

  hasTeamWon(): boolean {
    return this.hidden.team.length === 0;
  }
  hasTeamWonThroughAssassin(): boolean {
    return this.revealed.opponent.assassin.length >= 1;
  }
  hasOpponentWon(): boolean {
    return this.hidden.opponent.length === 0;
  }
  hasOpponentWonThroughAssassin(): boolean {
    return this.revealed.team.assassin.length >= 1;
  }
}

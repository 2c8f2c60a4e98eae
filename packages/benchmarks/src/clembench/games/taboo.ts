// taboo: clembench `taboo/master.py` (clembench a717f238).
import { DialogueGameMaster } from "../dialogue-game-master.js";
import { NLTK_ENGLISH_STOPWORDS, snowballStem } from "../english.js";
import type { GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend } from "../player.js";
import { pyFloat, pyReplace, pyStrip, removePunctuation } from "../py.js";
import { GameScorer } from "../scorer.js";

export interface ClueError {
  message: string;
  /** 0: similar to the target word, 1: similar to a related word. */
  type: 0 | 1;
}

/**
 * `check_clue`: drop every `CLUE:`, strip, lowercase, remove ASCII punctuation, split on single spaces,
 * drop NLTK English stop words, and report every clue word whose Snowball stem equals the stem of the
 * target word or of a related word.
 */
export function checkClue(
  utterance: string,
  targetWord: string,
  relatedWords: string[],
): { clue: string; errors: ClueError[] } {
  let clue = pyReplace(utterance, "CLUE:", "");
  clue = removePunctuation(pyStrip(clue).toLowerCase());
  const clueWords = clue.split(" ").filter((w) => !NLTK_ENGLISH_STOPWORDS.has(w));
  const targetStem = snowballStem(targetWord);
  const relatedStems = relatedWords.map((w) => snowballStem(w));
  const errors: ClueError[] = [];
  for (const w of clueWords) {
    const s = snowballStem(w);
    if (s === targetStem)
      errors.push({
        message: `Target word '${targetWord}' (stem=${targetStem}) is similar to clue word '${w}' (stem=${s})`,
        type: 0,
      });
    relatedWords.forEach((rw, i) => {
      if (relatedStems[i] === s)
        errors.push({
          message: `Related word '${rw}' (stem=${relatedStems[i]}) is similar to clue word '${w}' (stem=${s})`,
          type: 1,
        });
    });
  }
  return { clue, errors };
}

/** The guess as taboo reads it: drop `GUESS:`, strip, lowercase, remove punctuation. */
export function parseTabooGuess(utterance: string): string {
  return removePunctuation(pyStrip(pyReplace(utterance, "GUESS:", "")).toLowerCase()).toLowerCase();
}

export class TabooMaster extends DialogueGameMaster {
  describer!: Player;
  guesser!: Player;
  targetWord = "";
  relatedWords: string[] = [];
  readonly maxRounds: number;
  invalidResponse = false;
  clueError: ClueError | null = null;
  guessWord: string | null = null;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
  ) {
    super(gameName, experiment);
    this.maxRounds = Number(field(experiment, "max_turns", `${gameName}/${experiment.name}`));
  }

  protected onSetup(instance: GameInstance): void {
    const where = `${this.gameName}/${this.experiment.name}/${instance.game_id}`;
    this.targetWord = field<string>(instance, "target_word", where);
    this.relatedWords = field<string[]>(instance, "related_word", where);
    const rel = `- ${this.relatedWords[0]}\n- ${this.relatedWords[1]}\n- ${this.relatedWords[2]}`;
    let describerPrompt = field<string>(this.experiment, "describer_initial_prompt", where);
    describerPrompt = pyReplace(describerPrompt, "$TARGET_WORD$", this.targetWord);
    describerPrompt = pyReplace(describerPrompt, "$REL_WORD$", rel);
    describerPrompt = pyReplace(describerPrompt, "$N$", String(this.maxRounds));
    const guesserPrompt = pyReplace(
      field<string>(this.experiment, "guesser_initial_prompt", where),
      "$N$",
      String(this.maxRounds),
    );
    this.describer = new Player(this.backends[0], "WordDescriber");
    this.guesser = new Player(this.backends[1] ?? this.backends[0], "WordGuesser");
    this.addPlayer(this.describer, { initialContext: describerPrompt });
    this.addPlayer(this.guesser, { initialPrompt: guesserPrompt });
  }

  isAborted(): boolean {
    return this.invalidResponse;
  }
  isTurnLimitReached(): boolean {
    return this.currentRound >= this.maxRounds;
  }
  isSuccess(): boolean {
    return this.guessWord === this.targetWord;
  }
  /** A clue that breaks the taboo ends the game as a loss (not an abort). */
  isFailure(): boolean {
    return this.clueError !== null || this.isTurnLimitReached();
  }

  protected doesGameProceed(): boolean {
    if (this.isAborted() || this.isFailure() || this.isSuccess()) {
      if (this.isAborted()) this.logToSelf("invalid format", "abort game");
      if (this.clueError) this.logToSelf("invalid clue", this.clueError.message);
      if (this.isTurnLimitReached()) this.logToSelf("max rounds reached", String(this.maxRounds));
      if (this.isSuccess()) this.logToSelf("correct guess", "end game");
      return false;
    }
    return true;
  }

  protected validatePlayerResponse(player: Player, utterance: string): boolean {
    if (player === this.guesser) {
      if (!utterance.startsWith("GUESS:")) {
        this.invalidResponse = true;
        return false;
      }
      this.logToSelf("valid response", "continue");
      this.guessWord = parseTabooGuess(utterance);
      this.logToSelf("valid guess", this.guessWord);
    }
    if (player === this.describer) {
      if (!utterance.startsWith("CLUE:")) {
        this.invalidResponse = true;
        return false;
      }
      this.logToSelf("valid response", "continue");
      const { clue, errors } = checkClue(utterance, this.targetWord, this.relatedWords);
      if (errors.length > 0) {
        this.clueError = errors[0];
        return false;
      }
      this.logToSelf("valid clue", clue);
    }
    return true;
  }

  protected onValidPlayerResponse(player: Player, parsed: string | null): void {
    if (player === this.describer) this.setContextFor(this.guesser, parsed ?? "");
    if (player === this.guesser) this.setContextFor(this.describer, parsed ?? "");
  }
}

/**
 * `TabooScorer`: one request per round; Main Score = 100 / rounds when guessed. It looks for "guess"/"clue"
 * events the master never logs (it logs "valid guess"/"valid clue"), so both repetition counts stay 0 (quirk kept).
 */
export class TabooScorer extends GameScorer {
  override computeScores(interactions: Interactions): void {
    this.copyMeta(interactions);
    const turnScores: { guess: unknown; clue: unknown; violated: number; parsed: number }[] = [];
    let prevGuess: unknown = null;
    let prevGuessCounter = 0;
    let prevClue: unknown = null;
    let prevClueCounter = 0;
    let invalidResponse = false;
    let guesserWon = false;
    interactions.turns.forEach((turn, turnIdx) => {
      const ts = { guess: null as unknown, clue: null as unknown, violated: 0, parsed: 0 };
      for (const event of turn) {
        const action = event.action;
        if (action.type === "invalid format") invalidResponse = true;
        if (action.type === "guess") ts.guess = action.content;
        if (action.type === "clue") ts.clue = action.content;
        if (action.type === "correct guess") guesserWon = true;
      }
      if (invalidResponse) ts.violated = 1;
      else ts.parsed = 1;
      if (ts.guess !== null && ts.guess === prevGuess) prevGuessCounter += 1;
      if (ts.clue !== null && ts.clue === prevClue) prevClueCounter += 1;
      this.logTurnScore(turnIdx, "Accuracy", guesserWon ? 1 : 0);
      this.logTurnScore(turnIdx, M.METRIC_REQUEST_COUNT_VIOLATED, ts.violated);
      this.logTurnScore(turnIdx, M.METRIC_REQUEST_COUNT_PARSED, ts.parsed);
      this.logTurnScore(turnIdx, M.METRIC_REQUEST_COUNT, 1);
      prevGuess = ts.guess;
      prevClue = ts.clue;
      turnScores.push(ts);
    });
    const violated = turnScores.reduce((a, t) => a + t.violated, 0);
    const parsed = turnScores.reduce((a, t) => a + t.parsed, 0);
    const requests = turnScores.length;
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_VIOLATED, violated);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_PARSED, parsed);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT, requests);
    this.logEpisodeScore(M.METRIC_REQUEST_SUCCESS_RATIO, pyFloat(parsed / requests));
    this.logOutcome(invalidResponse, guesserWon, guesserWon ? pyFloat(100 / turnScores.length) : 0);
    this.logEpisodeScore("Repetition-Guesser", prevGuessCounter);
    this.logEpisodeScore("Repetition-Describer", prevClueCounter);
  }
}

export const taboo: GameDefinition = {
  name: "taboo",
  players: 2,
  roles: ["Describer", "Guesser"],
  createMaster: (experiment, backends) => new TabooMaster("taboo", experiment, backends),
  createScorer: (experiment, instance) => new TabooScorer("taboo", experiment, instance),
};

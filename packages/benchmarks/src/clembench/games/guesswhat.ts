// guesswhat: clembench `guesswhat/master.py` (clembench a717f238).
import { DialogueGameMaster } from "../dialogue-game-master.js";
import type { GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend } from "../player.js";
import {
  pyFloat,
  pyListRepr,
  pyMatch,
  pyReplace,
  pySearch,
  pySplitWhitespace,
  pyStrip,
  removePunctuation,
} from "../py.js";
import { GameScorer } from "../scorer.js";

export interface GuessWhatPatterns {
  letter_based_pattern: string;
  direct_guess_pattern: string;
  length_question_pattern: string;
  syllable_question_pattern: string;
  pos_question_pattern: string;
}

/**
 * `check_question`: content rules on the lowercased question. The reference compiles the patterns without
 * IGNORECASE (the flag lands in `str.format`), so they are case-sensitive; direct-guess and POS use
 * `re.match`, the others `re.search`. (The direct-guess pattern carries a literal \x01 where a back-reference
 * was meant, so it never matches; kept.)
 */
export function checkGuessWhatQuestion(question: string, questionTag: string, p: GuessWhatPatterns): string[] {
  const text = pyStrip(pyReplace(question, questionTag, "")).toLowerCase();
  const errors: string[] = [];
  if (pySearch(p.letter_based_pattern, text))
    errors.push("Invalid question. Asking about specific letters or their positions is not allowed.");
  if (pyMatch(p.direct_guess_pattern, text))
    errors.push("Invalid question. Guessing without 'GUESS:' format is not allowed.");
  if (pySearch(p.length_question_pattern, text))
    errors.push("Invalid question. Asking about the length of the target word is not allowed.");
  if (pySearch(p.syllable_question_pattern, text))
    errors.push("Invalid question. Asking about the number of syllables is not allowed.");
  if (pyMatch(p.pos_question_pattern, text))
    errors.push("Invalid question. Asking about the part of speech (POS) of the target word is not allowed.");
  return errors;
}

export class GuessWhatMaster extends DialogueGameMaster {
  guesser!: Player;
  answerer!: Player;
  invalidFormat = false;
  invalidContent = false;
  correctGuess = false;
  incorrectGuess = false;
  guessWord: string | null = null;
  private targetWord = "";
  private guesserPrompt = "";
  private answererPrompt = "";
  private readonly maxTurns: number;
  private readonly e: Record<string, unknown>;

  constructor(
    gameName: string,
    experiment: Experiment,
    private readonly backends: PlayerBackend[],
  ) {
    super(gameName, experiment);
    this.e = experiment;
    this.maxTurns = Number(field(experiment, "max_turns", `${gameName}/${experiment.name}`));
  }

  private get tag() {
    return { q: this.e.question_tag as string, g: this.e.guess_tag as string };
  }

  protected onSetup(instance: GameInstance): void {
    const where = `${this.gameName}/${this.experiment.name}/${instance.game_id}`;
    this.targetWord = field<string>(instance, "target_word", where);
    const candidates = field<string[]>(instance, "candidate_list", where);
    this.guesserPrompt = pyReplace(
      pyReplace(field<string>(this.experiment, "guesser_initial_prompt", where), "$LIST$", pyListRepr(candidates)),
      "$N$",
      String(this.maxTurns - 1),
    );
    this.answererPrompt = pyReplace(
      field<string>(this.experiment, "answerer_initial_prompt", where),
      "$TARGET WORD$",
      this.targetWord,
    );
    this.guesser = new Player(this.backends[0], "Guesser");
    this.answerer = new Player(this.backends[1] ?? this.backends[0], "Answerer");
    this.addPlayer(this.guesser);
    this.addPlayer(this.answerer);
  }

  protected override onBeforeGame(): void {
    this.setContextFor(this.guesser, this.guesserPrompt);
  }

  protected doesGameProceed(): boolean {
    if (this.invalidFormat) {
      this.logToSelf("invalid format", "abort game");
      return false;
    }
    if (this.invalidContent) {
      this.logToSelf("invalid content", "abort game");
      return false;
    }
    if (this.correctGuess) {
      this.logToSelf("correct guess", "end game");
      return false;
    }
    if (this.incorrectGuess) {
      this.logToSelf("incorrect guess", "end game");
      return false;
    }
    if (this.currentRound >= this.maxTurns) {
      this.logToSelf("max turns reached", String(this.maxTurns));
      return false;
    }
    return true;
  }

  protected validatePlayerResponse(player: Player, utterance: string): boolean {
    this.invalidFormat = false;
    this.invalidContent = false;
    const { q, g } = this.tag;
    if (player === this.guesser) {
      if (!(utterance.startsWith(q) || utterance.startsWith(g))) {
        this.logToSelf("invalid format", "Invalid format. Guesser must use the form 'QUESTION: ' or 'GUESS: '.");
        this.invalidFormat = true;
        return false;
      }
      if (utterance.startsWith(q)) {
        const question = pyStrip(utterance.slice(q.length));
        if (utterance.split(q).length - 1 > 1) {
          this.logToSelf("invalid format", "Multiple questions detected in a single turn.");
          this.invalidFormat = true;
          return false;
        }
        if (question.includes("?")) {
          const parts = question.split("?");
          if (parts.length > 2 || pyStrip(parts[1]) !== "") {
            this.logToSelf("invalid format", "Invalid format. Question must stop after the question mark.");
            this.invalidFormat = true;
            return false;
          }
        }
        const errors = checkGuessWhatQuestion(utterance, q, this.e as unknown as GuessWhatPatterns);
        if (errors.length > 0) {
          for (const message of errors) this.logToSelf("invalid content", message);
          this.invalidContent = true;
          return false;
        }
      } else {
        const guess = removePunctuation(pyStrip(utterance.slice(g.length)).toLowerCase());
        this.guessWord = guess;
        if (pySplitWhitespace(guess).length > 1) {
          this.invalidFormat = true;
          return false;
        }
        if (guess === this.targetWord.toLowerCase()) {
          this.correctGuess = true;
          this.logToSelf("correct guess", guess);
        } else {
          this.incorrectGuess = true;
          this.logToSelf("incorrect guess", guess);
        }
        return true;
      }
    } else if (player === this.answerer) {
      if (!(this.e.answer_variations as string[]).includes(utterance)) {
        this.invalidFormat = true;
        return false;
      }
    }
    return true;
  }

  protected onValidPlayerResponse(player: Player, parsed: string | null): void {
    if (player === this.guesser) {
      if (this.currentRound === 0) this.setContextFor(this.answerer, `${this.answererPrompt}\n\n${parsed}`);
      else this.setContextFor(this.answerer, parsed ?? "");
    }
    if (player === this.answerer && !this.incorrectGuess && !this.correctGuess)
      this.setContextFor(this.guesser, parsed ?? "");
  }
}

/**
 * `GuessWhatScorer`: one request per round; a violation in the last round aborts (Main Score NaN, and no
 * Success/Lose keys, as the reference). Speed: 100 when won within 5 rounds (the level-specific bound is dead
 * code: `game_level == "Level_1" or "Abs_Level_1"` is always true), else 100·(max_turns − rounds)/(max_turns − 5).
 */
export class GuessWhatScorer extends GameScorer {
  override computeScores(interactions: Interactions): void {
    let guesserWon = false;
    const counts = { fg: 0, fa: 0, cg: 0, ca: 0 };
    const maxTurns = Number(this.experiment.max_turns);
    const lowerBound = 4 + 1;
    let violated = 0;
    let parsed = 0;
    let lastInvalid = false;
    interactions.turns.forEach((turn, t) => {
      let invalidInTurn = false;
      turn.forEach((event, i) => {
        const type = event.action.type;
        if (type === "invalid format" || type === "invalid content") {
          const prev = i > 0 ? turn[i - 1].from : null;
          const fmt = type === "invalid format";
          if (prev === "Player 1") counts[fmt ? "fg" : "cg"]++;
          else if (prev === "Player 2") counts[fmt ? "fa" : "ca"]++;
          invalidInTurn = true;
        }
        if (type === "correct guess") guesserWon = true;
      });
      this.logTurnScore(t, "Accuracy", guesserWon ? 1 : 0);
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT_VIOLATED, invalidInTurn ? 1 : 0);
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT_PARSED, invalidInTurn ? 0 : 1);
      this.logTurnScore(t, M.METRIC_REQUEST_COUNT, 1);
      if (invalidInTurn) violated++;
      else parsed++;
      lastInvalid = invalidInTurn;
    });
    const requests = interactions.turns.length;
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_VIOLATED, violated);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT_PARSED, parsed);
    this.logEpisodeScore(M.METRIC_REQUEST_COUNT, requests);
    this.logEpisodeScore(M.METRIC_REQUEST_SUCCESS_RATIO, requests !== 0 ? pyFloat(parsed / requests) : 0);
    if (lastInvalid) {
      this.logEpisodeScore(M.METRIC_ABORTED, 1);
      this.logEpisodeScore(M.BENCH_SCORE, Number.NaN);
    } else {
      this.logEpisodeScore(M.METRIC_ABORTED, 0);
      if (guesserWon) {
        this.logEpisodeScore(M.METRIC_SUCCESS, 1);
        this.logEpisodeScore(M.METRIC_LOSE, 0);
        // Python: int 100 within the bound, else a float; max(0, x) gives the int 0 for x <= 0
        const speed: number | ReturnType<typeof pyFloat> =
          requests <= lowerBound ? 100 : pyFloat((100 * (maxTurns - requests)) / (maxTurns - lowerBound));
        const clipped = Number(speed) > 0 ? speed : 0;
        this.logEpisodeScore("Speed", clipped);
        this.logEpisodeScore(M.BENCH_SCORE, clipped);
      } else {
        this.logEpisodeScore(M.METRIC_SUCCESS, 0);
        this.logEpisodeScore(M.METRIC_LOSE, 1);
        this.logEpisodeScore(M.BENCH_SCORE, 0);
      }
    }
    this.logEpisodeScore("Invalid format guesser response", counts.fg);
    this.logEpisodeScore("Invalid format answerer response", counts.fa);
    this.logEpisodeScore("Invalid content guesser response", counts.cg);
    this.logEpisodeScore("Invalid content answerer response", counts.ca);
  }
}

export const guesswhat: GameDefinition = {
  name: "guesswhat",
  players: 2,
  roles: ["Guesser", "Answerer"],
  createMaster: (experiment, backends) => new GuessWhatMaster("guesswhat", experiment, backends),
  createScorer: (experiment, instance) => new GuessWhatScorer("guesswhat", experiment, instance),
};

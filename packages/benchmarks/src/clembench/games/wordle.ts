// wordle, wordle_withclue, wordle_withcritic: clembench `wordle/master.py` (clembench a717f238).
import { DialogueGameMaster } from "../dialogue-game-master.js";
import type { GameDefinition } from "../game.js";
import { type Experiment, field, type GameInstance } from "../instances.js";
import type { Interactions } from "../interactions.js";
import * as M from "../metrics.js";
import { Player, type PlayerBackend } from "../player.js";
import { pyFindAll, pyFloat, pyIsAlpha, pyRound, pySearch, pyStrip, toNumber } from "../py.js";
import { GameScorer } from "../scorer.js";
import { turnsCloseness, turnsStrategy, wordleFeedback } from "./wordle-feedback.js";

/** The `lang_keywords` block embedded in every wordle experiment. */
export interface WordleWords {
  max_word_length: number;
  clue_lang: string;
  guess_lang: string;
  guess_word_lang: string;
  explanation_lang: string;
  explanataion_details_lang: string;
  guess_feedback_lang: string;
  agreement_lang: string;
  agreement_word_lang: string;
  guess_agreement_lang: string;
  agreement_explanation_lang: string;
  agreement_match_keywords_lang: string[];
  error_prompt_text: Record<string, string>;
  official_words_list: string[];
}

/** A guesser/critic response that breaks the format or the rules; `key` is the reference's error key. */
export class WordleResponseError extends Error {
  constructor(
    readonly reason: string,
    readonly key: string,
    /** Unknown five-letter word: counts as parsed and triggers a reprompt instead of an abort. */
    readonly unknownWord = false,
  ) {
    super(reason);
    this.name = "WordleResponseError";
  }
}

/**
 * `parse_response`: the raw reply must start with `explanation:` (case-sensitive); after strip at most
 * 2 lines; the content tag (`guess:` or, for the critic, `agreement:`) found exactly once ignoring case.
 * Returns [content (stripped, lowercased), explanation].
 */
export function parseWordleResponse(response: string, words: WordleWords, critic = false): [string, string] {
  if (!response?.startsWith(words.explanation_lang))
    throw new WordleResponseError(
      `The response should always start with the keyword '${words.explanation_lang}'`,
      "INVALID_START_WORD",
    );
  const stripped = pyStrip(response);
  if (stripped.split("\n").length > 2)
    throw new WordleResponseError(
      `The response should contain only the '${words.guess_lang}' and '${words.explanation_lang}' keywords and associated information.`,
      "UNKNOWN_TAGS",
    );
  const prefix = critic ? words.agreement_lang : words.guess_lang;
  const explanation = pySearch(`${escapeRe(words.explanation_lang)}([^\\n]*)`, stripped, true);
  const content = pyFindAll(`${escapeRe(prefix)}([^\\n]*)`, stripped, true);
  if (content.length !== 1)
    throw new WordleResponseError(
      `The response should contain the '${prefix}' keyword exactly once.`,
      "MORE_THAN_ONE_GUESS",
    );
  return [pyStrip(content[0]).toLowerCase(), explanation ? pyStrip(explanation[1]) : ""];
}

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** `validate_guess`: letters only (abort), exact length (abort), known word (reprompt). */
export function validateGuess(guess: string, words: WordleWords, known: ReadonlySet<string>): void {
  if (!pyIsAlpha(guess) || guess.includes(" "))
    throw new WordleResponseError(
      "The guess should be a single word and should only contain letters.",
      "INVALID_FORMAT",
    );
  if ([...guess].length !== words.max_word_length)
    throw new WordleResponseError(
      `The length of the guessed word is not ${words.max_word_length}.`,
      "INVALID_WORD_LENGTH",
    );
  if (!known.has(guess))
    throw new WordleResponseError(
      "The guessed word is not a valid word for this game.",
      "NOT_VALID_WORD_FOR_GAME",
      true,
    );
}

/** `validate_agreement`: a single alphabetic word among `yes`/`no`. */
export function validateAgreement(agreement: string, words: WordleWords): void {
  if (!pyIsAlpha(agreement) || agreement.includes(" "))
    throw new WordleResponseError(
      "The agreement should be a single word and should only contain letters.",
      "INVALID_FORMAT",
    );
  if (!words.agreement_match_keywords_lang.includes(agreement))
    throw new WordleResponseError(
      `The agreement should be one of the following: ['${words.agreement_match_keywords_lang.join("', '")}']`,
      "NOT_VALID_CRITIC_WORD",
    );
}

/** The GM's messages (`ResponseFormatter`). */
export class WordleFormatter {
  constructor(readonly w: WordleWords) {}
  private formatHint(contentLang: string, contentWord: string): string {
    return (
      `${this.w.error_prompt_text.INVALID_FORMAT}\n` +
      `${this.w.explanation_lang} ${this.w.explanataion_details_lang}\n` +
      `${contentLang} ${contentWord}`
    );
  }
  turnStats(stats: [string, unknown][]): string {
    return stats.map(([k, v]) => `${k} = ${v === null || v === undefined ? "None" : String(v)}`).join("\n");
  }
  repromptForGuesser(errorKey: string): string {
    return (
      `${this.w.error_prompt_text[errorKey]} ${this.w.error_prompt_text.RETRY}\n\n` +
      this.formatHint(this.w.guess_lang, this.w.guess_word_lang)
    );
  }
  responseForGuesser(feedback: string): string {
    return `${this.w.guess_feedback_lang} ${feedback}\n\n` + this.formatHint(this.w.guess_lang, this.w.guess_word_lang);
  }
  responseForGuesserWithCritic(clue: string, explanation: string, agreement: string): string {
    return (
      `${this.w.clue_lang} ${clue}\n` +
      `${this.w.guess_agreement_lang} ${agreement}\n` +
      `${this.w.agreement_explanation_lang} ${explanation}\n\n` +
      this.formatHint(this.w.guess_lang, this.w.guess_word_lang)
    );
  }
  responseForCritic(clue: string, explanation: string, guess: string, isInitial: boolean): string {
    const head = `${this.w.clue_lang} ${clue}\n${this.w.explanation_lang} ${explanation}\n${this.w.guess_lang} ${guess}`;
    if (isInitial) return head;
    return `${head}\n\n` + this.formatHint(this.w.agreement_lang, this.w.agreement_word_lang);
  }
}

// interaction keys (wordle/master.py)
export const GUESSER_GUESSES = "Guesser Guesses";
export const GUESSER_EXPLANATIONS = "Guesser Explanations";
export const GUESSER_FEEDBACKS = "Guesser Feedbacks";
export const GUESSER_GUESSES_COMMITTED = "Guesser Guesses Committed";
export const CRITIC_JUDGEMENTS = "Critic Judgements";

const knownWordsCache = new WeakMap<string[], Set<string>>();
function knownWords(list: string[]): Set<string> {
  let s = knownWordsCache.get(list);
  if (!s) knownWordsCache.set(list, (s = new Set(list)));
  return s;
}

/** Basic Wordle: one guesser, colour feedback from the GM. */
export class WordleMaster extends DialogueGameMaster {
  protected words!: WordleWords;
  protected known!: Set<string>;
  protected formatter!: WordleFormatter;
  protected targetWord = "";
  protected maxRounds = 6;
  protected maxRetry = 5;
  protected guesserInitialPrompt = "";
  guesser!: Player;
  success = false;
  failure = false;
  aborted = false;
  protected validResponse = false;
  protected repromptAttempts = 0;
  protected error: WordleResponseError | null = null;
  protected currentGuess: string | null = null;
  protected currentExplanation: string | null = null;
  protected guessFeedback: string | null = null;
  requestCounts = 0;
  parsedRequestCounts = 0;
  violatedRequestCounts = 0;
  protected guesserGuesses: string[] = [];
  protected guesserExplanations: string[] = [];
  protected guesserFeedbacks: string[] = [];

  constructor(
    gameName: string,
    experiment: Experiment,
    protected readonly backends: PlayerBackend[],
  ) {
    super(gameName, experiment);
  }

  protected onSetup(instance: GameInstance): void {
    const where = `${this.gameName}/${this.experiment.name}/${instance.game_id}`;
    this.targetWord = pyStrip(field<string>(instance, "target_word", where)).toLowerCase();
    this.words = field<WordleWords>(this.experiment, "lang_keywords", where);
    const common = field<Record<string, unknown>>(this.experiment, "common_config", where);
    this.maxRounds = Number(common.n_turns ?? common.max_attempts_per_game);
    const retry = common.max_retry_per_error as number | Record<string, number>;
    this.maxRetry = typeof retry === "object" ? retry.NOT_VALID_WORD_FOR_GAME : retry;
    const prompt = field<string | { content: string }[]>(this.experiment, "guesser_prompt", where);
    this.guesserInitialPrompt = typeof prompt === "string" ? prompt : prompt[0].content;
    this.known = knownWords(this.words.official_words_list);
    this.formatter = new WordleFormatter(this.words);
    this.addPlayers(instance);
  }

  protected addPlayers(_instance: GameInstance): void {
    this.guesser = new Player(this.backends[0], "WordGuesser");
    this.addPlayer(this.guesser, { initialContext: this.guesserInitialPrompt });
  }

  protected doesGameProceed(): boolean {
    return !(this.success || this.failure || this.aborted);
  }

  protected validatePlayerResponse(player: Player, response: string): boolean {
    return this.validateGuesser(player, response);
  }

  protected validateGuesser(_player: Player, response: string): boolean {
    this.requestCounts += 1;
    try {
      const [guess, explanation] = parseWordleResponse(response, this.words);
      this.currentGuess = guess;
      this.currentExplanation = explanation;
      validateGuess(guess, this.words, this.known);
      this.parsedRequestCounts += 1;
      this.validResponse = true;
      this.repromptAttempts = 0;
      this.error = null;
      return true;
    } catch (e) {
      if (!(e instanceof WordleResponseError)) throw e;
      if (e.unknownWord) this.parsedRequestCounts += 1;
      else this.violatedRequestCounts += 1;
      this.validResponse = false;
      this.error = e;
      this.logToSelf("metadata", `Error: ${e.reason}`);
      return false;
    }
  }

  protected override shouldPassTurn(): boolean {
    if (!this.validResponse) {
      if (this.error?.unknownWord) {
        this.repromptAttempts += 1;
        if (this.repromptAttempts > this.maxRetry) {
          this.logToSelf("invalid format", "game_result = ABORT");
          this.aborted = true;
        } else {
          this.setContextFor(this.guesser, this.formatter.repromptForGuesser(this.error.key));
        }
      } else {
        this.logToSelf("invalid format", "game_result = ABORT");
        this.aborted = true;
      }
      return false;
    }
    return true;
  }

  protected override startNextRound(): boolean {
    return this.validResponse;
  }

  protected turnStats(): [string, unknown][] {
    return [
      ["attempts", this.currentRound + 1],
      ["target_word", this.targetWord],
      ["guess", this.currentGuess],
      ["guess_feedback", this.guessFeedback],
    ];
  }

  protected onValidPlayerResponse(_player: Player, _parsed: string | null): void {
    const guess = this.currentGuess!;
    this.guessFeedback = wordleFeedback(guess, this.targetWord);
    this.logToSelf("metadata", this.formatter.turnStats(this.turnStats()));
    this.guesserFeedbacks.push(this.guessFeedback);
    this.guesserGuesses.push(guess);
    this.guesserExplanations.push(this.currentExplanation ?? "");
    if (this.targetWord === guess) {
      this.logToSelf("correct guess", "game_result = WIN");
      this.success = true;
    } else if (this.currentRound + 1 >= this.maxRounds) {
      this.logToSelf("max rounds played", "game_result = LOSS");
      this.failure = true;
    } else {
      this.setContextFor(this.guesser, this.formatter.responseForGuesser(this.guessFeedback));
    }
  }

  protected override onAfterGame(): void {
    this.logRequestOutcome(this);
    this.logKey(GUESSER_GUESSES, this.guesserGuesses);
    this.logKey(GUESSER_FEEDBACKS, this.guesserFeedbacks);
    this.logKey(GUESSER_EXPLANATIONS, this.guesserExplanations);
  }
}

/** Wordle with a clue: the guesser's prompt is an initial prompt and its first context is `clue: <clue>`. */
export class WordleWithClueMaster extends WordleMaster {
  protected clue = "";

  protected override onSetup(instance: GameInstance): void {
    super.onSetup(instance);
    this.clue = pyStrip(field<string>(instance, "target_word_clue", `${this.gameName}/${instance.game_id}`));
  }

  protected override addPlayers(_instance: GameInstance): void {
    this.guesser = new Player(this.backends[0], "WordGuesser");
    this.addPlayer(this.guesser, { initialPrompt: this.guesserInitialPrompt });
  }

  protected override onBeforeGame(): void {
    this.setContextFor(this.guesser, `${this.words.clue_lang} ${this.clue}`);
  }

  protected override turnStats(): [string, unknown][] {
    return [
      ["attempts", this.currentRound + 1],
      ["target_word", this.targetWord],
      ["target_word_clue", this.clue],
      ["guess", this.currentGuess],
      ["guess_feedback", this.guessFeedback],
    ];
  }
}

/**
 * Wordle with clue and critic: each round is guesser → critic → guesser; only the committed (second)
 * guess gets colour feedback. Any critic violation aborts.
 */
export class WordleWithCriticMaster extends WordleWithClueMaster {
  critic!: Player;
  protected criticInitialPrompt = "";
  protected awaitingCritic = true;
  protected commitGuess = false;
  protected currentAgreement: string | null = null;
  protected currentAgreementExplanation: string | null = null;
  protected criticsJudgements: string[] = [];

  /** a717f238 behaviour: the critic gets no initial prompt (see `wordleWithCriticNoCriticPrompt`). */
  protected criticWithoutPrompt = false;

  protected override addPlayers(_instance: GameInstance): void {
    const p = this.experiment.guesser_critic_prompt as string | { content: string }[];
    this.criticInitialPrompt = typeof p === "string" ? p : p[0].content;
    this.guesser = new Player(this.backends[0], "ReflectingWordGuesser");
    this.addPlayer(this.guesser, { initialPrompt: this.guesserInitialPrompt });
    this.critic = new Player(this.backends[1] ?? this.backends[0], "WordCritic");
    if (this.criticWithoutPrompt) this.addPlayer(this.critic);
    else this.addPlayer(this.critic, { initialPrompt: this.criticInitialPrompt });
    this.awaitingCritic = true;
    this.commitGuess = false;
  }

  protected override validatePlayerResponse(player: Player, response: string): boolean {
    if (player === this.guesser) return this.validateGuesser(player, response);
    this.requestCounts += 1;
    try {
      const [agreement, explanation] = parseWordleResponse(response, this.words, true);
      this.currentAgreement = agreement;
      this.currentAgreementExplanation = explanation;
      validateAgreement(agreement, this.words);
      this.parsedRequestCounts += 1;
      return true;
    } catch (e) {
      if (!(e instanceof WordleResponseError)) throw e;
      this.violatedRequestCounts += 1;
      this.aborted = true;
      this.logToSelf("metadata", e.reason);
      this.logToSelf("invalid format", "game_result = ABORT");
      return false;
    }
  }

  protected override onValidPlayerResponse(player: Player, parsed: string | null): void {
    if (player === this.guesser) {
      if (this.awaitingCritic) {
        this.guesserGuesses.push(this.currentGuess!);
        const content = this.formatter.responseForCritic(
          this.clue,
          this.currentExplanation ?? "",
          this.currentGuess!,
          this.currentRound === 0,
        );
        this.setContextFor(this.critic, content);
      } else {
        this.commitGuess = true;
        super.onValidPlayerResponse(player, parsed);
      }
    }
    if (player === this.critic) {
      this.criticsJudgements.push(this.currentAgreement!);
      this.setContextFor(
        this.guesser,
        this.formatter.responseForGuesserWithCritic(
          this.clue,
          this.currentAgreementExplanation ?? "",
          this.currentAgreement!,
        ),
      );
      this.awaitingCritic = false;
    }
  }

  protected override startNextRound(): boolean {
    return this.commitGuess;
  }

  protected override onBeforeRound(): void {
    this.awaitingCritic = true;
    this.commitGuess = false;
  }

  protected override shouldPassTurn(): boolean {
    if (this.currentPlayer === this.critic) return true;
    if (!super.shouldPassTurn()) return false;
    return this.awaitingCritic;
  }

  protected override doesGameProceed(): boolean {
    if (this.awaitingCritic && !this.aborted) return true;
    return super.doesGameProceed();
  }

  protected override onAfterGame(): void {
    super.onAfterGame();
    // guesses hold [initial_1, committed_1, initial_2, ...]
    this.logKey(
      GUESSER_GUESSES,
      this.guesserGuesses.filter((_, i) => i % 2 === 0),
    );
    this.logKey(
      GUESSER_GUESSES_COMMITTED,
      this.guesserGuesses.filter((_, i) => i % 2 === 1),
    );
    this.logKey(CRITIC_JUDGEMENTS, this.criticsJudgements);
  }
}

/** Speed scores of plain wordle by number of rounds (wordle/master.py SPEED_SCORES). */
export const SPEED_SCORES: Record<number, number> = { 1: 100, 2: 100, 3: 100, 4: 50, 5: 30, 6: 20 };
export const GUESS_REPETITIONS = "Guess Repetitions";
export const CLOSENESS_SCORE = "Closeness Score";
export const STRATEGY_SCORE = "Strategy Score";

export class WordleScorer extends GameScorer {
  protected override scoreTurns(interactions: Interactions): void {
    const feedbacks = (interactions[GUESSER_FEEDBACKS] as string[]) ?? [];
    if (feedbacks.length === 0) {
      this.logTurnScore(0, CLOSENESS_SCORE, Number.NaN);
      this.logTurnScore(0, STRATEGY_SCORE, Number.NaN);
      return;
    }
    for (const [i, s] of turnsCloseness(feedbacks).entries()) this.logTurnScore(i + 1, CLOSENESS_SCORE, s);
    const aborted = toNumber(interactions[M.METRIC_ABORTED]) !== 0;
    for (const [i, s] of turnsStrategy(feedbacks, aborted).entries()) this.logTurnScore(i + 1, STRATEGY_SCORE, s);
  }

  protected computeSpeed(interactions: Interactions): unknown {
    const rounds = interactions.turns.length;
    if (this.gameName === "wordle") return SPEED_SCORES[rounds];
    return pyFloat(pyRound(100 / rounds, 2));
  }

  protected guessRepetition(interactions: Interactions): number {
    const guesses = (interactions[GUESSER_GUESSES] as string[]) ?? [];
    return guesses.length - new Set(guesses).size;
  }

  protected override logMainScore(interactions: Interactions): void {
    if (toNumber(interactions[M.METRIC_ABORTED])) {
      this.logEpisodeScore(M.BENCH_SCORE, Number.NaN);
      this.logEpisodeScore(GUESS_REPETITIONS, Number.NaN);
    } else if (toNumber(interactions[M.METRIC_LOSE])) {
      this.logEpisodeScore(M.BENCH_SCORE, 0);
      this.logEpisodeScore(GUESS_REPETITIONS, this.guessRepetition(interactions));
    } else if (toNumber(interactions[M.METRIC_SUCCESS])) {
      this.logEpisodeScore(M.BENCH_SCORE, this.computeSpeed(interactions));
      this.logEpisodeScore(GUESS_REPETITIONS, this.guessRepetition(interactions));
    } else {
      throw new Error("wordle: cannot compute Main Score because neither aborted, lose nor success is set");
    }
  }
}

export const CHANGE_OF_OPINION = "Change-Of-Opinion";

export class WordleWithCriticScorer extends WordleScorer {
  protected override guessRepetition(interactions: Interactions): number {
    const guesses = (interactions[GUESSER_GUESSES_COMMITTED] as string[]) ?? [];
    return guesses.length - new Set(guesses).size;
  }

  protected override logMainScore(interactions: Interactions): void {
    super.logMainScore(interactions);
    const guesses = (interactions[GUESSER_GUESSES] as string[]) ?? [];
    const committed = (interactions[GUESSER_GUESSES_COMMITTED] as string[]) ?? [];
    const judgements = (interactions[CRITIC_JUDGEMENTS] as string[]) ?? [];
    const n = Math.min(guesses.length, committed.length, judgements.length);
    let totalYes = 0;
    let totalNo = 0;
    let sameYes = 0;
    let diffYes = 0;
    let sameNo = 0;
    let diffNo = 0;
    const overall: number[] = [];
    for (let i = 0; i < n; i++) {
      const changed = guesses[i] !== committed[i];
      overall.push(changed ? 1 : 0);
      if (judgements[i] === "yes") {
        totalYes++;
        if (changed) diffYes++;
        else sameYes++;
      } else {
        totalNo++;
        if (changed) diffNo++;
        else sameNo++;
      }
    }
    let repAgree: unknown = Number.NaN;
    let repDisagree: unknown = Number.NaN;
    let adjAgree: unknown = Number.NaN;
    let adjDisagree: unknown = Number.NaN;
    if (overall.length > 0) {
      for (const [i, c] of overall.entries()) this.logTurnScore(i + 1, CHANGE_OF_OPINION, c);
      if (totalYes > 0) {
        repAgree = pyFloat(pyRound(sameYes / totalYes, 2));
        adjAgree = pyFloat(pyRound(diffYes / totalYes, 2));
      } else {
        repAgree = 0;
        adjAgree = 0;
      }
      if (totalNo > 0) {
        repDisagree = pyFloat(pyRound(sameNo / totalNo, 2));
        adjDisagree = pyFloat(pyRound(diffNo / totalNo, 2));
      } else {
        repDisagree = 0;
        adjDisagree = 0;
      }
    }
    this.logEpisodeScore("Repetition-Guesser-On-Critic-Agreement", repAgree);
    this.logEpisodeScore("Non-Repetition-Guesser-On-Critic-Agreement", adjAgree);
    this.logEpisodeScore("Repetition-Guesser-On-Critic-Disagreement", repDisagree);
    this.logEpisodeScore("Non-Repetition-Guesser-On-Critic-Disagreement", adjDisagree);
  }
}

function wordleGame(
  name: "wordle" | "wordle_withclue" | "wordle_withcritic",
  Master: typeof WordleMaster,
  Scorer: typeof WordleScorer,
  roles: string[],
): GameDefinition {
  return {
    name,
    players: roles.length,
    roles,
    createMaster: (experiment, backends) => new Master(name, experiment, backends),
    createScorer: (experiment, instance) => new Scorer(name, experiment, instance),
  };
}

export const wordle = wordleGame("wordle", WordleMaster, WordleScorer, ["Guesser"]);
export const wordleWithClue = wordleGame("wordle_withclue", WordleWithClueMaster, WordleScorer, ["Guesser"]);
/** clembench a717f238 exactly: its critic receives no initial prompt (a regression of that commit). */
class WordleWithCriticNoPromptMaster extends WordleWithCriticMaster {
  protected override criticWithoutPrompt = true;
}

/**
 * wordle_withcritic as clembench a717f238 runs it (critic without instructions). Not in GAMES; pass it to
 * `runBenchmark({ games: [wordleWithCriticNoCriticPrompt] })` to reproduce that commit.
 */
export const wordleWithCriticNoCriticPrompt = wordleGame(
  "wordle_withcritic",
  WordleWithCriticNoPromptMaster,
  WordleWithCriticScorer,
  ["Guesser", "Critic"],
);

export const wordleWithCritic = wordleGame("wordle_withcritic", WordleWithCriticMaster, WordleWithCriticScorer, [
  "Guesser",
  "Critic",
]);

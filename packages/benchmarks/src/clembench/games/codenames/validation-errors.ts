// clembench `codenames/validation_errors.py` (a717f238): the rule violations of the two roles. They are
// game events (logged as "validation error" with the attributes below, in this order), not API errors.

export const CLUEGIVER = "Cluegiver";
export const GUESSER = "Guesser";

/** `ValidationErrorTypes` values. */
export const ErrorType = {
  RAMBLING_ERROR: "rambling error",
  PREFIX_ERROR: "prefix error",
  RELATED_CLUE_ERROR: "clue is morphologically related to word on the board",
  TOO_FEW_TEXT: "answer only contained one line",
  CLUE_CONTAINS_SPACES: "clue contains spaces",
  CLUE_CONTAINS_INVALID_CHARACTERS: "clue contains non-alphabetical characters",
  GUESS_CONTAINS_INVALID_CHARACTERS: "guess contains non-alphabetical characters",
  CLUE_CONTAINS_NUMBER_OF_TARGETS: "clue line contains the number of targets",
  CLUE_ON_BOARD: "clue is word on board",
  NO_CORRECT_TARGET: "no correct target",
  REPEATED_TARGET: "target was already guessed",
  DOUBLE_TARGET: "target appears more than once in utterance",
  HALLUCINATED_TARGET: "target is hallucination",
  WRONG_NUMBER_OF_GUESSES: "wrong number of guesses",
  GUESS_IS_CLUE: "guess is clue word",
  REPEATED_GUESS: "guess was already guessed",
  DOUBLE_GUESS: "guess appears more than once in utterance",
  GUESS_HALLUCINATION: "guess word is hallucination",
  NO_CORRECT_GUESS: "no correct guess",
} as const;

/** A rule violation; `attributes` is what the reference logs (`get_dict()`). */
export class CodenamesRuleViolation extends Error {
  readonly attributes: Record<string, unknown>;
  constructor(player: string, type: string, utterance: string, message: string, extra: Record<string, unknown> = {}) {
    super(message);
    this.name = "CodenamesRuleViolation";
    this.attributes = { player, type, utterance, message, ...extra };
  }
}

const v = (player: string, type: string, utterance: string, message: string, extra?: Record<string, unknown>) =>
  new CodenamesRuleViolation(player, type, utterance, message, extra);

// Guesser errors
export const missingGuessPrefix = (utterance: string, prefix: string) =>
  v(GUESSER, ErrorType.PREFIX_ERROR, utterance, `Your guesses did not start with the correct prefix (${prefix}).`, {
    prefix,
  });
export const guesserRamblingError = (utterance: string) =>
  v(
    GUESSER,
    ErrorType.RAMBLING_ERROR,
    utterance,
    "Your answer contained more than one line, please only give one round of guesses on one line.",
  );
export const wrongNumberOfGuessesError = (utterance: string, guesses: string[], allowed: number) =>
  v(
    GUESSER,
    ErrorType.WRONG_NUMBER_OF_GUESSES,
    utterance,
    `You made too many guesses (${guesses.length}). You are only allowed to make ${allowed} guesses!`,
    { guesses, number_of_allowed_guesses: allowed },
  );
export const noCorrectGuessError = (utterance: string, guesses: string[], remainingWords: string[]) =>
  v(
    GUESSER,
    ErrorType.NO_CORRECT_GUESS,
    utterance,
    "All of your guesses are invalid. You can only choose words as guesses from the remaining words and at least one guess has to be valid.",
    { guesses, remaining_words: remainingWords },
  );
export const guessContainsInvalidCharacters = (utterance: string, guess: string) =>
  v(
    GUESSER,
    ErrorType.GUESS_CONTAINS_INVALID_CHARACTERS,
    utterance,
    `Guessed word '${guess}' contains invalid characters, only put your target word, no other characters around it (apart from commas).`,
    { guess },
  );
export const guessIsClueError = (utterance: string, clue: string, guess: string) =>
  v(
    GUESSER,
    ErrorType.GUESS_IS_CLUE,
    utterance,
    `Guessed word '${guess}' is the same word as the provided clue word, you should only select words from the provided list.`,
    { guess, clue },
  );
export const hallucinatedGuessError = (
  utterance: string,
  guess: string,
  previousGuesses: string[],
  remainingWords: string[],
) =>
  v(
    GUESSER,
    ErrorType.GUESS_HALLUCINATION,
    utterance,
    `Guessed word '${guess}' was not listed, you can only guess words provided in the lists.`,
    { guess, previous_guesses: previousGuesses, remaining_words: remainingWords },
  );
export const doubleGuessError = (utterance: string, guess: string, remainingWords: string[]) =>
  v(
    GUESSER,
    ErrorType.DOUBLE_GUESS,
    utterance,
    `Guessed word '${guess}' appears more than once in your answer, put each guessed word only once.`,
    { guess, remaining_words: remainingWords },
  );
export const repeatedGuessError = (utterance: string, guess: string, previousGuesses: string[]) =>
  v(
    GUESSER,
    ErrorType.REPEATED_GUESS,
    utterance,
    `Guessed word '${guess}' was already guessed previously, pay attention to the newly provided list of remaining words.`,
    { guess, previous_guesses: previousGuesses },
  );

// Cluegiver errors
export const relatedClueError = (utterance: string, clue: string, similarBoardWord: string) =>
  v(
    CLUEGIVER,
    ErrorType.RELATED_CLUE_ERROR,
    utterance,
    `Your clue '${clue}' is morphologically similar to the word ${similarBoardWord}, please choose another clue word.`,
    { clue, similar_board_word: similarBoardWord },
  );
export const tooFewTextError = (utterance: string) =>
  v(
    CLUEGIVER,
    ErrorType.TOO_FEW_TEXT,
    utterance,
    "Your answer did not contain clue and targets on two separate lines.",
  );
export const cluegiverRamblingError = (utterance: string) =>
  v(
    CLUEGIVER,
    ErrorType.RAMBLING_ERROR,
    utterance,
    "Your answer contained more than two lines, please only give one clue and your targets on two separate lines.",
  );
export const repeatedTargetError = (utterance: string, target: string, previousTargets: string[]) =>
  v(
    CLUEGIVER,
    ErrorType.REPEATED_TARGET,
    utterance,
    `Targeted word '${target}' was already guessed, pay attention to the newly provided list of remaining words.`,
    { target, previous_targets: previousTargets },
  );
export const hallucinatedTargetError = (
  utterance: string,
  target: string,
  previousTargets: string[],
  remainingWords: string[],
) =>
  v(
    CLUEGIVER,
    ErrorType.HALLUCINATED_TARGET,
    utterance,
    `Targeted word '${target}' was not listed, you can only target words provided in the lists.`,
    { target, previous_targets: previousTargets, remaining_words: remainingWords },
  );
export const doubleTargetError = (utterance: string, target: string, remainingWords: string[]) =>
  v(
    CLUEGIVER,
    ErrorType.DOUBLE_TARGET,
    utterance,
    `Targeted word '${target}' was targeted more than once, put each target only once.`,
    { target, remaining_words: remainingWords },
  );
export const noCorrectTargetError = (utterance: string, targets: string[], remainingWords: string[]) =>
  v(
    CLUEGIVER,
    ErrorType.NO_CORRECT_TARGET,
    utterance,
    "All of your targets are invalid. You can only choose words as targets from the remaining words and at least one target has to be valid.",
    { targets, remaining_words: remainingWords },
  );
export const clueOnBoardError = (utterance: string, clue: string, board: string[]) =>
  v(
    CLUEGIVER,
    ErrorType.CLUE_ON_BOARD,
    utterance,
    `Clue '${clue}' is one of the words on the board, please come up with a new word.`,
    { clue, board },
  );
/** Logged with player "Guesser" although the cluegiver made it (reference quirk, kept: it counts for the guesser). */
export const clueContainsNumberOfTargets = (utterance: string, clue: string) =>
  v(
    GUESSER,
    ErrorType.CLUE_CONTAINS_NUMBER_OF_TARGETS,
    utterance,
    "Only provide the clue word and the target words in the requested format, do not add the number of targets on your own.",
    { clue },
  );
export const clueContainsSpaces = (utterance: string, clue: string) =>
  v(
    CLUEGIVER,
    ErrorType.CLUE_CONTAINS_SPACES,
    utterance,
    `Clue '${clue}' contains spaces and thus is not a single word.`,
    {
      clue,
    },
  );
export const clueContainsNonAlphabeticalCharacters = (utterance: string, clue: string) =>
  v(
    CLUEGIVER,
    ErrorType.CLUE_CONTAINS_INVALID_CHARACTERS,
    utterance,
    `Clue '${clue}' contains non-alphabetical characters, please give a correct single English word.`,
    { clue },
  );
export const missingCluePrefix = (utterance: string, prefix: string) =>
  v(CLUEGIVER, ErrorType.PREFIX_ERROR, utterance, `Your clue did not start with the correct prefix (${prefix}).`, {
    prefix,
  });
export const missingTargetPrefix = (utterance: string, prefix: string) =>
  v(CLUEGIVER, ErrorType.PREFIX_ERROR, utterance, `Your targets did not start with the correct prefix (${prefix}).`, {
    prefix,
  });

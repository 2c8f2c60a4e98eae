// clembench `codenames/players.py` (a717f238): how the cluegiver's and guesser's replies are validated and
// parsed. The v2.0 experiments switch on only STRIP WORDS; the other flags relax the rules (generous_instances).
import { Player, type PlayerBackend } from "../../player.js";
import { pyStrip } from "../../py.js";
import type { CodenamesFlags } from "./flags.js";
import { zeroCounts } from "./flags.js";
import * as E from "./validation-errors.js";
import type { WordNetLemmatizer } from "./wordnet-lemmatizer.js";

/** `constants.CHARS_TO_STRIP` and `NUMBERS_TO_STRIP`. */
export const CHARS_TO_STRIP = " .,<>\"'";
export const NUMBERS_TO_STRIP = " ,0123456789";

/** `re.sub(r',(?=[^\s])', ', ', text)`: a space after every comma that is followed by a non-space. */
export function addSpaceAfterComma(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    out += text[i];
    if (text[i] === "," && i + 1 < text.length && pyStrip(text[i + 1]) !== "") out += " ";
  }
  return out;
}

/** The first line starting with `prefix`, or null. */
export function findLineStartingWith(prefix: string, lines: readonly string[]): string | null {
  for (const line of lines) if (line.startsWith(prefix)) return line;
  return null;
}

const removePrefix = (s: string, prefix: string) => (s.startsWith(prefix) ? s.slice(prefix.length) : s);
const hasAnyOf = (s: string, chars: string) => [...chars].some((c) => s.includes(c));
const count = (xs: readonly string[], x: string) => xs.filter((y) => y === x).length;

export class ClueGiver extends Player {
  readonly cluePrefix = "CLUE: ";
  readonly targetPrefix = "TARGETS: ";
  clue = "clue";
  numberOfTargets = 2;
  targets: string[] = ["target", "word"];
  retries = 0;
  readonly flagsEngaged: Record<string, number>;

  constructor(
    backend: PlayerBackend,
    readonly flags: CodenamesFlags,
    private readonly lemmatizer: WordNetLemmatizer,
  ) {
    super(backend, "ClueGiver");
    this.flagsEngaged = zeroCounts(flags);
  }

  /** The clue must not share its WordNet noun lemma with a hidden word (first such word is reported). */
  checkMorphologicalSimilarity(utterance: string, clue: string, remainingWords: readonly string[]): void {
    const clueLemma = this.lemmatizer.lemmatize(clue);
    const i = remainingWords.findIndex((w) => this.lemmatizer.lemmatize(w) === clueLemma);
    if (i >= 0) throw E.relatedClueError(utterance, clue, remainingWords[i]);
  }

  /** Throws a CodenamesRuleViolation for the first rule the reply breaks (reference order). */
  validateResponse(utterance: string, previousTargets: readonly string[], remainingWords: readonly string[]): void {
    const flags = this.flags;
    utterance = addSpaceAfterComma(utterance);
    const parts = utterance.split("\n");
    // len(parts) < 1 cannot happen for str.split (TooFewTextError is unreachable in the reference too)
    if (parts.length > 2) {
      if (!flags["IGNORE RAMBLING"]) throw E.cluegiverRamblingError(utterance);
      this.flagsEngaged["IGNORE RAMBLING"] += 1;
    }
    const clueLine = findLineStartingWith(this.cluePrefix, parts);
    const targetLine = findLineStartingWith(this.targetPrefix, parts);
    if (!clueLine) throw E.missingCluePrefix(utterance, this.cluePrefix);
    if (!targetLine) throw E.missingTargetPrefix(utterance, this.targetPrefix);

    let clue = removePrefix(clueLine, this.cluePrefix).toLowerCase();
    if (hasAnyOf(clue, CHARS_TO_STRIP)) {
      if (!flags["STRIP WORDS"]) throw E.clueContainsNonAlphabeticalCharacters(utterance, clue);
      this.flagsEngaged["STRIP WORDS"] += 1;
      clue = pyStrip(clue, CHARS_TO_STRIP);
    }
    if (/, [0-9]+/.test(clue)) {
      if (!flags["IGNORE NUMBER OF TARGETS"]) throw E.clueContainsNumberOfTargets(utterance, clue);
      this.flagsEngaged["IGNORE NUMBER OF TARGETS"] += 1;
      clue = pyStrip(clue, NUMBERS_TO_STRIP);
    }

    let targets = removePrefix(targetLine, this.targetPrefix).split(", ");
    for (const t of targets)
      if (hasAnyOf(t, CHARS_TO_STRIP) && flags["STRIP WORDS"]) this.flagsEngaged["STRIP WORDS"] += 1;
    if (flags["STRIP WORDS"]) targets = targets.map((t) => pyStrip(t, CHARS_TO_STRIP));
    targets = targets.map((t) => t.toLowerCase());

    if (clue.includes(" ")) throw E.clueContainsSpaces(utterance, clue);
    // a clue equal to a board word is caught here already, so ClueOnBoardError never fires (kept for fidelity)
    this.checkMorphologicalSimilarity(utterance, clue, remainingWords);
    if (remainingWords.includes(clue)) throw E.clueOnBoardError(utterance, clue, [...remainingWords]);

    let incorrect = 0;
    for (const target of targets) {
      if (!remainingWords.includes(target)) {
        incorrect += 1;
        if (flags["IGNORE FALSE TARGETS OR GUESSES"]) this.flagsEngaged["IGNORE FALSE TARGETS OR GUESSES"] += 1;
        else if (previousTargets.includes(target)) throw E.repeatedTargetError(utterance, target, [...previousTargets]);
        else throw E.hallucinatedTargetError(utterance, target, [...previousTargets], [...remainingWords]);
      }
      if (count(targets, target) > 1) {
        if (flags["IGNORE FALSE TARGETS OR GUESSES"]) this.flagsEngaged["IGNORE FALSE TARGETS OR GUESSES"] += 1;
        else throw E.doubleTargetError(utterance, target, [...remainingWords]);
      }
    }
    if (targets.length === incorrect) throw E.noCorrectTargetError(utterance, targets, [...remainingWords]);
  }

  /** Sets clue, targets and their number; returns the reply as the reference re-renders it. */
  parseResponse(utterance: string, remainingWords: readonly string[]): string {
    utterance = addSpaceAfterComma(utterance);
    const parts = utterance.split("\n");
    const clue = removePrefix(findLineStartingWith(this.cluePrefix, parts) ?? "", this.cluePrefix);
    const targets = removePrefix(findLineStartingWith(this.targetPrefix, parts) ?? "", this.targetPrefix);
    // digits are stripped from the clue's ends here even when validation let them through (quirk kept)
    this.clue = pyStrip(pyStrip(clue.toLowerCase(), CHARS_TO_STRIP), NUMBERS_TO_STRIP);
    this.targets = targets.split(", ").map((t) => pyStrip(t, CHARS_TO_STRIP).toLowerCase());
    if (this.flags["IGNORE FALSE TARGETS OR GUESSES"])
      this.targets = this.targets.filter((w) => remainingWords.includes(w));
    this.numberOfTargets = this.targets.length;
    return this.recoverUtterance();
  }

  recoverUtterance(): string {
    return `${this.cluePrefix}${this.clue}\n${this.targetPrefix}${this.targets.join(", ")}`;
  }
}

export class Guesser extends Player {
  readonly prefix = "GUESS: ";
  guesses: string[] = ["guess", "word"];
  retries = 0;
  readonly flagsEngaged: Record<string, number>;

  constructor(
    backend: PlayerBackend,
    readonly flags: CodenamesFlags,
  ) {
    super(backend, "Guesser");
    this.flagsEngaged = zeroCounts(flags);
  }

  validateResponse(
    utterance: string,
    previousGuesses: readonly string[],
    remainingWords: readonly string[],
    numberOfAllowedGuesses: number,
    clue: string,
  ): void {
    const flags = this.flags;
    utterance = addSpaceAfterComma(utterance);
    if (utterance.includes("\n")) {
      if (!flags["IGNORE RAMBLING"]) throw E.guesserRamblingError(utterance);
      const line = findLineStartingWith(this.prefix, utterance.split("\n"));
      this.flagsEngaged["IGNORE RAMBLING"] += 1;
      if (line) utterance = line;
    }
    if (!utterance.startsWith(this.prefix)) throw E.missingGuessPrefix(utterance, this.prefix);
    utterance = removePrefix(utterance, this.prefix);

    let guesses = utterance.split(", ");
    for (const g of guesses)
      if (hasAnyOf(g, CHARS_TO_STRIP)) {
        if (!flags["STRIP WORDS"]) throw E.guessContainsInvalidCharacters(utterance, g);
        this.flagsEngaged["STRIP WORDS"] += 1;
      }
    if (flags["STRIP WORDS"]) guesses = guesses.map((g) => pyStrip(g, CHARS_TO_STRIP));
    guesses = guesses.map((g) => g.toLowerCase());
    if (!(guesses.length > 0 && guesses.length <= numberOfAllowedGuesses))
      throw E.wrongNumberOfGuessesError(utterance, guesses, numberOfAllowedGuesses);

    let incorrect = 0;
    for (const guess of guesses) {
      if (guess === clue) {
        if (flags["IGNORE FALSE TARGETS OR GUESSES"]) this.flagsEngaged["IGNORE FALSE TARGETS OR GUESSES"] += 1;
        else throw E.guessIsClueError(utterance, clue, guess);
      }
      if (!remainingWords.includes(guess)) {
        incorrect += 1;
        if (flags["IGNORE FALSE TARGETS OR GUESSES"]) this.flagsEngaged["IGNORE FALSE TARGETS OR GUESSES"] += 1;
        else if (previousGuesses.includes(guess)) throw E.repeatedGuessError(utterance, guess, [...previousGuesses]);
        else throw E.hallucinatedGuessError(utterance, guess, [...previousGuesses], [...remainingWords]);
      }
      if (count(guesses, guess) > 1) {
        if (flags["IGNORE FALSE TARGETS OR GUESSES"]) this.flagsEngaged["IGNORE FALSE TARGETS OR GUESSES"] += 1;
        else throw E.doubleGuessError(utterance, guess, [...remainingWords]);
      }
    }
    if (guesses.length === incorrect) throw E.noCorrectGuessError(utterance, guesses, [...remainingWords]);
  }

  parseResponse(utterance: string, remainingWords: readonly string[]): string {
    utterance = addSpaceAfterComma(utterance);
    if (this.flags["IGNORE RAMBLING"]) utterance = findLineStartingWith(this.prefix, utterance.split("\n")) ?? "";
    utterance = removePrefix(utterance, this.prefix);
    this.guesses = utterance.split(", ").map((w) => pyStrip(w, CHARS_TO_STRIP).toLowerCase());
    if (this.flags["IGNORE FALSE TARGETS OR GUESSES"])
      this.guesses = this.guesses.filter((w) => remainingWords.includes(w));
    return this.recoverUtterance();
  }

  recoverUtterance(): string {
    return `${this.prefix}${this.guesses.join(", ")}`;
  }
}

// Wordle's turn-level failure modes, judged by the game's own rules and derived from good replies.
//
// ARP's repair phases (docs/ARCHITECTURE.md §Recipes) train on turn-local preference pairs: the
// same conversation, a good guesser reply as chosen and a faulty one as rejected. The seed built
// them synthetically from the failure modes it diagnosed in Wordle; this module is where Wordle's
// side of that lives, beside the game master whose parser and validator decide what is faulty:
// - "repeat": a guess the guesser already made (its feedback is known, so the round is wasted);
// - "length": a guess that is not `max_word_length` letters (the game aborts: INVALID_WORD_LENGTH);
// - "invalid": five letters that are no word of the game's list (NOT_VALID_WORD_FOR_GAME, a reprompt);
// - "duplicate_field": the `guess:` field given twice (a second `guess:` line; the game aborts:
//   UNKNOWN_TAGS / MORE_THAN_ONE_GUESS).
// A corruption changes only the guess word, or appends only the second `guess:` line, so the
// rejected reply differs from the chosen one exactly by its fault.
import { cleanReply } from "../player.js";
import { pyIsAlpha } from "../py.js";
import { type WordleWords, WordleResponseError, parseWordleResponse, validateGuess } from "./wordle.js";

/** The failure modes a guesser reply can show (the names of rollout's diagnosers). */
export type WordleFault = "repeat" | "length" | "invalid" | "duplicate_field";

export const WORDLE_FAULTS: readonly WordleFault[] = ["repeat", "length", "invalid", "duplicate_field"];

/** The game's verdict on one guesser reply in its context. */
export type WordleVerdict =
  | { ok: true; guess: string }
  /** `key` is the game's error key (or "REPEATED_GUESS"); "format" covers the other format errors. */
  | { ok: false; fault: WordleFault | "format"; key: string };

/** The rules a verdict needs: the game's words block and its list as a set (lower case). */
export interface WordleRules {
  words: WordleWords;
  known: ReadonlySet<string>;
}

export function wordleRules(words: WordleWords): WordleRules {
  return { words, known: new Set(words.official_words_list.map((w) => w.toLowerCase())) };
}

const GUESS_LINE = /^(\s*guess:[ \t]*)(\S+)/im;

/**
 * The guesses of the earlier guesser replies in a conversation (assistant messages), as the game
 * parses them; replies the game could not parse are skipped.
 */
export function wordleEarlierGuesses(
  messages: readonly { role: string; content?: string | null }[],
  rules: WordleRules,
): string[] {
  const out: string[] = [];
  for (const m of messages) {
    if (m.role !== "assistant") continue;
    try {
      out.push(parseWordleResponse(cleanReply(m.content ?? ""), rules.words)[0]);
    } catch (e) {
      if (!(e instanceof WordleResponseError)) throw e;
    }
  }
  return out;
}

/** Judge a guesser reply as the game master does (parse, validate), then against the earlier guesses. */
export function judgeWordleReply(reply: string, rules: WordleRules, earlier: readonly string[]): WordleVerdict {
  const text = cleanReply(reply);
  try {
    const [guess] = parseWordleResponse(text, rules.words);
    validateGuess(guess, rules.words, rules.known);
    if (earlier.includes(guess)) return { ok: false, fault: "repeat", key: "REPEATED_GUESS" };
    return { ok: true, guess };
  } catch (e) {
    if (!(e instanceof WordleResponseError)) throw e;
    const guessFields = text.match(/guess:/gi)?.length ?? 0;
    const fault: WordleFault | "format" =
      e.key === "INVALID_WORD_LENGTH"
        ? "length"
        : e.key === "NOT_VALID_WORD_FOR_GAME"
          ? "invalid"
          : e.key === "MORE_THAN_ONE_GUESS" || (e.key === "UNKNOWN_TAGS" && guessFields > 1)
            ? "duplicate_field"
            : "format";
    return { ok: false, fault, key: e.key };
  }
}

function replaceGuess(reply: string, word: string): string {
  return reply.replace(GUESS_LINE, (_m, head: string) => `${head}${word}`);
}

const LETTERS = "abcdefghijklmnopqrstuvwxyz";

/**
 * A faulty reply of `fault` derived from the good guesser reply `reply` (seeded by `rng`), or null
 * when the context allows none (a repeat needs an earlier guess, and `reply` must be one the game
 * accepts). The result differs from `reply` only in the guess word, or (duplicate_field) by one
 * appended `guess:` line.
 */
export function corruptWordleReply(
  reply: string,
  fault: WordleFault,
  context: { rules: WordleRules; earlier: readonly string[]; rng: () => number },
): string | null {
  const { rules, earlier, rng } = context;
  const verdict = judgeWordleReply(reply, rules, earlier);
  if (!verdict.ok || !GUESS_LINE.test(reply)) return null;
  const guess = verdict.guess;
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)];
  const size = rules.words.max_word_length;
  if (fault === "repeat") {
    const earlierOthers = [...new Set(earlier)].filter((g) => g !== guess);
    return earlierOthers.length > 0 ? replaceGuess(reply, pick(earlierOthers)) : null;
  }
  if (fault === "length") {
    // One letter short or one too many: the guess stays a plausible word-like string.
    const word = rng() < 0.5 ? guess.slice(0, size - 1) : `${guess}${pick([...LETTERS])}`;
    return replaceGuess(reply, word);
  }
  if (fault === "invalid") {
    // Swap two neighbouring letters or change one, until it is no word of the list.
    for (let attempt = 0; attempt < 64; attempt++) {
      const letters = [...guess];
      const i = Math.floor(rng() * letters.length);
      if (rng() < 0.5 && i + 1 < letters.length) [letters[i], letters[i + 1]] = [letters[i + 1], letters[i]];
      else letters[i] = pick([...LETTERS]);
      const word = letters.join("");
      if (word !== guess && pyIsAlpha(word) && !rules.known.has(word)) return replaceGuess(reply, word);
    }
    return null;
  }
  // duplicate_field: a second guess line naming another word of the list.
  const list = rules.words.official_words_list;
  let other = pick(list).toLowerCase();
  if (other === guess) other = list[(list.indexOf(other) + 1) % list.length].toLowerCase();
  return `${reply.replace(/\s+$/, "")}\n${rules.words.guess_lang} ${other}`;
}

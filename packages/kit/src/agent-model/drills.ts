// Spelling drills for the embedded agent model: plain-text lines that spell words letter by letter and
// reverse them. The games' experts copy and reverse prompt content (taboo's describer writes the target
// backwards, guesswhat's guesser names a candidate), but taboo has 48 training targets: a model that saw
// only those reversals wrote the same clue whatever the held-out target (kit README, "The embedded
// agent model"). Drills over a few thousand words teach the letters of the tokenizer's pieces.
// Held-out taboo targets are never drilled, so the evaluation still asks for a reversal it has not seen.
import { clembench } from "@kiln/benchmarks";
import { mulberry32 } from "@kiln/rollout";
import { isHeldOutInstance } from "./clem-split.js";
import type { CorpusDocument } from "./corpus.js";

export interface SpellingDrillOptions {
  seed: number;
  /** Documents (default 300). */
  documents?: number;
  /** Lines per document (default 24). */
  linesPerDocument?: number;
  /** Words sampled from Wordle's official list besides the games' own words (default 1500). */
  wordleWords?: number;
}

interface TabooInstance {
  target_word: string;
  related_word?: string[];
}

interface GuessWhatInstance {
  candidate_list?: string[];
}

function instancesOf<T>(game: string): T[] {
  const file = clembench.loadGameInstances(game);
  return file.experiments.flatMap((e) => (e.game_instances ?? []) as unknown as T[]);
}

/**
 * The words drilled: taboo's training targets and every related word, guesswhat's candidates and a seeded
 * sample of Wordle's word list, lower case, letters only, without any held-out taboo target.
 */
export function spellingDrillWords(seed: number, wordleWords = 1500): string[] {
  const taboo = instancesOf<TabooInstance>("taboo");
  const heldOut = new Set(taboo.filter((_, i) => isHeldOutInstance(i)).map((t) => t.target_word.toLowerCase()));
  const words = new Set<string>();
  const add = (w: string) => {
    const lower = w.trim().toLowerCase();
    if (/^[a-z]{2,14}$/.test(lower) && !heldOut.has(lower)) words.add(lower);
  };
  taboo.forEach((t, i) => {
    if (!isHeldOutInstance(i)) add(t.target_word);
    for (const r of t.related_word ?? []) add(r);
  });
  for (const g of instancesOf<GuessWhatInstance>("guesswhat")) for (const c of g.candidate_list ?? []) add(c);
  const list = (
    clembench.loadGameInstances("wordle").experiments[0].lang_keywords as {
      official_words_list: string[];
    }
  ).official_words_list;
  const rng = mulberry32(seed * 7_919 + 17);
  const wanted = words.size + wordleWords;
  for (let tries = 0; words.size < wanted && tries < wordleWords * 20; tries++)
    add(list[Math.floor(rng() * list.length)]);
  return [...words].sort();
}

const reversed = (w: string) => [...w].reverse().join("");

/** One drill line about `word`: its spelling, its reversal, or the reversal read back. */
export function spellingDrillLine(word: string, kind: number): string {
  switch (kind % 3) {
    case 0:
      return `${word} is spelled ${[...word].join(" ")}.`;
    case 1:
      return `${word} backwards is ${reversed(word)}.`;
    default:
      return `${reversed(word)} backwards is ${word}.`;
  }
}

/** Plain-text drill documents (seeded): every word appears in turn, each line a spelling or a reversal. */
export function spellingDrills(options: SpellingDrillOptions): CorpusDocument[] {
  const words = spellingDrillWords(options.seed, options.wordleWords);
  const rng = mulberry32(options.seed * 104_729 + 3);
  const documents = options.documents ?? 300;
  const lines = options.linesPerDocument ?? 24;
  const out: CorpusDocument[] = [];
  let next = 0;
  const order = words.slice();
  for (let d = 0; d < documents; d++) {
    const text: string[] = [];
    for (let l = 0; l < lines; l++) {
      if (next % order.length === 0) {
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(rng() * (i + 1));
          [order[i], order[j]] = [order[j], order[i]];
        }
      }
      const word = order[next % order.length];
      text.push(spellingDrillLine(word, Math.floor(rng() * 3)));
      next++;
    }
    out.push({ game: "drills/spelling", skill: "drill", text: text.join("\n") });
  }
  return out;
}

export interface CopyDrillOptions {
  seed: number;
  /** Documents (default 300). */
  documents?: number;
  /** Lines per document (default 12). */
  linesPerDocument?: number;
}

const capitalised = (w: string) => w[0].toUpperCase() + w.slice(1);

/**
 * One copy-drill line over `words` (at least 8): a list said again, a word to clue reversed beside words
 * to avoid (taboo's task), or a candidate list in guesswhat's notation with the next candidate not yet
 * asked about. Only copying from earlier in the line predicts
 * the second half: the words are random, so no memorised answer fits.
 */
export function copyDrillLine(words: string[], kind: number, asked: number): string {
  switch (kind % 3) {
    case 0: {
      const list = words.slice(0, 5).join(", ");
      return `list: ${list}. again: ${list}.`;
    }
    case 1:
      return `word: ${words[0]}. avoid: ${words.slice(1, 4).join(", ")}. clue: ${reversed(words[0])} backwards.`;
    default: {
      const names = words.slice(0, 8).map(capitalised);
      const done = names.slice(0, asked % 8);
      return `candidates: [${names.map((n) => `'${n}'`).join(", ")}]. asked: ${done.length > 0 ? done.join(", ") : "none"}. next: ${names[asked % 8]}.`;
    }
  }
}

/** The `game` of every copy-drill document (what the build's copy warm-up trains on). */
export const COPY_DRILL_GAME = "drills/copy";

/** Plain-text copy drills (seeded), words drawn from spellingDrillWords. */
export function copyDrills(options: CopyDrillOptions): CorpusDocument[] {
  const pool = spellingDrillWords(options.seed);
  const rng = mulberry32(options.seed * 15_485_863 + 5);
  const documents = options.documents ?? 300;
  const lines = options.linesPerDocument ?? 12;
  const out: CorpusDocument[] = [];
  for (let d = 0; d < documents; d++) {
    const text: string[] = [];
    for (let l = 0; l < lines; l++) {
      const words = new Set<string>();
      while (words.size < 8) words.add(pool[Math.floor(rng() * pool.length)]);
      text.push(copyDrillLine([...words], Math.floor(rng() * 3), Math.floor(rng() * 8)));
    }
    out.push({ game: COPY_DRILL_GAME, skill: "drill", text: text.join("\n") });
  }
  return out;
}

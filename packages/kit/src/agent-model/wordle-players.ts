// Wordle transcripts for the embedded agent model, played through clembench's own Wordle game master
// on its training instances (every fifth instance is held out, as `kiln arp --env wordle` does), so the
// prompts and the feedback are the benchmark's. Players keep the words consistent with the feedback
// within a small vocabulary; weaker ones often ignore the feedback or write a word of the wrong length.
// In wordle_withcritic the critic's verdict on a guess comes back before the game scores it, and the
// players keep that guess (as clembench's scripted solver does).
import { clembench } from "@kiln/benchmarks";
import { type Message, type Policy, mulberry32, runEpisodes, trajectoryMessages } from "@kiln/rollout";
import { isTrainingInstance } from "./clem-split.js";
import type { CorpusDocument } from "./corpus.js";

export type WordleSkill = "solver" | "careless";

/**
 * A careless player's wrong-length guess: the word it meant, one letter short or one too long. The 2026-12-06
 * model was built with eight fixed words instead ("sun", "breads", …), and greedy decoding wrote them where the
 * valid guesses were spread thin: none of its held-out wordle_withcritic episodes was played to the end.
 */
function wrongLength(meant: string, rng: () => number): string {
  return rng() < 0.5 ? meant.slice(0, -1) : `${meant}s`;
}

/** What wordle_withcritic shows the guesser after the critic has judged its guess (benchmarks' wordle game). */
const CRITIC_VERDICT = /guess_agreement:/;

/**
 * Every player's first word when it is not making a mistake (clembench's scripted Wordle solver opens
 * with it too). A first guess drawn from the whole vocabulary was unlearnable for the tiny model: it
 * answered the first prompt with a misspelt four-letter word and the game aborted.
 */
export const WORDLE_OPENER = "crane";

function officialWords(): string[] {
  const file = clembench.loadGameInstances("wordle");
  return (file.experiments[0].lang_keywords as { official_words_list: string[] }).official_words_list.map((w) =>
    w.toLowerCase(),
  );
}

function instanceTargets(): Set<string> {
  const targets = new Set<string>();
  for (const e of clembench.loadGameInstances("wordle").experiments)
    for (const inst of e.game_instances as { target_word?: string }[])
      if (inst.target_word) targets.add(inst.target_word.toLowerCase());
  return targets;
}

/** A vocabulary of `size` list words (a seeded sample) plus every instance target. */
export function wordleVocabulary(size: number, seed: number): string[] {
  const words = officialWords();
  const rng = mulberry32(seed);
  const picked = instanceTargets();
  while (picked.size < size) picked.add(words[Math.floor(rng() * words.length)]);
  return [...picked].sort();
}

/** Every word clembench's Wordle accepts plus every instance target: where a player looks when its own words run out. */
export function wordleDictionary(): string[] {
  return [...new Set([...officialWords(), ...instanceTargets()])].sort();
}

/**
 * Share of the corpus solver's episodes played with the target missing from its vocabulary. With every target
 * in it, a solver's guess after "1 words fit" always won, and no document showed a wrong single fit and what
 * comes after it; the shipped 2026-12-06 model, whose own counting is loose, said "1 words fit" early and then wrote
 * the same wrong word until wordle_withclue's game ended (quality 0 on every held-out episode).
 */
export const WORDLE_UNKNOWN_TARGET_RATE = 0.3;

/**
 * What the feedback so far says, tersely, each letter its own token: `_ n _ _ _; f not 4 5; out a c e r`
 * (the greens in place, each yellow letter with the places it is not in, the letters out). Letters marked red that
 * are green or yellow elsewhere (a repeated letter) are not called out; a part with nothing to say is left out.
 * Terse because the reply that carries it must fit the 64 tokens `kiln repro arp` gives a reply (spelt out in words,
 * a fifth of the corpus's Wordle replies ran past 64 tokens, and a cut reply loses its guess). Empty
 * before any feedback.
 */
export function wordleConstraints(history: readonly (readonly [string, string])[]): string {
  const at = new Map<number, string>();
  const notAt = new Map<string, Set<number>>();
  const present = new Set<string>();
  const red = new Set<string>();
  let length = 0;
  for (const [, feedback] of history) {
    let position = 0;
    for (const [, letter, mark] of feedback.matchAll(/([a-z])<(green|yellow|red)>/g)) {
      if (mark === "green") {
        at.set(position, letter);
        present.add(letter);
      } else if (mark === "yellow") {
        if (!notAt.has(letter)) notAt.set(letter, new Set());
        notAt.get(letter)?.add(position);
        present.add(letter);
      } else red.add(letter);
      position++;
    }
    length = Math.max(length, position);
  }
  const parts: string[] = [];
  if (at.size > 0) parts.push(Array.from({ length }, (_, p) => at.get(p) ?? "_").join(" "));
  for (const [letter, positions] of [...notAt.entries()].sort(([a], [b]) => a.localeCompare(b)))
    parts.push(
      `${letter} not ${[...positions]
        .sort((p, q) => p - q)
        .map((p) => p + 1)
        .join(" ")}`,
    );
  const out = [...red].filter((letter) => !present.has(letter)).sort();
  if (out.length > 0) parts.push(`out ${out.join(" ")}`);
  return parts.join("; ");
}

/** The word after a reply's `guess:` (lower case), or undefined when the reply has none. */
function guessIn(content: string | null | undefined): string | undefined {
  return /guess:\s*(\S+)/i.exec(content ?? "")?.[1]?.toLowerCase();
}

/** Whether the last user message is the critic's verdict (wordle_withcritic), which a reply answers by keeping its guess. */
function afterCriticVerdict(messages: readonly Message[]): boolean {
  return CRITIC_VERDICT.test(messages.findLast((m) => m.role === "user")?.content ?? "");
}

function history(messages: readonly Message[]): [string, string][] {
  const out: [string, string][] = [];
  let last: string | null = null;
  for (const m of messages) {
    if (m.role === "assistant") last = guessIn(m.content) ?? null;
    else if (m.role === "user" && last) {
      const fb = /guess_feedback: (.*)/.exec(m.content ?? "");
      if (fb) out.push([last, fb[1]]);
    }
  }
  return out;
}

/** How one Wordle reply after feedback relates to the feedback before it (readWordleReplies). */
export interface WordleReplyReading {
  /** Feedbacks given before this reply (1 for the reply to the first guess's feedback). */
  feedbacks: number;
  /** Its explanation opens with exactly wordleConstraints of the same feedback (the constraint corpus's line). */
  constraintsExact: boolean;
  /** Its guess is a word every feedback so far allows (the target could still be it). */
  fitsFeedback: boolean;
  /** Its guess is the previous guess again. */
  repeatsPrevious: boolean;
}

/**
 * Reads a played Wordle episode's replies against its feedback: for each reply after feedback (not the replies
 * to a critic's verdict, which keep the guess by design), whether its spelt-out constraints are exact, whether
 * its guess fits the feedback, and whether it repeats the previous guess. This is how the constraint corpus's
 * build was judged (kit README, "The constraint corpus, built"); a reply without a guess line is skipped.
 */
export function readWordleReplies(messages: readonly Message[]): WordleReplyReading[] {
  const readings: WordleReplyReading[] = [];
  let previousGuess: string | undefined;
  for (const [i, m] of messages.entries()) {
    if (m.role !== "assistant") continue;
    const guess = guessIn(m.content);
    const before = messages.slice(0, i);
    const h = history(before);
    if (guess !== undefined && h.length > 0 && !afterCriticVerdict(before)) {
      const explanation = /explanation:\s*(.*)/i.exec(m.content ?? "")?.[1]?.trim() ?? "";
      const constraints = wordleConstraints(h);
      readings.push({
        feedbacks: h.length,
        constraintsExact: constraints !== "" && explanation.startsWith(`${constraints}; `),
        fitsFeedback: h.every(([g, fb]) => clembench.wordleFeedback(g, guess) === fb),
        repeatsPrevious: guess === previousGuess,
      });
    }
    if (guess !== undefined) previousGuess = guess;
  }
  return readings;
}

export interface WordlePlayerOptions {
  /**
   * Share of the replies after feedback whose explanation spells out what the feedback says (wordleConstraints)
   * before the count of words that fit (default 0: the count alone, as the shipped model's corpus).
   */
  constraintRate?: number;
}

/**
 * A Wordle player of `skill` over `vocabulary` (seeded; episodes must run one at a time). When no word of
 * its vocabulary fits the feedback (a vocabulary without the target), it says so and guesses among the
 * words of wordleDictionary() that fit, never one it has guessed.
 */
export function wordlePlayer(
  skill: WordleSkill,
  vocabulary: readonly string[],
  seed: number,
  options: WordlePlayerOptions = {},
): Policy {
  const constraintRate = options.constraintRate ?? 0;
  if (!(constraintRate >= 0 && constraintRate <= 1))
    throw new RangeError(`wordlePlayer: constraintRate must be from 0 to 1, got ${constraintRate}`);
  const rng = mulberry32(seed);
  let wider: readonly string[] | undefined;
  return {
    id: `wordle-${skill}`,
    async generate(messages) {
      const h = history(messages);
      const fits = vocabulary.filter((w) => h.every(([g, fb]) => clembench.wordleFeedback(g, w) === fb));
      const u = rng();
      const guesses = messages
        .filter((m) => m.role === "assistant")
        .map((m) => guessIn(m.content))
        .filter((g): g is string => g !== undefined);
      const verdict = guesses.length > 0 && afterCriticVerdict(messages);
      // No draw at rate 0, so that the default corpus stays the one the shipped model was built from.
      const spell = h.length > 0 && !verdict && constraintRate > 0 && (constraintRate >= 1 || rng() < constraintRate);
      const spelled = spell ? `${wordleConstraints(h)}; ` : "";
      let meant: string;
      let explanation = verdict
        ? "the critic has spoken, I keep my guess"
        : `${spelled}${fits.length} words fit the feedback`;
      if (verdict) meant = guesses[guesses.length - 1];
      else if (guesses.length === 0) meant = WORDLE_OPENER;
      else if (skill === "careless" && u >= 0.15 && u < 0.6) meant = vocabulary[Math.floor(rng() * vocabulary.length)];
      else if (fits.length > 0) meant = fits[Math.floor(rng() * fits.length)];
      else {
        wider ??= wordleDictionary();
        const said = new Set(guesses);
        const more = wider.filter((w) => !said.has(w) && h.every(([g, fb]) => clembench.wordleFeedback(g, w) === fb));
        meant = more.length > 0 ? more[Math.floor(rng() * more.length)] : WORDLE_OPENER;
        // Spelt out, the reply says it in fewer tokens (wordleConstraints: the 64-token reply budget).
        explanation = spell
          ? `${spelled}none of mine fit, ${more.length} other words do`
          : `none of my words fits the feedback, ${more.length} other words do`;
      }
      const guess = skill === "careless" && u < 0.15 ? wrongLength(meant, rng) : meant;
      const text = `explanation: ${explanation}\nguess: ${guess}`;
      return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
    },
  };
}

/** `episodes` Wordle games on the training instances, half by each skill. */
export async function wordleCorpus(options: {
  seed: number;
  episodes: number;
  vocabulary?: number;
}): Promise<CorpusDocument[]> {
  const vocabulary = wordleVocabulary(options.vocabulary ?? 400, options.seed);
  const docs: CorpusDocument[] = [];
  for (const skill of ["solver", "careless"] as const) {
    const r = await runEpisodes({
      makeEnv: () => new clembench.ClemGameEnvironment({ game: "wordle", pick: isTrainingInstance }),
      policy: wordlePlayer(skill, vocabulary, options.seed + (skill === "solver" ? 1 : 2)),
      episodes: Math.ceil(options.episodes / 2),
      baseSeed: options.seed * 7 + (skill === "solver" ? 0 : 50_000),
      limits: { maxTurns: 8 },
      concurrency: 1,
    });
    for (const t of r.trajectories) docs.push({ game: "wordle", skill, messages: trajectoryMessages(t) });
  }
  return docs;
}

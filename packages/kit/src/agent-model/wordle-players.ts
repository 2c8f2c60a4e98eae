// Wordle transcripts for the embedded agent model, played through clembench's own Wordle game master
// on its training instances (every fifth instance is held out, as `kiln arp --env wordle` does), so the
// prompts and the feedback are the benchmark's. Players keep the words consistent with the feedback
// within a small vocabulary; weaker ones often ignore the feedback or write a word of the wrong length.
import { clembench } from "@kiln/benchmarks";
import { type Message, type Policy, mulberry32, runEpisodes, trajectoryMessages } from "@kiln/rollout";
import { isTrainingInstance } from "./clem-split.js";
import type { CorpusDocument } from "./corpus.js";

export type WordleSkill = "solver" | "careless";

const WRONG_LENGTH = ["cat", "house", "apples", "tree", "plant", "ocean", "sun", "breads"];

/**
 * Every player's first word when it is not making a mistake (clembench's scripted Wordle solver opens
 * with it too). A first guess drawn from the whole vocabulary was unlearnable for the tiny model: it
 * answered the first prompt with a misspelt four-letter word and the game aborted.
 */
export const WORDLE_OPENER = "crane";

/** A vocabulary of `size` list words (a seeded sample) plus every instance target. */
export function wordleVocabulary(size: number, seed: number): string[] {
  const file = clembench.loadGameInstances("wordle");
  const words = (file.experiments[0].lang_keywords as { official_words_list: string[] }).official_words_list;
  const rng = mulberry32(seed);
  const picked = new Set<string>();
  for (const e of file.experiments)
    for (const inst of e.game_instances as { target_word?: string }[])
      if (inst.target_word) picked.add(inst.target_word.toLowerCase());
  while (picked.size < size) picked.add(words[Math.floor(rng() * words.length)].toLowerCase());
  return [...picked].sort();
}

function history(messages: readonly Message[]): [string, string][] {
  const out: [string, string][] = [];
  let last: string | null = null;
  for (const m of messages) {
    if (m.role === "assistant") last = /guess:\s*(\S+)/i.exec(m.content ?? "")?.[1]?.toLowerCase() ?? null;
    else if (m.role === "user" && last) {
      const fb = /guess_feedback: (.*)/.exec(m.content ?? "");
      if (fb) out.push([last, fb[1]]);
    }
  }
  return out;
}

/** A Wordle player of `skill` over `vocabulary` (seeded; episodes must run one at a time). */
export function wordlePlayer(skill: WordleSkill, vocabulary: readonly string[], seed: number): Policy {
  const rng = mulberry32(seed);
  return {
    id: `wordle-${skill}`,
    async generate(messages) {
      const h = history(messages);
      const fits = vocabulary.filter((w) => h.every(([g, fb]) => clembench.wordleFeedback(g, w) === fb));
      let guess: string;
      const u = rng();
      const opening = !messages.some((m) => m.role === "assistant" && /guess:/i.test(m.content ?? ""));
      if (skill === "careless" && u < 0.15) guess = WRONG_LENGTH[Math.floor(rng() * WRONG_LENGTH.length)];
      else if (opening) guess = WORDLE_OPENER;
      else if (skill === "careless" && u < 0.6) guess = vocabulary[Math.floor(rng() * vocabulary.length)];
      else guess = fits.length > 0 ? fits[Math.floor(rng() * fits.length)] : vocabulary[0];
      const text = `explanation: ${fits.length} words fit the feedback\nguess: ${guess}`;
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

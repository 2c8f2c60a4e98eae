// The embedded agent model's training corpus: transcripts of scripted players of mixed skill, rendered
// through the chat template exactly as a local policy sees its conversation, plus plain text.
import {
  type EpisodeSpec,
  GuessNumberEnv,
  type Message,
  ScriptedPolicy,
  type ToolSchema,
  mulberry32,
  runEpisodes,
  trajectoryMessages,
} from "@kiln/rollout";
import { withSystemNote } from "../recipes/system-note.js";
import { GUESS_SKILL_MIX, type GuessSkill, guessPlayerScript, pickSkill } from "./guess-number-players.js";
import { GUESS_NUMBER_LESSON } from "./notes.js";

/** One training document: a conversation (rendered with the chat template) or plain text. */
export interface CorpusDocument {
  game: string;
  skill: string;
  messages?: Message[];
  /** Tool schemas rendered into the prompt, as a policy given these tools sees them (tau2 retail). */
  tools?: ToolSchema[];
  text?: string;
  /**
   * Which tokens carry the loss: "all" (default); "last", only the final assistant reply — for
   * windowed documents whose context repeats across the documents of one episode; "assistant", every
   * assistant reply (a game's prompts are the game's, not the player's).
   */
  lossOn?: "all" | "last" | "assistant";
}

/** Turns a guess-number episode may take (bisection needs at most 7 for 1..100). */
export const GUESS_NUMBER_MAX_TURNS = 7;

/**
 * `episodes` guess-number games, each by a player drawn from GUESS_SKILL_MIX; an expert's transcript
 * carries GUESS_NUMBER_LESSON in its system prompt with probability `noteRate`.
 */
export async function guessNumberCorpus(options: {
  seed: number;
  episodes: number;
  noteRate?: number;
  mix?: Readonly<Record<GuessSkill, number>>;
}): Promise<CorpusDocument[]> {
  const rng = mulberry32(options.seed);
  const bySkill = new Map<GuessSkill, EpisodeSpec[]>();
  for (let i = 0; i < options.episodes; i++) {
    const skill = pickSkill(options.mix ?? GUESS_SKILL_MIX, rng());
    const list = bySkill.get(skill) ?? [];
    list.push({ id: `gn-${i}`, seed: options.seed * 1_000_003 + i });
    bySkill.set(skill, list);
  }
  const docs: { index: number; doc: CorpusDocument }[] = [];
  for (const [skill, specs] of [...bySkill.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const r = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: new ScriptedPolicy({ id: `guess-${skill}`, script: guessPlayerScript(skill) }),
      episodes: specs,
      limits: { maxTurns: GUESS_NUMBER_MAX_TURNS },
      concurrency: 1,
    });
    for (const t of r.trajectories) {
      let messages = trajectoryMessages(t);
      const index = Number(t.episodeId.slice(3));
      if (skill === "bisect" && mulberry32(options.seed + 7919 * index)() < (options.noteRate ?? 0.5))
        messages = withSystemNote(messages, GUESS_NUMBER_LESSON);
      docs.push({ index, doc: { game: "guess-number", skill, messages } });
    }
  }
  return docs.sort((a, b) => a.index - b.index).map((d) => d.doc);
}

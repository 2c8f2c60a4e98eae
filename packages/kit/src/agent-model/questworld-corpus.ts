// The questworld part of the embedded agent model's corpus: scripted players of graded skill play
// seeded episodes, and every turn becomes one training document — the windowed context the player
// answered from (the view WindowedPolicy gives the model at play time) followed by the player's
// assistant reply. Expert episodes carry QUESTWORLD_SCAFFOLD_NOTE in their system prompt part of
// the time, so the same model with the note added (OPD's scaffolded teacher) plays like the expert.
import { questworld } from "@kiln/benchmarks";
import { type Message, cloneMessages, deriveSeed, formatToolCall, mulberry32 } from "@kiln/rollout";
import { RecipeError } from "../errors.js";
import { withSystemNote } from "../recipes/system-note.js";
import { QUESTWORLD_SKILLS, type QuestworldSkill, questworldPlayer } from "./questworld-players.js";
import { QUESTWORLD_WINDOW_KEEP, type QuestworldWindowOptions, questworldWindow } from "./questworld-window.js";

/** The scaffold note: on expert transcripts only, so a teacher adding it plays like the expert. */
export const QUESTWORLD_SCAFFOLD_NOTE = "Expert play: make the one call that moves the current quest forward.";

/** Corpus and OPD-round seeds start here; evaluation seeds stay below, so evaluations are held out. */
export const QUESTWORLD_TRAIN_SEED_BASE = 1_000_000;

/** A training seed in [QUESTWORLD_TRAIN_SEED_BASE, 2^31). */
export function questworldTrainSeed(seed: number, ...parts: (string | number)[]): number {
  return QUESTWORLD_TRAIN_SEED_BASE + (deriveSeed(seed, ...parts) % (2 ** 31 - QUESTWORLD_TRAIN_SEED_BASE));
}

/**
 * The start the OPD evaluation plays from: quest 1 done, The Healer's Remedy accepted, standing at
 * the apothecary with foraging `foragingLevel` (5 by default: the moonpetals can be gathered at
 * once, so the remaining six stages fit in a few dozen expert calls).
 */
export function questworldOpdStart(
  archetype: questworld.ArchetypeId,
  seed: number,
  foragingLevel = 5,
): questworld.QuestworldState {
  return questworld.wallState(archetype, seed, foragingLevel);
}

export interface QuestworldDocument {
  game: "questworld";
  /** The player's skill name ("expert", "noisy-15", …). */
  skill: string;
  /** Whether the system prompt carries the scaffold note. */
  noted: boolean;
  archetype: questworld.ArchetypeId;
  /** "wall" (questworldOpdStart) or "fresh" (the archetype's own start). */
  start: "wall" | "fresh";
  episode: number;
  turn: number;
  /** Quest stages of the chain completed before this turn (0–10; the reply works on the next one). */
  stagesDone: number;
  /** The windowed context, ending with the player's assistant reply (one tool call). */
  messages: Message[];
  /** The reply as Hermes text, exactly as CHATML_TOOL_TEMPLATE renders the last message's call. */
  completion: string;
  /** The loss is on the reply only: the contexts of one episode's documents overlap. */
  lossOn: "last";
}

export interface QuestworldCorpusOptions {
  seed: number;
  episodes: number;
  /** Window size in messages after the head (default QUESTWORLD_WINDOW_KEEP). */
  keep?: number;
  opening?: QuestworldWindowOptions["opening"];
  /** Default QUESTWORLD_SCAFFOLD_NOTE. */
  scaffoldNote?: string;
  /** Share of expert episodes whose system prompt carries the note (default 0.5). */
  noteRate?: number;
  /** Skill mixture (default QUESTWORLD_SKILLS); weights need not sum to 1. */
  skills?: readonly (QuestworldSkill & { weight: number })[];
  /** Share of episodes from questworldOpdStart rather than the archetype's start (default 0.75). */
  wallRate?: number;
  /** Share of each episode's turns kept as documents, drawn per turn (default 1). */
  turnRate?: number;
  /** Assistant turns per episode at most (default: 100 from the wall, the tool-call budget from a fresh start). */
  maxTurns?: number;
}

function checkRate(name: string, x: number): void {
  if (!(x >= 0 && x <= 1)) throw new RecipeError(`questworldCorpus: ${name} must be in [0, 1], got ${x}`);
}

/**
 * Training documents from `episodes` seeded episodes (archetype, skill and start drawn per
 * episode). Same options ⇒ the same documents, in the same order.
 */
export async function questworldCorpus(options: QuestworldCorpusOptions): Promise<QuestworldDocument[]> {
  const keep = options.keep ?? QUESTWORLD_WINDOW_KEEP;
  const note = options.scaffoldNote ?? QUESTWORLD_SCAFFOLD_NOTE;
  const noteRate = options.noteRate ?? 0.5;
  const wallRate = options.wallRate ?? 0.75;
  const turnRate = options.turnRate ?? 1;
  const skills = options.skills ?? QUESTWORLD_SKILLS;
  if (!Number.isSafeInteger(options.seed))
    throw new RecipeError(`questworldCorpus: seed ${options.seed} must be an integer`);
  if (!Number.isSafeInteger(options.episodes) || options.episodes < 0)
    throw new RecipeError(`questworldCorpus: episodes must be a non-negative integer, got ${options.episodes}`);
  checkRate("noteRate", noteRate);
  checkRate("wallRate", wallRate);
  checkRate("turnRate", turnRate);
  const totalWeight = skills.reduce((a, s) => a + s.weight, 0);
  if (skills.length === 0 || !(totalWeight > 0) || skills.some((s) => !(s.weight >= 0)))
    throw new RecipeError("questworldCorpus: skills need non-negative weights with a positive sum");
  if (options.maxTurns !== undefined && !(Number.isSafeInteger(options.maxTurns) && options.maxTurns >= 1))
    throw new RecipeError(`questworldCorpus: maxTurns must be a positive integer, got ${options.maxTurns}`);

  const docs: QuestworldDocument[] = [];
  for (let episode = 0; episode < options.episodes; episode++) {
    const draw = mulberry32(deriveSeed(options.seed, "questworld-corpus", episode));
    const archetype = questworld.ARCHETYPES[Math.floor(draw() * questworld.ARCHETYPES.length)];
    let r = draw() * totalWeight;
    const skill = skills.find((s) => (r -= s.weight) < 0) ?? skills[skills.length - 1];
    const start = draw() < wallRate ? "wall" : "fresh";
    const noted = skill.epsilon === 0 && draw() < noteRate;
    const seed = questworldTrainSeed(options.seed, "questworld-corpus-world", episode);
    const env = new questworld.QuestworldEnvironment({ archetype });
    const startState = start === "wall" ? questworldOpdStart(archetype, seed) : undefined;
    const startDone = startState
      ? Object.values(questworld.questStages(startState)).reduce((a: number, n) => a + Number(n), 0)
      : 0;
    const ep = await questworld.runQuestworldEpisode({
      env,
      policy: questworldPlayer(() => env.getState(), {
        skill,
        seed: deriveSeed(options.seed, "questworld-corpus-player", episode),
      }),
      seed,
      archetype,
      state: startState,
      maxTurns: options.maxTurns ?? (start === "wall" ? 100 : undefined),
    });
    const conversation = noted ? withSystemNote(ep.messages, note) : ep.messages;
    let turn = 0;
    conversation.forEach((m, i) => {
      if (m.role !== "assistant") return;
      const t = turn++;
      if (turnRate < 1 && !(draw() < turnRate)) return;
      const call = m.tool_calls?.[0];
      if (!call) return;
      const completion = formatToolCall({ name: call.function.name, arguments: call.function.arguments });
      docs.push({
        game: "questworld",
        skill: skill.name,
        noted,
        archetype,
        start,
        episode,
        turn: t,
        stagesDone: startDone + ep.rewards.slice(0, t).reduce((a, r) => a + r, 0),
        messages: [
          ...questworldWindow(conversation.slice(0, i), keep, { opening: options.opening }),
          ...cloneMessages([m]),
        ],
        completion,
        lossOn: "last",
      });
    });
  }
  return docs;
}

/** Characters of the documents' message contents and tool calls (a size measure, not tokens). */
export function questworldCorpusChars(docs: readonly QuestworldDocument[]): number {
  let n = 0;
  for (const d of docs)
    for (const m of d.messages) {
      n += (m.content ?? "").length;
      for (const tc of m.tool_calls ?? []) n += tc.function.name.length + tc.function.arguments.length;
    }
  return n;
}

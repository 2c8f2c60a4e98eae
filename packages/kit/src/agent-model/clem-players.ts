// Players of mixed skill for the clembench games the embedded agent model learns, and the corpus they
// make. Every game is played through ClemGameEnvironment on its training instances (clem-split.ts), the
// agent in role 0 and the other LLM roles played by the scripted experts of @kiln/benchmarks, so each
// document is the conversation exactly as the policy sees it at evaluation. The expert of a game is its
// scripted player from clembench's scripted-players; the weak player is that expert with a share of its
// turns replaced by one of the game's real failure modes (wrong format, a rule-breaking word, repeats,
// the wrong grid, a wrong answer, stopping early).
import { clembench } from "@kiln/benchmarks";
import { type Message, type Policy, cloneMessages, mulberry32, runEpisodes, trajectoryMessages } from "@kiln/rollout";
import { viewPolicy } from "../recipes/opd-samples.js";
import { isHeldOutInstance, isTrainingInstance } from "./clem-split.js";
import { SYNTHETIC_CLEM_GAMES, type SyntheticClemGame, syntheticClemInstances } from "./clem-synthetic.js";
import type { CorpusDocument } from "./corpus.js";
import { WORDLE_UNKNOWN_TARGET_RATE, type WordleSkill, wordlePlayer, wordleVocabulary } from "./wordle-players.js";

/** The clembench games of the agent model's corpus (the agent plays role 0 in each). */
export const AGENT_CLEM_GAMES = [
  "wordle",
  "wordle_withclue",
  "wordle_withcritic",
  "taboo",
  "referencegame",
  "imagegame",
  "privateshared",
  "guesswhat",
] as const;
export type AgentClemGame = (typeof AGENT_CLEM_GAMES)[number];

/** The two skills every game is played at. */
export const CLEM_SKILLS = ["expert", "weak"] as const;
export type ClemSkill = (typeof CLEM_SKILLS)[number];

/** Share of a weak player's turns that make one of the game's failure modes. */
export const WEAK_FAILURE_RATE = 0.35;

/**
 * Taboo's weak describer fails more often, mostly with misspelt reversals (the guesser misses and the
 * game goes on): at 0.35 with every mode alike, 1 weak episode in 80 reached the third round, and the
 * model answered the held-out third rounds in another game's format.
 */
export const TABOO_WEAK_FAILURE_RATE = 0.6;

type Turns = clembench.ChatTurn[];
type Rng = () => number;

function toTurns(messages: readonly Message[]): Turns {
  return messages
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m) => ({ role: m.role as "user" | "assistant", content: m.content ?? "" }));
}

function lastUser(turns: Turns): string {
  for (let i = turns.length - 1; i >= 0; i--) if (turns[i].role === "user") return turns[i].content;
  return "";
}

function pick<T>(list: readonly T[], rng: Rng): T {
  return list[Math.floor(rng() * list.length)];
}

/** The other LLM roles of a game, played by benchmarks' scripted experts (also at evaluation). */
export function clemPartners(game: AgentClemGame): clembench.PlayerBackend[] {
  switch (game) {
    case "wordle_withcritic":
      return [clembench.agreeingCritic()];
    case "taboo":
      return [clembench.reversingGuesser()];
    case "referencegame":
      return [clembench.gridMatchingFollower()];
    case "imagegame":
      return [clembench.commandFollower()];
    case "guesswhat":
      return [clembench.targetNamingAnswerer()];
    default:
      return [];
  }
}

/** The environment a game is played in: role 0, scripted partners, instances kept by `pick`. */
export function clemEnvironment(
  game: AgentClemGame,
  pickInstance: (index: number) => boolean,
  instances?: clembench.InstancesFile,
) {
  return new clembench.ClemGameEnvironment({ game, pick: pickInstance, partners: clemPartners(game), instances });
}

/**
 * The conversation as clemcore's player remembers it: privateshared asks its probes ("ME: …") without
 * memory (`memorize=False`), so a player sees only the probe it is answering, while ClemGameEnvironment's
 * transcript keeps every one (a few thousand tokens by the end, past what the tiny model attends to). Every
 * other game remembers everything. The corpus and the evaluation both play from this view.
 */
export function clemPlayerView(game: string, messages: readonly Message[]): Message[] {
  if (game !== "privateshared") return cloneMessages(messages);
  const out: Message[] = [];
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === "user" && (m.content ?? "").startsWith("ME:") && i < messages.length - 1) {
      i++; // the probe's reply goes with it
      continue;
    }
    out.push(cloneMessages([m])[0]);
  }
  return out;
}

/** `policy` playing `game` from clemPlayerView. */
export function clemViewPolicy(policy: Policy, game: string): Policy {
  return game === "privateshared" ? viewPolicy(policy, (m) => clemPlayerView(game, m), policy.id) : policy;
}

/** The failure-mode replies of a game's weak player for the conversation so far (never empty). */
function failures(game: AgentClemGame, turns: Turns, expert: string, rng: Rng): string[] {
  const first = turns[0]?.content ?? "";
  const mine = turns.filter((t) => t.role === "assistant").map((t) => t.content);
  const previous = mine[mine.length - 1];
  const bare = expert.replace(/^[A-Za-z]+:\s*/, "");
  switch (game) {
    case "taboo": {
      const target = /needs to guess:\n\n(.+)\n/.exec(first)?.[1].trim() ?? "word";
      const related = [...first.matchAll(/^- (.+)$/gm)].map((m) => m[1].trim());
      return [
        `CLUE: ${target} backwards`, // says the target word: the describer loses
        `CLUE: ${related.length > 0 ? pick(related, rng) : target} is close`, // a related word
        bare, // no CLUE: tag
        // Misspelt reversals: well-formed clues the guesser gets wrong, so the game goes on and the corpus
        // shows the describer's later turns (without them the model answered a second turn in another
        // game's format and the episode aborted).
        `CLUE: ${[...target].reverse().join("").slice(1)} backwards`,
        `CLUE: ${[...target].reverse().join("").slice(0, -1)} backwards`,
        `CLUE: ${[...target].reverse().join("").slice(1)} backwards`,
        `CLUE: ${[...target].reverse().join("").slice(0, -1)} backwards`,
        `CLUE: ${[...target].reverse().join("").slice(1, -1)} backwards`,
      ];
    }
    case "referencegame": {
      const grid = (label: string) =>
        new RegExp(`${label}:\\n\\n((?:.+\\n?){5})`).exec(first)?.[1].trim().split("\n").join(" / ") ?? "";
      return [
        `Expression: ${grid("Distractor grid 1")}`,
        `Expression: ${grid("Distractor grid 2")}`,
        bare,
        `Expression: ${grid("Target grid").split(" / ").slice(0, 3).join(" / ")}`,
      ];
    }
    case "imagegame": {
      const m = /row (\d) column (\d)/.exec(expert);
      const shifted = m ? expert.replace(/column \d/, `column ${(Number(m[2]) % 5) + 1}`) : expert;
      // Stopping early (never before the first command: imagegame cannot score an episode without one).
      return [previous !== undefined ? "Command: DONE" : shifted, shifted, previous ?? shifted, bare];
    }
    case "privateshared": {
      // Well-formed mistakes only: a malformed reply is asked again, and the oracle counts every request.
      if (expert.startsWith("ASIDE:")) return [expert.includes("yes") ? "ASIDE: no" : "ASIDE: yes"];
      const values = [...first.matchAll(/: ([^\n:]+)$/gm)].map((v) => v[1].trim());
      return [`ANSWER: ${values.length > 0 ? pick(values, rng) : bare}`];
    }
    case "guesswhat": {
      const list = /List of candidate words: \[(.*)\]/.exec(first)?.[1] ?? "";
      const candidates = [...list.matchAll(/'([^']*)'|"([^"]*)"/g)].map((x) => x[1] ?? x[2]);
      const any = candidates.length > 0 ? pick(candidates, rng) : "thing";
      return [`GUESS: ${any}`, previous ?? `QUESTION: Is it related to ${any}?`, bare, `Is it a ${any}?`];
    }
    default:
      return [bare];
  }
}

/** The scripted expert's backend for one episode of `game` (privateshared's oracle reads its instance). */
function expertBackend(game: AgentClemGame, instance: clembench.GameInstance): clembench.PlayerBackend {
  switch (game) {
    case "taboo":
      return clembench.reversingDescriber();
    case "referencegame":
      return clembench.gridReadingGiver();
    case "imagegame":
      return clembench.cellByCellGiver();
    case "privateshared":
      return clembench.privateSharedOracle(instance);
    case "guesswhat":
      return clembench.candidateByCandidateGuesser();
    default:
      throw new Error(`no scripted expert for ${game}`);
  }
}

/** A player of `skill` for one episode of a non-Wordle game (seeded; plays one episode). */
export function clemPlayer(
  game: Exclude<AgentClemGame, "wordle" | "wordle_withclue" | "wordle_withcritic">,
  skill: ClemSkill,
  instance: clembench.GameInstance,
  seed: number,
): Policy {
  const rng = mulberry32(seed);
  const expert = expertBackend(game, instance);
  return {
    id: `${game}-${skill}`,
    async generate(messages) {
      const turns = toTurns(messages);
      // The expert always answers (privateshared's oracle counts the requests it has seen).
      const good = await expert.respond(turns, { role: "user", content: lastUser(turns) });
      const rate = game === "taboo" ? TABOO_WEAK_FAILURE_RATE : WEAK_FAILURE_RATE;
      const text = skill === "weak" && rng() < rate ? pick(failures(game, turns, good, rng), rng) : good;
      return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
    },
  };
}

/** Turn limits per game: generous, the games end themselves (privateshared asks 35 times). */
const MAX_TURNS: Record<AgentClemGame, number> = {
  wordle: 8,
  wordle_withclue: 8,
  wordle_withcritic: 14,
  taboo: 4,
  referencegame: 2,
  imagegame: 30,
  privateshared: 40,
  guesswhat: 10,
};

export interface ClemCorpusOptions {
  seed: number;
  /** Episodes per game (half expert, half weak). */
  episodes: Partial<Record<AgentClemGame, number>>;
  /** Wordle players' vocabulary size (default 400). */
  wordleVocabulary?: number;
  /** Share of the Wordle players' replies that spell out the feedback (WordlePlayerOptions; default 0). */
  wordleConstraintRate?: number;
  /** Share of a game's episodes played on generated instances (SYNTHETIC_CLEM_GAMES only; default 0). */
  generated?: Partial<Record<SyntheticClemGame, number>>;
}

/**
 * A clembench transcript: which instance it was played on — the index in the game's full list, or with
 * `generated`, in the generated instances (clem-synthetic.ts).
 */
export type ClemDocument = CorpusDocument & { instance: number; generated?: boolean };

/** Share of a privateshared episode's replies kept as (windowed) documents. */
export const PRIVATESHARED_TURN_RATE = 0.3;

/**
 * One episode of `game` by a player of `skill` on the instance at `position` of the instances `pickInstance`
 * keeps, as documents: the whole transcript with the loss on the player's replies (the prompts are the
 * game's) — or, for privateshared, a share of its turns, each the player's view (clemPlayerView) of the
 * conversation up to that reply, with the loss on the reply.
 */
export async function clemEpisodeDocuments(options: {
  game: AgentClemGame;
  skill: ClemSkill;
  pickInstance: (index: number) => boolean;
  position: number;
  seed: number;
  wordleVocabulary: readonly string[];
  /** Share of the Wordle players' replies that spell out the feedback (WordlePlayerOptions; default 0). */
  wordleConstraintRate?: number;
  /** privateshared: share of the replies kept (default PRIVATESHARED_TURN_RATE; 1 keeps all). */
  turnRate?: number;
  /** Instances to play instead of the game's file (generated ones; `pickInstance` indexes them). */
  instances?: clembench.InstancesFile;
}): Promise<ClemDocument[]> {
  const { game, skill, position } = options;
  const def = clembench.getGame(game);
  const all = clembench.listEpisodes(def.name, options.instances ?? clembench.loadGameInstances(def.name));
  const kept = all.map((_, i) => i).filter(options.pickInstance);
  const index = kept[position];
  if (index === undefined) throw new Error(`clembench ${game}: no instance at position ${position} of the split`);
  const policy = game.startsWith("wordle")
    ? wordlePlayer(
        (skill === "expert" ? "solver" : "careless") as WordleSkill,
        wordleEpisodeVocabulary(options.wordleVocabulary, skill, all[index].instance, options.seed),
        options.seed,
        { constraintRate: options.wordleConstraintRate },
      )
    : clemPlayer(game as Exclude<AgentClemGame, `wordle${string}`>, skill, all[index].instance, options.seed);
  const r = await runEpisodes({
    makeEnv: () => clemEnvironment(game, options.pickInstance, options.instances),
    policy,
    episodes: [{ id: `${game}-${index}`, seed: position }],
    limits: { maxTurns: MAX_TURNS[game] },
    concurrency: 1,
  });
  const t = r.trajectories[0];
  if (t.outcome.status === "error")
    throw new Error(`clembench ${game} instance ${index}: ${t.outcome.error?.message ?? "the episode failed"}`);
  const messages = trajectoryMessages(t);
  const generated = options.instances ? { generated: true } : {};
  if (game !== "privateshared") return [{ game, skill, messages, lossOn: "assistant", instance: index, ...generated }];
  const rate = options.turnRate ?? PRIVATESHARED_TURN_RATE;
  const keep = mulberry32(options.seed + 17);
  const docs: ClemDocument[] = [];
  // From the first generated reply on (the second assistant message; the first is the game's pseudo "Ok.").
  for (let i = t.prompt.length; i < messages.length; i++)
    if (messages[i].role === "assistant" && keep() < rate)
      docs.push({
        game,
        skill,
        messages: [...clemPlayerView(game, messages.slice(0, i)), messages[i]],
        lossOn: "last",
        instance: index,
      });
  return docs;
}

/**
 * The words a Wordle player of the corpus knows in one episode: the expert's lack the target in
 * WORDLE_UNKNOWN_TARGET_RATE of its episodes (seeded), so the corpus shows a wrong "1 words fit" guess and
 * the search that goes on after it.
 */
export function wordleEpisodeVocabulary(
  vocabulary: readonly string[],
  skill: ClemSkill,
  instance: clembench.GameInstance,
  seed: number,
): readonly string[] {
  if (skill !== "expert" || mulberry32(seed + 29)() >= WORDLE_UNKNOWN_TARGET_RATE) return vocabulary;
  const target = String((instance as { target_word?: unknown }).target_word ?? "").toLowerCase();
  return vocabulary.filter((w) => w !== target);
}

/**
 * Positions (in the training side of the split, as ClemGameEnvironment's `pick: isTrainingInstance` lists
 * them) of the instances whose opening prompt to role 0 is not also a held-out instance's. referencegame
 * repeats its grid triples across instances that differ only in the other player's order, so half its
 * training instances show the giver a held-out prompt; they are left out. Wordle without a clue shows every
 * instance the same prompt (only the hidden target differs), so it keeps all.
 */
export async function clemTrainPositions(game: AgentClemGame): Promise<number[]> {
  const opening = async (env: clembench.ClemGameEnvironment, i: number) =>
    (await env.reset({ seed: i })).messages.map((m) => m.content ?? "").join("\n");
  const heldout = clemEnvironment(game, isHeldOutInstance);
  const seen = new Set<string>();
  for (let i = 0; i < heldout.instances; i++) seen.add(await opening(heldout, i));
  const train = clemEnvironment(game, isTrainingInstance);
  const out: number[] = [];
  for (let i = 0; i < train.instances; i++) if (game === "wordle" || !seen.has(await opening(train, i))) out.push(i);
  return out;
}

/**
 * Transcripts of every game in `episodes`, each on a training instance drawn at random (seeded),
 * alternately by the expert and the weak player.
 */
export async function clemCorpus(options: ClemCorpusOptions): Promise<ClemDocument[]> {
  const docs: ClemDocument[] = [];
  const vocabulary = wordleVocabulary(options.wordleVocabulary ?? 400, options.seed);
  for (const game of AGENT_CLEM_GAMES) {
    const count = options.episodes[game] ?? 0;
    if (count === 0) continue;
    const positions = await clemTrainPositions(game);
    const g = AGENT_CLEM_GAMES.indexOf(game);
    const rng = mulberry32(options.seed * 1009 + g);
    const share = (SYNTHETIC_CLEM_GAMES as readonly string[]).includes(game)
      ? (options.generated?.[game as SyntheticClemGame] ?? 0)
      : 0;
    // Episodes go in pairs (expert, weak); a pair is played on generated instances or on training ones, the
    // generated pairs spread evenly, so both skills play both kinds.
    const pairs = Math.ceil(count / 2);
    const generatedPairs = Math.round(pairs * share);
    const onGenerated = Array.from(
      { length: count },
      (_, k) =>
        Math.floor(((Math.floor(k / 2) + 1) * generatedPairs) / pairs) >
        Math.floor((Math.floor(k / 2) * generatedPairs) / pairs),
    );
    const generatedCount = onGenerated.filter(Boolean).length;
    const generated =
      generatedCount > 0 ? syntheticClemInstances(game as SyntheticClemGame, generatedCount, options.seed) : undefined;
    let nextGenerated = 0;
    for (let k = 0; k < count; k++) {
      const seed = options.seed * 100_003 + k * 7 + g;
      const skill = k % 2 === 0 ? "expert" : "weak";
      const position = Math.floor(rng() * positions.length);
      docs.push(
        ...(await clemEpisodeDocuments(
          onGenerated[k]
            ? {
                game,
                skill,
                pickInstance: () => true,
                position: nextGenerated++,
                seed,
                wordleVocabulary: vocabulary,
                wordleConstraintRate: options.wordleConstraintRate,
                instances: generated,
              }
            : {
                game,
                skill,
                pickInstance: isTrainingInstance,
                position: positions[position],
                seed,
                wordleVocabulary: vocabulary,
                wordleConstraintRate: options.wordleConstraintRate,
              },
        )),
      );
    }
  }
  return docs;
}

// ARP over the clembench games (docs/ARCHITECTURE.md §Recipes): each game as a rollout
// Environment on its training instances (the held-out ones are for evaluation only), the agent in
// role 0 with the other roles played by the scripted players of @kiln/benchmarks, and the scripted
// experts whose successful episodes are the acquired data of phases A and A2. Wordle adds its
// diagnosers and its turn corruptions (the synthetic pairs of B1/B2).
import { clembench } from "@kiln/benchmarks";
import {
  type DiagnoseOptions,
  type Environment,
  type Message,
  type Policy,
  type Trajectory,
  runEpisodes,
} from "@kiln/rollout";
import { RecipeError } from "../errors.js";
import { wordleVocabulary } from "../agent-model/wordle-players.js";
import type { TurnCorruption } from "./arp-pairs.js";

/**
 * The held-out rule until the agent model's shared split lands: every fifth instance of a game's
 * full instance list is held out.
 */
export function isHeldOutClemInstance(index: number): boolean {
  return index % 5 === 0;
}

/** The games of the ARP table: the three Wordle variants, taboo, referencegame, imagegame, privateshared, and guesswhat. */
export const ARP_CLEM_GAMES = [
  "wordle",
  "wordle_withclue",
  "wordle_withcritic",
  "taboo",
  "referencegame",
  "imagegame",
  "privateshared",
  "guesswhat",
] as const;

export interface ArpGame {
  /** The clembench game name. */
  game: string;
  /** The environment id its trajectories carry ("clembench/<game>"). */
  envId: string;
  /** Training instances only. */
  makeEnv: () => Environment;
  /** Held-out instances only. */
  makeEvalEnv: () => Environment;
  /** Scripted experts; acquisition spreads its episodes over them (Wordle: one per opening word). */
  experts: Policy[];
  /** Turn limit of an episode (the game's own rounds plus its reprompts). */
  maxTurns: number;
}

function wordleWords(game = "wordle"): clembench.WordleWords {
  const file = clembench.loadInstances(clembench.getGame(game).dataPath ?? game);
  return file.experiments[0].lang_keywords as clembench.WordleWords;
}

/** Opening words of the Wordle experts (each a different, equally valid game from the same instance). */
const WORDLE_OPENERS = ["crane", "slate", "trace", "adieu"];

/**
 * privateshared's answerer with perfect bookkeeping (benchmarks' privateSharedOracle), as a
 * stateless policy: it finds the instance by its initial prompt and replays the contexts so far.
 */
function privateSharedExpert(): Policy {
  const file = clembench.loadInstances(clembench.getGame("privateshared").dataPath ?? "privateshared");
  const instances = file.experiments.flatMap((e) => e.game_instances as clembench.GameInstance[]);
  return {
    id: "privateshared-oracle",
    async generate(messages: Message[]) {
      const users = messages.filter((m) => m.role === "user").map((m) => m.content ?? "");
      // The conversation opens with the instance's prompt (the game's pseudo turn), then the contexts.
      const instance = instances.find((i) => users[0] === i.initial_prompt);
      if (!instance) throw new RecipeError("privateshared expert: the first message is no instance's initial prompt");
      const oracle = clembench.privateSharedOracle(instance);
      let text = "";
      for (const content of users.slice(1)) text = await oracle.respond([], { role: "user", content });
      return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
    },
  };
}

interface GameRoles {
  experts: () => Policy[];
  partners: () => clembench.PlayerBackend[];
  maxTurns: number;
}

function gameRoles(game: string): GameRoles {
  const from = (b: clembench.PlayerBackend, id: string) => clembench.policyFromBackend(b, id);
  switch (game) {
    case "wordle":
    case "wordle_withclue":
    case "wordle_withcritic": {
      // The agent model's Wordle vocabulary (every target plus a seeded sample of the list): the
      // experts' explanations count the words left as its corpus does, and the solver stays fast.
      const words = wordleVocabulary(400, 0);
      return {
        experts: () => WORDLE_OPENERS.map((o) => from(clembench.wordleSolver(words, o), `wordle-solver-${o}`)),
        partners: () => (game === "wordle_withcritic" ? [clembench.agreeingCritic()] : []),
        maxTurns: 12,
      };
    }
    case "taboo":
      return {
        experts: () => [from(clembench.reversingDescriber(), "taboo-describer")],
        partners: () => [clembench.reversingGuesser()],
        maxTurns: 8,
      };
    case "referencegame":
      return {
        experts: () => [from(clembench.gridReadingGiver(), "reference-giver")],
        partners: () => [clembench.gridMatchingFollower()],
        maxTurns: 4,
      };
    case "imagegame":
      return {
        experts: () => [from(clembench.cellByCellGiver(), "image-giver")],
        partners: () => [clembench.commandFollower()],
        maxTurns: 30,
      };
    case "privateshared":
      return { experts: () => [privateSharedExpert()], partners: () => [], maxTurns: 40 };
    case "guesswhat":
      return {
        experts: () => [from(clembench.candidateByCandidateGuesser(), "guesswhat-guesser")],
        partners: () => [clembench.targetNamingAnswerer()],
        maxTurns: 12,
      };
    case "matchit_ascii":
      return {
        experts: () => [from(clembench.gridComparingMatchItPlayer(), "matchit-player")],
        partners: () => [clembench.gridComparingMatchItPlayer()],
        maxTurns: 8,
      };
    default:
      throw new RecipeError(
        `ARP has no scripted expert for clembench game "${game}"; known: ${[...ARP_CLEM_GAMES, "matchit_ascii"].join(", ")}`,
      );
  }
}

/** One clembench game as ARP plays it (agent in role 0, scripted partners, train/held-out split). */
export function arpClemGame(
  game: string,
  options: { isHeldOut?: (index: number) => boolean; dataDir?: string } = {},
): ArpGame {
  const roles = gameRoles(game);
  const heldOut = options.isHeldOut ?? isHeldOutClemInstance;
  const env = (pick: (i: number) => boolean) => () =>
    new clembench.ClemGameEnvironment({ game, dataDir: options.dataDir, partners: roles.partners(), pick });
  return {
    game,
    envId: `clembench/${game}`,
    makeEnv: env((i) => !heldOut(i)),
    makeEvalEnv: env(heldOut),
    experts: roles.experts(),
    maxTurns: roles.maxTurns,
  };
}

/**
 * The acquired episodes: `perGame` expert episodes of each game on its training instances, the
 * instances in order (seed i plays training instance i mod n), the experts taking turns by pass.
 */
export async function acquireClemEpisodes(games: readonly ArpGame[], perGame: number): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for (const g of games) {
    const instances = (g.makeEnv() as clembench.ClemGameEnvironment).instances;
    for (let e = 0; e < g.experts.length; e++) {
      const seeds: number[] = [];
      for (let i = 0; i < perGame; i++) if (Math.floor(i / instances) % g.experts.length === e) seeds.push(i);
      if (seeds.length === 0) continue;
      const r = await runEpisodes({
        makeEnv: g.makeEnv,
        policy: g.experts[e],
        episodes: seeds.map((seed) => ({ id: `${g.game}-${e}-${seed}`, seed })),
        limits: { maxTurns: g.maxTurns },
        concurrency: 1,
      });
      out.push(...(r.trajectories as Trajectory[]));
    }
  }
  return out;
}

/** Wordle's diagnosers: a guess that is not five letters (length), no word of the list or no guess (invalid). */
export function wordleDiagnose(game = "wordle"): Omit<DiagnoseOptions, "maxChars"> {
  const rules = clembench.wordleRules(wordleWords(game));
  const guessOf = (m: Message) => /guess:\s*(\S+)/i.exec(m.content ?? "")?.[1]?.toLowerCase();
  return {
    wrongLength: (m) => {
      const g = guessOf(m);
      return g !== undefined && g.length !== rules.words.max_word_length;
    },
    invalidMove: (m) => {
      const g = guessOf(m);
      return g === undefined || (g.length === rules.words.max_word_length && !rules.known.has(g));
    },
  };
}

/** Wordle's turn corruptions (benchmarks' corruptWordleReply) for ARP's synthetic pairs. */
export function wordleTurnCorruption(game = "wordle"): TurnCorruption {
  const rules = clembench.wordleRules(wordleWords(game));
  return (chosen, mode, prompt, rng) => {
    const earlier = clembench.wordleEarlierGuesses(prompt, rules);
    const text = clembench.corruptWordleReply(chosen.content ?? "", mode, { rules, earlier, rng });
    return text === null ? null : { role: "assistant", content: text };
  };
}

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
  trajectoryMessages,
} from "@kiln/rollout";
import { RecipeError } from "../errors.js";
import {
  AGENT_CLEM_GAMES,
  type AgentClemGame,
  clemEnvironment,
  clemPlayerView,
  clemTrainPositions,
  clemViewPolicy,
} from "../agent-model/clem-players.js";
import { isHeldOutInstance } from "../agent-model/clem-split.js";
import { wordleVocabulary } from "../agent-model/wordle-players.js";
import type { Conversation } from "../trainer/chat-batches.js";
import type { TurnCorruption } from "../recipes/arp-pairs.js";

/** The games of the ARP table: the agent model's (the three Wordle variants, taboo, referencegame, imagegame, privateshared, guesswhat). */
export const ARP_CLEM_GAMES: readonly string[] = AGENT_CLEM_GAMES;

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
  /** The policy as it plays this game (privateshared: from the player's view). */
  wrapPolicy: (policy: Policy) => Policy;
}

function wordleWords(game = "wordle"): clembench.WordleWords {
  const file = clembench.loadGameInstances(game);
  return file.experiments[0].lang_keywords as clembench.WordleWords;
}

/** Opening words of the Wordle experts (each a different, equally valid game from the same instance). */
const WORDLE_OPENERS = ["crane", "slate", "trace", "adieu"];

/**
 * privateshared's answerer with perfect bookkeeping (benchmarks' privateSharedOracle), as a
 * stateless policy: it finds the instance by its initial prompt and replays the contexts so far.
 */
function privateSharedExpert(): Policy {
  const file = clembench.loadGameInstances("privateshared");
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
        maxTurns: 12,
      };
    }
    case "taboo":
      return {
        experts: () => [from(clembench.reversingDescriber(), "taboo-describer")],
        maxTurns: 8,
      };
    case "referencegame":
      return {
        experts: () => [from(clembench.gridReadingGiver(), "reference-giver")],
        maxTurns: 4,
      };
    case "imagegame":
      return {
        experts: () => [from(clembench.cellByCellGiver(), "image-giver")],
        maxTurns: 30,
      };
    case "privateshared":
      return { experts: () => [privateSharedExpert()], maxTurns: 40 };
    case "guesswhat":
      return {
        experts: () => [from(clembench.candidateByCandidateGuesser(), "guesswhat-guesser")],
        maxTurns: 12,
      };
    default:
      throw new RecipeError(
        `ARP has no scripted expert for clembench game "${game}"; known: ${ARP_CLEM_GAMES.join(", ")}`,
      );
  }
}

/**
 * One clembench game as ARP plays it: agent in role 0, scripted partners, the agent model's shared
 * train/held-out split (clem-split's isHeldOutInstance) unless `isHeldOut` says otherwise.
 */
export function arpClemGame(
  game: string,
  options: { isHeldOut?: (index: number) => boolean; dataDir?: string } = {},
): ArpGame {
  const roles = gameRoles(game);
  const heldOut = options.isHeldOut ?? isHeldOutInstance;
  // The agent model's environment for the game (its scripted partners: one home, agent-model/clem-players).
  const env = (pick: (i: number) => boolean) => () => clemEnvironment(game as AgentClemGame, pick);
  return {
    game,
    envId: `clembench/${game}`,
    makeEnv: env((i) => !heldOut(i)),
    makeEvalEnv: env(heldOut),
    experts: roles.experts(),
    maxTurns: roles.maxTurns,
    // privateshared's player forgets its earlier probes (clemPlayerView): the student plays from that view.
    wrapPolicy: (p: Policy) => clemViewPolicy(p, game),
  };
}

/**
 * The acquired episodes: `perGame` expert episodes of each game on its training instances, in order,
 * the experts taking turns by pass. Only the instances the agent model's corpus may train on
 * (clemTrainPositions: referencegame's training instances that show the giver a held-out prompt are
 * left out).
 */
export async function acquireClemEpisodes(games: readonly ArpGame[], perGame: number): Promise<Trajectory[]> {
  const out: Trajectory[] = [];
  for (const g of games) {
    const positions = await clemTrainPositions(g.game as AgentClemGame);
    for (let e = 0; e < g.experts.length; e++) {
      const seeds: number[] = [];
      for (let i = 0; i < perGame; i++)
        if (Math.floor(i / positions.length) % g.experts.length === e) seeds.push(positions[i % positions.length]);
      if (seeds.length === 0) continue;
      const r = await runEpisodes({
        makeEnv: g.makeEnv,
        policy: g.experts[e],
        episodes: seeds.map((seed, i) => ({ id: `${g.game}-${e}-${i}`, seed })),
        limits: { maxTurns: g.maxTurns },
        concurrency: 1,
      });
      out.push(...(r.trajectories as Trajectory[]));
    }
  }
  return out;
}

/**
 * ARP's training side over clembench games: each game's training environments and experts, with
 * Wordle (the B and C phases' game) as the focus: its held-out environment for runArp's own
 * evaluation, its diagnosers and its turn corruption.
 */
export function clemArpTraining(games: readonly string[], focus = "wordle") {
  const setups = games.map((g) => arpClemGame(g));
  const wordle = setups.find((g) => g.game === focus) ?? arpClemGame(focus);
  return {
    games: setups,
    makeEnv: wordle.makeEnv,
    makeEvalEnv: wordle.makeEvalEnv,
    maxTurns: wordle.maxTurns,
    diagnose: wordleDiagnose(focus),
    corruptTurn: wordleTurnCorruption(focus),
    sftDocuments: clemSftDocuments,
  };
}

/** Share of privateshared's replies that become SFT documents (each the player's view up to that reply). */
const PRIVATESHARED_EVERY = 5;

/**
 * An episode's SFT documents: its conversation, or for privateshared every fifth generated reply with
 * the player's view of the conversation before it (clemPlayerView, as the agent plays and is judged).
 */
export function clemSftDocuments(t: Trajectory): Conversation[] {
  const messages = trajectoryMessages(t);
  if (t.environment.id !== "clembench/privateshared") return [{ messages, tools: t.tools }];
  const docs: Conversation[] = [];
  let reply = 0;
  for (let i = t.prompt.length; i < messages.length; i++)
    if (messages[i].role === "assistant" && reply++ % PRIVATESHARED_EVERY === 0)
      docs.push({ messages: [...clemPlayerView("privateshared", messages.slice(0, i)), messages[i]], tools: t.tools });
  return docs;
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

import { RunnerOptionsError } from "./errors.js";
import type { GameDefinition } from "./game.js";
import { type InstancesFile, loadInstances } from "./instances.js";
import { adventuregame } from "./games/adventuregame/master.js";
import { codenames } from "./games/codenames/index.js";
import { guesswhat } from "./games/guesswhat.js";
import { imagegame } from "./games/imagegame.js";
import { matchitAscii } from "./games/matchit-ascii.js";
import { privateshared } from "./games/privateshared.js";
import { referencegame } from "./games/referencegame.js";
import { bbh, eqbench } from "./games/static-benchmarks.js";
import { taboo } from "./games/taboo.js";
import { textmapworld, textmapworldGraphReasoning, textmapworldSpecificRoom } from "./games/textmapworld.js";
import { wordle, wordleWithClue, wordleWithCritic } from "./games/wordle.js";

/** The implemented clembench v2.0 text games, in the order of the issue. */
export const GAMES: Readonly<Record<string, GameDefinition>> = {
  wordle,
  wordle_withclue: wordleWithClue,
  wordle_withcritic: wordleWithCritic,
  taboo,
  referencegame,
  imagegame,
  privateshared,
  codenames,
  matchit_ascii: matchitAscii,
  guesswhat,
  textmapworld,
  textmapworld_specificroom: textmapworldSpecificRoom,
  textmapworld_graphreasoning: textmapworldGraphReasoning,
  adventuregame,
};

/** The static benchmarks of statscore that are ported (bbh, eqbench; see README for the others). */
export const STATIC_GAMES: Readonly<Record<string, GameDefinition>> = { bbh, eqbench };

/** The statscore suite of Playpen (`static_1.0` plus bbh); only bbh and eqbench are playable here. */
export const STATSCORE_GAMES = ["bbh", "cladder", "eqbench", "ifeval", "mmlu_pro"] as const;

/** Look a game up by name; the error lists what exists. */
export function getGame(name: string): GameDefinition {
  const g = GAMES[name] ?? STATIC_GAMES[name];
  if (!g)
    throw new RunnerOptionsError(
      `unknown clembench game "${name}"; implemented: ${[...Object.keys(GAMES), ...Object.keys(STATIC_GAMES)].join(", ")}`,
    );
  return g;
}

/** The instances file a game plays (its `dataPath`, else its name, under the data directory). */
export function loadGameInstances(name: string, dataDir?: string): InstancesFile {
  const g = getGame(name);
  return loadInstances(g.dataPath ?? g.name, dataDir);
}

import { RunnerOptionsError } from "./errors.js";
import type { GameDefinition } from "./game.js";
import { imagegame } from "./games/imagegame.js";
import { privateshared } from "./games/privateshared.js";
import { referencegame } from "./games/referencegame.js";
import { taboo } from "./games/taboo.js";
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
};

/** Look a game up by name; the error lists what exists. */
export function getGame(name: string): GameDefinition {
  const g = GAMES[name];
  if (!g)
    throw new RunnerOptionsError(`unknown clembench game "${name}"; implemented: ${Object.keys(GAMES).join(", ")}`);
  return g;
}

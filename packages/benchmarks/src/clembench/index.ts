// @kiln/benchmarks/clembench — the clembench / Playpen dialogue games, clemscore and statscore.
export * from "./clemeval.js";
export { resolveDataDir } from "./data-dir.js";
export { DialogueGameMaster } from "./dialogue-game-master.js";
export * from "./errors.js";
export type { GameContext, GameDefinition } from "./game.js";
export * from "./instances.js";
export * from "./interactions.js";
export * as metrics from "./metrics.js";
export * from "./player.js";
export {
  npRound,
  pyListRepr,
  pyStrRepr,
  PyFloat,
  parsePyJson,
  pyFloat,
  pyJsonDumps,
  pyRound,
  toNumber,
} from "./py.js";
export { GameScorer, type ScoresFile } from "./scorer.js";
export * from "./episode.js";
export * from "./games/codenames/index.js";
export * from "./games/guesswhat.js";
export * from "./games/imagegame.js";
export * from "./games/matchit-ascii.js";
export * from "./games/privateshared.js";
export * from "./games/referencegame.js";
export * from "./games/taboo.js";
export * from "./games/textmapworld.js";
export * from "./games/adventuregame/index.js";
export { pyLiteralEval, pyRepr } from "./py-literal.js";
export { graphEditDistance, graphSimilarity, makeGraph } from "./graph-edit-distance.js";
export * from "./games/wordle.js";
export { turnsCloseness, turnsStrategy, wordleFeedback } from "./games/wordle-feedback.js";
export * from "./games/wordle-turn-faults.js";
export { NLTK_ENGLISH_STOPWORDS, snowballStem } from "./english.js";
export { GAMES, getGame, loadGameInstances, STATIC_GAMES, STATSCORE_GAMES } from "./registry.js";
export { ClemGameEnvironment, type ClemEnvironmentOptions, type ClemEnvironmentState } from "./environment.js";
export * from "./games/static-benchmarks.js";
export { episodeDir, writeEpisode } from "./results-writer.js";
export * from "./runner.js";
export * from "./scripted-players.js";
export { CLI_USAGE, runClemCli } from "./cli.js";

// The recipes' result tables in miniature (`kiln repro`): ARP's phase table with a static score,
// OPD's rounds with the teacher beside them, OEL's pass^k with the memory-in-prompt bound.
export {
  type ArpRow,
  arpTable,
  guessNumberArpSetup,
  remerge,
  reproArp,
  reproArpSeeds,
  runArpWithStatic,
  type ReproIo,
} from "./arp-repro.js";
export {
  ARP_EVAL_GAMES,
  ARP_SEED_CLEMSCORE,
  ARP_SEED_SOURCE,
  ARP_STATIC_GAMES,
  type ArpClemConfig,
  type ClemEpisode,
  type ClemPhase,
  arpClemEpisodes,
  clemPhaseDelta,
  clemPhaseEval,
  clemRows,
} from "./arp-clem.js";
export { ARP_SEED_EFFECT_PHASES, arpClemTable, arpGamesTable, arpSeedsTable } from "./arp-clem-table.js";
export {
  REPRO_ABLATIONS,
  REPRO_DEFAULT_SEEDS,
  REPRO_RECIPES,
  reproSeeds,
  type ReproAblation,
  reproEffectiveConfig,
  reproModelSource,
} from "./cli.js";
export {
  REPRO_ABOUT,
  REPRO_QUICK,
  REPRO_SIZES,
  REPRO_WHY,
  type ReproConfig,
  reproConfig,
  reproLayers,
  reproQuickConfig,
} from "./config.js";
export { ReproError } from "./errors.js";
export { type ModelSource, dirModelSource, tinyChatSource } from "./model-source.js";
export {
  OelEvaluationCache,
  type OelRow,
  consolidationTable,
  oelSplits,
  oelTable,
  reproOel,
} from "./oel-repro.js";
export {
  type OpdArm,
  type OpdReproSetup,
  combinedWallTable,
  guessNumberOpdSetup,
  opdTable,
  reproOpd,
  runOpdArm,
} from "./opd-repro.js";
export {
  type ReproResult,
  acrossSeedsTable,
  reproReportHtml,
  timingTable,
  wallTimeTable,
  writeReproOutputs,
} from "./output.js";
export { FALLBACK_HELDOUT_TEXTS, type StaticScore, heldoutTexts, staticScore } from "./static-score.js";
export {
  type ReproTable,
  type ScoreSummary,
  beyondSe,
  fmt,
  fmtDelta,
  markdownTable,
  summarizeScores,
} from "./table.js";

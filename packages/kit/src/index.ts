// @kiln/kit: recipes, trainers and run directories composed from the kiln packages.
export { stories260KPaths } from "./data-dir.js";
export { RunDir, RunDirError, checkRunName, kilnPackageVersions, type RunMetadata, type RunMode } from "./run-dir.js";
export type { SftBatch } from "./sft-trainer.js";
export {
  epochOrder,
  lrSchedule,
  stageWarmupSteps,
  plannedSteps,
  train,
  type Objective,
  type ObjectiveOutput,
  type ScheduleKind,
  type StepRecord,
  type TrainConfig,
  type TrainOptions,
  type TrainResult,
  type TrainerRun,
} from "./trainer/trainer.js";
export { NonFiniteError, TrainerError } from "./trainer/errors.js";
export {
  latestCheckpoint,
  readOptimizerState,
  restoreTrainerCheckpoint,
  saveOptimizerState,
  saveTrainerCheckpoint,
  type TrainerState,
} from "./trainer/checkpoints.js";
export {
  consolidationLoss,
  consolidationObjective,
  dpoBatchLoss,
  dpoObjective,
  opdBatch,
  opdBatchLoss,
  opdObjective,
  sftObjective,
  turnWeights,
  type ConsolidateOptions,
  type ConsolidationSample,
  type LengthOptions,
  type OpdObjectiveOptions,
  type OpdSample,
} from "./trainer/objectives/index.js";
export { trainingLogits } from "./trainer/training-logits.js";
export {
  baseModelId,
  directoryHashes,
  mergeAdapterDirs,
  scaleAdapterDir,
  writeAdapterCard,
  writeAdapterDir,
  writeMergedModel,
  type AdapterCardOptions,
  type CardProvenance,
  type MergedModelOptions,
} from "./artifacts.js";
export { phaseChart, reportHtml, svgCurve, writeReport, type ReportContent, type StageLine } from "./report.js";
export { barChart, lineChart, niceTicks, type ScoreBar, type Series } from "./report-svg.js";
export { runDemo, type DemoOptions, type DemoResult } from "./demo.js";
export { loadLocalModel, resolvePolicy, PolicySpecError, type PolicySpecOptions } from "./policies.js";
export { type CommandEntry, listCommands, main as runCli, registerCommand } from "./cli-main.js";
export {
  type CommandArgs,
  type CommandSpec,
  type OptionSpec,
  type OptionValues,
  type PositionalSpec,
  UsageError,
  closest,
  defineCommand,
  editDistance,
  formatCommandHelp,
  parseCommandArgs,
} from "./cli/args.js";
export { interruptMessage, onInterruptGracefully, resumeCommand, runPosition } from "./cli/interrupt.js";
export { type DirLock, DirLockError, type DirLockHolder, acquireDirLock, withDirLocks } from "./dir-lock.js";
export { type NamedPath, OutputDirError, checkOutputSeparate, writeDirAtomic } from "./output-dir.js";
export { convertGguf, exportGguf, type ConvertGgufOptions, type ExportGgufOptions } from "./gguf-commands.js";
export { checkRecipeConfig, configProblems } from "./recipes/config-checks.js";
export { RecipeError } from "./errors.js";
export { CHATML_TOOL_TEMPLATE, charTokenizer, chatmlTemplate } from "@kiln/models";
export {
  tinyChat,
  tinyQwen3Config,
  type TinyChat,
} from "./recipes/tiny-chat.js";
export {
  conversationBatch,
  preferenceBatch,
  renderConversation,
  type ChatCodec,
  type Conversation,
  type PreferenceBatch,
  type PreferenceExample,
} from "./trainer/chat-batches.js";
export { holdoutSplit, isSuccessful, successOnlySftSet, type SuccessSetOptions } from "./recipes/sft-set.js";
export {
  branchDpoPairs,
  runArp,
  type ArpOptions,
  type ArpResult,
  type ArpStageSummary,
  type ArpTrainingGame,
  type BranchDpoOptions,
} from "./recipes/arp.js";
export {
  syntheticTurnPairs,
  type SyntheticPair,
  type SyntheticPairOptions,
  type SyntheticPairResult,
  type TurnCorruption,
} from "./recipes/arp-pairs.js";
export {
  ARP_CLEM_GAMES,
  acquireClemEpisodes,
  arpClemGame,
  clemArpTraining,
  wordleDiagnose,
  wordleTurnCorruption,
  type ArpGame,
} from "./repro/arp-games.js";
export {
  DEFAULT_SOURCES,
  RECIPE_PRESETS,
  applyConfigObject,
  arpSeedConfig,
  arpTinyConfig,
  oelSeedConfig,
  oelTinyConfig,
  opdSeedConfig,
  opdTinyConfig,
  presetConfig,
  recipeConfig,
  resolveConfig,
  setConfigValue,
  stageForward,
  type ArpConfig,
  type ConfigOverrides,
  type Preset,
  type RecipeConfigOf,
  type RecipeName,
  type BaseDtype,
  type DpoStageSettings,
  type LoraSettings,
  type OelConfig,
  type OpdConfig,
  type RecipeConfig,
  type RolloutSettings,
  type StageTrainSettings,
} from "./recipes/presets.js";
export { effectiveConfig } from "./recipes/cli-recipes.js";
export {
  assertSameTokenizer,
  scaffoldedTeacher,
  scoreWithTeacher,
  viewPolicy,
  type MessageView,
} from "./recipes/opd-samples.js";
export { runOpdRounds, type OpdEvaluation, type OpdOptions, type OpdRoundResult } from "./recipes/opd.js";
export {
  GuidedPolicy,
  guidedLogNormaliser,
  guidedLogprobs,
  type GuidedPolicyOptions,
  type GuidedPrompt,
} from "./recipes/guided-teacher.js";
export { llamaCppRollouts, type LlamaCppRolloutOptions, type RolloutEngine } from "./llama-cpp-rollouts.js";
export {
  consolidationSamples,
  passHatKEval,
  runOel,
  type OelOptions,
  type OelResult,
  type OelTask,
} from "./recipes/oel.js";
export { withSystemNote } from "./recipes/system-note.js";
export {
  evaluateEpisodes,
  evaluatePhase,
  phaseFromScores,
  phaseMetrics,
  phaseTable,
  summarizeEpisodes,
  type EpisodeEval,
  type PhaseEval,
  type RecipeIo,
} from "./recipes/recipe-run.js";
export * from "./repro/index.js";
export {
  type ProvenanceLayer,
  type ValueSource,
  configProvenance,
  pathMatches,
  presetLayers,
  provenanceBlock,
} from "./recipes/preset-provenance.js";
export { agentModelAvailable, agentModelDir, agentModelHeldoutPath } from "./agent-model/paths.js";
export { GUESS_NUMBER_LESSON } from "./agent-model/notes.js";
export {
  AGENT_CLEM_GAMES,
  type AgentClemGame,
  CLEM_SKILLS,
  type ClemSkill,
  type ClemDocument,
  clemCorpus,
  clemEnvironment,
  clemEpisodeDocuments,
  clemPartners,
  clemPlayer,
  clemPlayerView,
  clemTrainPositions,
  clemViewPolicy,
} from "./agent-model/clem-players.js";
export {
  type ClemEvalOptions,
  type ClemEvalResult,
  clemExpertPlayers,
  evaluateClemHeldout,
} from "./agent-model/clem-eval.js";
export {
  CLEM_HELDOUT_EVERY,
  clemSplitIndices,
  isHeldOutInstance,
  isTrainingInstance,
} from "./agent-model/clem-split.js";
export {
  QUESTWORLD_WINDOW_KEEP,
  WindowedPolicy,
  questworldView,
  questworldWindow,
  type QuestworldWindowOptions,
  type WindowedPolicyOptions,
} from "./agent-model/questworld-window.js";
export {
  QUESTWORLD_SKILLS,
  hermesToolCallText,
  questworldPlayer,
  questworldPlayerFactory,
  toolCallGeneration,
  wrongCall,
  type PlayerCall,
  type QuestworldPlayerOptions,
  type QuestworldSkill,
} from "./agent-model/questworld-players.js";
export {
  QUESTWORLD_SCAFFOLD_NOTE,
  QUESTWORLD_TRAIN_SEED_BASE,
  questworldCorpus,
  questworldCorpusChars,
  questworldOpdStart,
  questworldTrainSeed,
  type QuestworldCorpusOptions,
  type QuestworldDocument,
} from "./agent-model/questworld-corpus.js";
export {
  questworldOpdSetup,
  type QuestworldOpdEvaluation,
  type QuestworldOpdSetup,
  type QuestworldOpdSetupOptions,
} from "./agent-model/questworld-opd.js";

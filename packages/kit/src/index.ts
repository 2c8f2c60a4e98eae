// @kiln/kit: recipes, trainers and run directories composed from the kiln packages.
export { stories260KPaths } from "./data-dir.js";
export { RunDir, kilnPackageVersions, type RunMetadata } from "./run-dir.js";
export { trainSft, type SftBatch, type SftConfig, type SftStepMetrics } from "./sft-trainer.js";
export { runDemo, type DemoOptions, type DemoResult } from "./demo.js";
export { loadLocalModel, resolvePolicy, PolicySpecError, type PolicySpecOptions } from "./policies.js";
export { main as runCli, parseArgs, UsageError } from "./cli-main.js";
export { RecipeError } from "./recipes/errors.js";
export {
  CHATML_TOOL_TEMPLATE,
  charTokenizer,
  chatmlTemplate,
  tinyChat,
  tinyQwen3Config,
  type TinyChat,
} from "./recipes/tiny-chat.js";
export {
  conversationBatch,
  preferenceBatch,
  type ChatCodec,
  type Conversation,
  type PreferenceBatch,
  type PreferenceExample,
} from "./recipes/batches.js";
export { isSuccessful, successOnlySftSet, type SuccessSetOptions } from "./recipes/sft-set.js";
export {
  diagnoseTrajectory,
  diagnoseTurn,
  truncateRepair,
  turnLocalPairs,
  type DiagnoseOptions,
  type DiagnosedTurn,
  type FailureMode,
  type RepairFn,
  type TurnPairOptions,
  type TurnPairResult,
} from "./recipes/diagnose.js";
export { dpoBatchLoss, trainDpo, type DpoStepMetrics, type DpoTrainConfig } from "./recipes/dpo-trainer.js";
export {
  branchDpoPairs,
  runArp,
  type ArpOptions,
  type ArpResult,
  type BranchDpoOptions,
  type LoraSettings,
} from "./recipes/arp.js";
export { scaffoldedTeacher, scoreWithTeacher, type OpdSample } from "./recipes/opd-samples.js";
export { opdBatch, opdBatchLoss, turnWeights, type OpdObjectiveOptions } from "./recipes/opd-update.js";
export {
  runOpdRounds,
  trainOpd,
  type OpdOptions,
  type OpdRoundResult,
  type OpdStepMetrics,
  type OpdTrainConfig,
} from "./recipes/opd.js";
export {
  consolidationLoss,
  consolidationSamples,
  passHatKEval,
  runOel,
  type ConsolidateOptions,
  type ConsolidationSample,
  type OelOptions,
  type OelResult,
  type OelTask,
} from "./recipes/oel.js";
export { withSystemNote } from "./recipes/system-note.js";
export { evaluateEpisodes, summarizeEpisodes, type EpisodeEval, type RecipeIo } from "./recipes/recipe-run.js";

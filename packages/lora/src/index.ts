// @kiln/lora: LoRA adapters compatible with PEFT.
export * from "./errors.js";
export { LoraLayer } from "./lora-layer.js";
export { loraLinear, type LoraDropout } from "./lora-linear.js";
export { resolveTargets, shortTargetNames, type TargetModules } from "./targets.js";
export {
  LoraAdapter,
  adapterFromLayers,
  attachLora,
  type LoraOptions,
  type ParameterReplacement,
} from "./lora-adapter.js";
export {
  deltaWeight,
  mergeAdapter,
  unmergeAdapter,
  type MergeOptions,
  type MergeReport,
  type ModuleMergeStats,
} from "./merge.js";
export { combineAdapters } from "./combine.js";
export { adapterFiles, loadAdapter, saveAdapter, toPeftAdapter, type LoadAdapterOptions } from "./adapter-files.js";
export { parameterReport, type ParameterReport } from "./counts.js";
export { AdapterChain, type ChainStage } from "./adapter-chain.js";

// @kiln/kit: recipes, trainers and run directories composed from the kiln packages.
export { kitDataDir, stories260KPaths } from "./data-dir.js";
export { RunDir, type RunMetadata } from "./run-dir.js";
export { trainSft, type SftBatch, type SftConfig, type SftStepMetrics } from "./sft-trainer.js";
export { runDemo, type DemoOptions, type DemoResult } from "./demo.js";
export { loadLocalModel, resolvePolicy, PolicySpecError, type PolicySpecOptions } from "./policies.js";
export { main as runCli, parseArgs, UsageError } from "./cli-main.js";

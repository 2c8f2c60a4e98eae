// tau2-bench retail for kiln: the domain (DB + 16 tools), tasks and splits, user simulator,
// orchestration, grading (DB hash, COMMUNICATE, NL assertions), pass^k and a runner.
export * from "./data-dir.js";
export * from "./db.js";
export * from "./db-hash.js";
export * from "./errors.js";
export * from "./prompts.js";
export { pyFloatRepr, pyJsonDumps, pyRound2 } from "./python-compat.js";
export { pythonCalculate } from "./python-calc.js";
export * from "./tasks.js";
export * from "./tool-specs.js";
export * from "./tools.js";

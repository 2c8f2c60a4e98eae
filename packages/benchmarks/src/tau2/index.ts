// tau2-bench retail for kiln: the domain (DB + 16 tools), tasks and splits, user simulator,
// environment and episode loop, grading (DB hash, COMMUNICATE, NL assertions), pass^k with
// standard errors, a runner with results files, and an oracle agent.
export * from "./cli.js";
export * from "./data-dir.js";
export * from "./db.js";
export * from "./db-hash.js";
export * from "./environment.js";
export * from "./episode.js";
export * from "./errors.js";
export * from "./evaluate.js";
export * from "./nl-judge.js";
export * from "./oracle.js";
export * from "./pass-k.js";
export * from "./prompts.js";
export { pyFloatRepr, pyJsonDumps, pyRound2 } from "./python-compat.js";
export { pythonCalculate } from "./python-calc.js";
export { PythonRandom, upstreamTrialSeeds } from "./python-random.js";
export * from "./report.js";
export * from "./runner.js";
export * from "./tasks.js";
export * from "./tool-specs.js";
export * from "./tools.js";
export * from "./trajectory.js";
export * from "./user-simulator.js";

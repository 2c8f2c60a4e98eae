// Each benchmark lives in its own folder and is exported as a namespace
// (also importable alone from "@kiln/benchmarks/<name>").
export * as clembench from "./clembench/index.js";
export * as questworld from "./questworld/index.js";
export * as tau2 from "./tau2/index.js";

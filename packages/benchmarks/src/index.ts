export const VERSION_PLACEHOLDER = "benchmarks";

// @kiln/rollout/core: the parts that need no Node APIs (types, parsing, episodes, games,
// branching, HTTP client over fetch, trajectory records and encodings). Safe for browsers and
// workers; `@kiln/rollout` adds the server and file modules on top.
export * from "./types.js";
export * from "./errors.js";
export * from "./seeds.js";
export * from "./messages.js";
export * from "./python-json.js";
export * from "./tool-schema-validate.js";
export * from "./parse-tool-calls.js";
export * from "./trajectory.js";
export * from "./episode.js";
export * from "./game.js";
export * from "./branch.js";
export * from "./diagnose.js";
export * from "./statistics.js";
export * from "./char-tokenizer.js";
export * from "./chatml.js";
export * from "./scripted-policy.js";
export * from "./guess-number.js";
export * from "./gzip-members.js";
export * from "./jsonl.js";
export * from "./progress.js";
export * from "./run-summary.js";
export * from "./runner.js";
export * from "./seeded-starts.js";
export * from "./trl-export.js";
export * from "./openai-wire.js";
export * from "./http-policy.js";

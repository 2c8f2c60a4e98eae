// @kiln/rollout public API: everything in ./core plus the Node-only modules
// (trajectory files, atomic JSONL files, the OpenAI-compatible server).
export * from "./core.js";
export * from "./trajectory-file.js";
export * from "./jsonl-file.js";
export * from "./openai-server.js";

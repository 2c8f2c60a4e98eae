export * from "./types.js";
export const TRAJECTORY_SCHEMA_VERSION = 1;

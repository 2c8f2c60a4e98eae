import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { Tau2Error } from "./errors.js";

// The retail data ships in the package under data/tau2-retail. This module runs from
// src/tau2/*.ts (tests, "source" condition), from dist/tau2/index.{js,cjs} (subpath entry) or
// from dist/index.{js,cjs} (root entry, which bundles this folder), so several relative
// layouts are tried. The CJS build has no import.meta.url, hence the __dirname branch.

/** Env var that overrides where the retail data files are read from. */
export const DATA_DIR_ENV = "KILN_TAU2_DATA_DIR";

function moduleDir(): string | undefined {
  if (typeof __dirname === "string") return __dirname;
  try {
    return dirname(fileURLToPath(import.meta.url));
  } catch {
    return undefined;
  }
}

/**
 * Where the shipped data may sit relative to the running module: src/tau2 and dist/tau2 are two
 * levels below the package root, dist (the root entry's bundle) one.
 */
export function dataDirCandidates(moduleDirectory: string): string[] {
  return ["../../data/tau2-retail", "../data/tau2-retail"].map((rel) => resolve(moduleDirectory, rel));
}

/** The folder holding db.json, tasks.json, … : explicit dir, else $KILN_TAU2_DATA_DIR, else the shipped copy. */
export function resolveDataDir(explicit?: string): string {
  if (explicit !== undefined) {
    if (!existsSync(join(explicit, "db.json")))
      throw new Tau2Error(`tau2 data dir "${explicit}": db.json not found there`);
    return resolve(explicit);
  }
  const fromEnv = typeof process !== "undefined" ? process.env[DATA_DIR_ENV] : undefined;
  if (fromEnv) return resolveDataDir(fromEnv);
  const here = moduleDir();
  if (here !== undefined) {
    for (const dir of dataDirCandidates(here)) {
      if (existsSync(join(dir, "db.json"))) return dir;
    }
  }
  throw new Tau2Error(
    `tau2 data dir: not found next to the module (${here ?? "unknown location"}); pass dataDir or set ${DATA_DIR_ENV}`,
  );
}

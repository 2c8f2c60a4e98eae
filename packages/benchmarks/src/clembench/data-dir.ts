import { existsSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ResourceError } from "./errors.js";

declare const __dirname: string | undefined;

function moduleDir(): string | undefined {
  // CJS builds have __dirname and no import.meta.url; ESM has the reverse
  if (typeof __dirname === "string") return __dirname;
  try {
    return dirname(fileURLToPath(import.meta.url));
  } catch {
    return undefined;
  }
}

/** The marker file that identifies a clembench data directory. */
const MARKER = "LICENSE-clembench";

/**
 * Locate the shipped clembench data (`packages/benchmarks/data/clembench`).
 * Order: explicit `dataDir`, `$KILN_CLEMBENCH_DATA`, then relative to this module: `src/clembench/` and
 * `dist/clembench/` are two levels below the package root, the `dist/index.*` bundle is one.
 */
export function resolveDataDir(dataDir?: string): string {
  if (dataDir) {
    const dir = resolve(dataDir);
    if (!existsSync(join(dir, MARKER)))
      throw new ResourceError(`clembench data directory ${dir} has no ${MARKER} (is it data/clembench?)`);
    return dir;
  }
  const candidates: string[] = [];
  const env = typeof process !== "undefined" ? process.env.KILN_CLEMBENCH_DATA : undefined;
  if (env) candidates.push(resolve(env));
  const here = moduleDir();
  if (here) candidates.push(join(here, "..", "..", "data", "clembench"), join(here, "..", "data", "clembench"));
  for (const c of candidates) if (existsSync(join(c, MARKER))) return c;
  throw new ResourceError(
    `clembench data directory not found (looked for ${MARKER} in: ${candidates.join(", ") || "nothing"}); pass dataDir or set KILN_CLEMBENCH_DATA`,
  );
}

/** Read a JSON resource below the data directory. */
export function readDataJson<T = unknown>(dataDir: string, ...parts: string[]): T {
  const path = join(dataDir, ...parts);
  if (!existsSync(path)) throw new ResourceError(`clembench resource missing: ${path}`);
  try {
    return JSON.parse(readFileSync(path, "utf8")) as T;
  } catch (e) {
    throw new ResourceError(`clembench resource ${path} is not valid JSON: ${(e as Error).message}`);
  }
}

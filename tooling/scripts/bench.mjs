#!/usr/bin/env node
// `pnpm bench <name> [--json] [args]`: runs packages/<name>/bench/index.ts with tsx
// against the TypeScript sources. Benchmarks are never part of the test command.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const [name, ...rest] = process.argv.slice(2);
// Benchmarks that are not a package's bench/index.ts: name → [package, script].
const extra = { gpu: ["tensor", "gpu.ts"] };
const available = [
  ...readdirSync(join(root, "packages")).filter((p) => existsSync(join(root, "packages", p, "bench", "index.ts"))),
  ...Object.keys(extra),
];
if (!name || !available.includes(name)) {
  console.error(`usage: pnpm bench <name> [--json]\navailable benchmarks: ${available.join(", ") || "(none)"}`);
  process.exit(2);
}
const [pkg, script] = extra[name] ?? [name, "index.ts"];
const pkgDir = join(root, "packages", pkg);
const tsx = join(root, "node_modules", ".bin", "tsx");
const result = spawnSync(tsx, ["--conditions=source", join("bench", script), ...rest], {
  cwd: pkgDir,
  stdio: "inherit",
});
process.exit(result.status ?? 1);

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
const extra = {
  gpu: ["tensor", "gpu.ts"],
  "rollout-batching": ["kit", "rollout-batching.ts"],
  "repro-batching": ["kit", "repro-batching.ts"],
  "decode-step-cpu": ["kit", "decode-step-cpu.ts"],
  "agent-model-clem": ["kit", "agent-model-clem.ts"],
  "agent-model-copy": ["kit", "agent-model-copy.ts"],
  "agent-model-wordle-lines": ["kit", "agent-model-wordle-lines.ts"],
  "opd-expert-call": ["kit", "opd-expert-call.ts"],
  "opd-round-states": ["kit", "opd-round-states.ts"],
  "opd-wall-trace": ["kit", "opd-wall-trace.ts"],
};
// Benchmarks that also run further scripts after their own: name → [[package, script], …]. The
// batching half of `rollout` needs models and kit's agent model, which @kiln/rollout cannot import.
const followUps = { rollout: [["kit", "rollout-batching.ts"]] };
const available = [
  ...readdirSync(join(root, "packages")).filter((p) => existsSync(join(root, "packages", p, "bench", "index.ts"))),
  ...Object.keys(extra),
];
if (!name || !available.includes(name)) {
  console.error(`usage: pnpm bench <name> [--json]\navailable benchmarks: ${available.join(", ") || "(none)"}`);
  process.exit(2);
}
const tsx = join(root, "node_modules", ".bin", "tsx");
for (const [pkg, script] of [extra[name] ?? [name, "index.ts"], ...(followUps[name] ?? [])]) {
  const result = spawnSync(tsx, ["--conditions=source", join("bench", script), ...rest], {
    cwd: join(root, "packages", pkg),
    stdio: "inherit",
  });
  if (result.status !== 0) process.exit(result.status ?? 1);
}

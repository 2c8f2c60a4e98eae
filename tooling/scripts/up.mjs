#!/usr/bin/env node
// One entry point for the README's two commands. Needs only Node 20 and npm:
// it bootstraps the pinned pnpm into .cache/pnpm, installs the workspace from the
// lockfile, then runs either the full check (`test`) or the main demo (`demo`: kiln repro arp).
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureSystemDeps } from "./system-deps.mjs";

const PNPM_VERSION = "12.4.2";
const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const mode = process.argv[2];
if (mode !== "test" && mode !== "demo") {
  console.error("usage: node tooling/scripts/up.mjs <test|demo> [args...]");
  process.exit(2);
}

function pnpmBinary() {
  const prefix = join(root, ".cache", "pnpm");
  const bin = join(prefix, "node_modules", ".bin", "pnpm");
  if (existsSync(bin)) {
    const have = execFileSync(bin, ["--version"], { encoding: "utf8" }).trim();
    if (have === PNPM_VERSION) return bin;
  }
  console.log(`[kiln] bootstrapping pnpm ${PNPM_VERSION} into .cache/pnpm`);
  run("npm", ["install", "--prefix", prefix, `pnpm@${PNPM_VERSION}`, "--no-audit", "--no-fund", "--loglevel=error"]);
  return bin;
}

function run(cmd, args, extraEnv = {}) {
  const result = spawnSync(cmd, args, { cwd: root, stdio: "inherit", env: { ...process.env, ...extraEnv } });
  if (result.status !== 0) {
    console.error(`[kiln] failed: ${cmd} ${args.join(" ")} (exit ${result.status ?? result.signal})`);
    process.exit(result.status ?? 1);
  }
}

const pnpm = pnpmBinary();
const env = { ONNXRUNTIME_NODE_INSTALL: "skip", PATH: `${dirname(pnpm)}:${process.env.PATH}` };
run(pnpm, ["install", "--frozen-lockfile"], { ...env, CI: "true" });
if (mode === "test") {
  const system = ensureSystemDeps(root);
  run(pnpm, ["run", "check"], { ...env, ...system.env });
  if (system.notRun.length > 0) {
    console.log(
      `[kiln] every suite that ran passed; NOT RUN (missing system packages or CPU features, see above): ${system.notRun.join("; ")}`,
    );
  } else {
    console.log(
      "[kiln] every suite ran and passed (webgpu, browser, native, oneDNN bf16 and llama.cpp suites included)",
    );
  }
} else {
  run(pnpm, ["run", "build"], env);
  // The README's tables were measured on the native backend: install its BLAS where this setup can
  // (root with apt), and say so plainly where it cannot — the demo then runs on wasm, whose table is
  // deterministic too but not the README's cell for cell.
  const system = ensureSystemDeps(root, ["native"]);
  if (system.notRun.length > 0)
    console.log(
      "[kiln] no CBLAS library: the demo runs on the wasm backend; its table will not match the README's (native)",
    );
  // The main demo is ARP's result table on the embedded agent model (`kiln repro arp`); the
  // earlier stories260K walk-through stays reachable as `pnpm kiln demo`.
  // One seed unless the caller names seeds: `kiln repro` runs two by default, the demo stays ~10 minutes.
  const demoArgs = process.argv.slice(3);
  if (!demoArgs.some((a) => a.startsWith("--seed"))) demoArgs.unshift("--seed", "42");
  run(pnpm, ["run", "kiln", "repro", "arp", ...demoArgs], env);
}

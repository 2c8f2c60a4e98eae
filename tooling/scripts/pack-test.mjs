#!/usr/bin/env node
// Proves the published shape: packs every package with `pnpm pack` (which rewrites
// workspace:^ to real versions), installs the tarballs into a scratch project with npm,
// then imports each one by ESM `import` and CJS `require` and checks its exports.
import { execFileSync } from "node:child_process";
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const scratch = join(root, ".tmp", "pack-test");
const tarballs = join(scratch, "tarballs");
rmSync(scratch, { recursive: true, force: true });
mkdirSync(tarballs, { recursive: true });

const packages = readdirSync(join(root, "packages")).map((dir) => {
  const manifest = JSON.parse(readFileSync(join(root, "packages", dir, "package.json"), "utf8"));
  return { dir, name: manifest.name };
});
const files = [];
for (const { dir } of packages) {
  const out = execFileSync("pnpm", ["pack", "--pack-destination", tarballs], {
    cwd: join(root, "packages", dir),
    encoding: "utf8",
  });
  const tgz = out.trim().split("\n").pop().trim();
  files.push(tgz.startsWith("/") ? tgz : join(tarballs, tgz.split("/").pop()));
}
writeFileSync(
  join(scratch, "package.json"),
  JSON.stringify({ name: "kiln-pack-test", private: true, version: "0.0.0" }),
);
execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", ...files], {
  cwd: scratch,
  stdio: "inherit",
  env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip" },
});

const names = packages.map((p) => p.name);
writeFileSync(
  join(scratch, "check.mjs"),
  `const names = ${JSON.stringify(names)};
for (const name of names) {
  const mod = await import(name);
  if (Object.keys(mod).length === 0) throw new Error(name + ": ESM import has no exports");
}
console.log("ESM import ok:", names.length, "packages");
`,
);
writeFileSync(
  join(scratch, "check.cjs"),
  `const names = ${JSON.stringify(names)};
for (const name of names) {
  const mod = require(name);
  if (Object.keys(mod).length === 0) throw new Error(name + ": CJS require has no exports");
}
console.log("CJS require ok:", names.length, "packages");
`,
);
// Beyond the exports: the shipped wasm kernels run from the CJS build, and shipped data resolves
// relative to the installed packages (kit's model, the benchmarks' data) from both builds.
writeFileSync(
  join(scratch, "runtime.cjs"),
  `const T = require("@kiln/tensor");
const { existsSync } = require("node:fs");
const { join } = require("node:path");
(async () => {
  await T.initBackend("wasm", { threads: 2 });
  const y = T.matmul(T.ones([3, 4]), T.ones([4, 5]));
  if (y.toArray().some((v) => v !== 4)) throw new Error("wasm matmul from the CJS build gave " + y.toArray());
  T.disposeWasmBackend();
  const kit = require("@kiln/kit");
  if (!existsSync(kit.stories260KPaths().checkpoint)) throw new Error("kit: embedded model missing at " + kit.stories260KPaths().checkpoint);
  const { tau2 } = require("@kiln/benchmarks");
  const tasks = tau2.loadSplitTasks("test", "v1.0");
  if (tasks.length !== 40) throw new Error("tau2: expected 40 test tasks from the shipped data, got " + tasks.length);
  console.log("CJS runtime ok: wasm kernels, kit data, benchmark data");
})().catch((e) => { console.error(e); process.exit(1); });
`,
);
writeFileSync(
  join(scratch, "runtime.mjs"),
  `import { questworld, tau2 } from "@kiln/benchmarks";
import { stories260KPaths } from "@kiln/kit";
import { existsSync } from "node:fs";
if (!existsSync(stories260KPaths().tokenizer)) throw new Error("kit: embedded tokenizer missing");
if (tau2.loadSplitTasks("test", "v1.0").length !== 40) throw new Error("tau2 data missing from the ESM build");
const r = await questworld.evaluateCore3({ policy: questworld.expertFactory, seeds: [1] });
if (r.score.mean !== 30) throw new Error("questworld expert from the published build scored " + r.score.mean);
// codenames (WordNet excerpt, seeded opponent) and adventuregame (definitions, grammar) from shipped data
const cb = await import("@kiln/benchmarks/clembench");
const games = await cb.runBenchmark({
  games: [cb.codenames],
  players: [cb.codenamesCluegiver("team"), cb.codenamesGuesser()],
  filter: { limitPerExperiment: 1 },
});
const codenamesWon = games.results.filter((e) => Number(e.scores?.["episode scores"]?.["Main Score"]) === 100).length;
if (games.results.length !== 13 || codenamesWon === 0)
  throw new Error("codenames from the published build: " + codenamesWon + "/" + games.results.length + " won");
const adventure = await cb.runBenchmark({
  games: [cb.adventuregame],
  players: [cb.adventureExplorer()],
  filter: { limitPerExperiment: 1 },
});
const won = adventure.results.filter((e) => Number(e.scores?.["episode scores"]?.["Main Score"]) === 100).length;
if (adventure.results.length !== 8 || won === 0) throw new Error("adventuregame from the published build: " + won + "/" + adventure.results.length + " won");
console.log("ESM runtime ok: kit data, benchmark data, questworld, codenames, adventuregame");
`,
);
execFileSync("node", ["check.mjs"], { cwd: scratch, stdio: "inherit" });
execFileSync("node", ["check.cjs"], { cwd: scratch, stdio: "inherit" });
execFileSync("node", ["runtime.cjs"], { cwd: scratch, stdio: "inherit" });
execFileSync("node", ["runtime.mjs"], { cwd: scratch, stdio: "inherit" });
const kilnBin = join(scratch, "node_modules", ".bin", "kiln");
const help = execFileSync(kilnBin, ["help"], { cwd: scratch, encoding: "utf8" });
if (!help.includes("usage: kiln")) throw new Error(`kiln binary printed unexpected help: ${help}`);
console.log("kiln binary ok");
// Browsers: the built ESM of the browser-facing packages, as installed, bundles with esbuild
// --platform=browser and pulls in no Node built-in.
const { checkBrowserBundles } = await import("./browser-kit.mjs");
await checkBrowserBundles({ resolveDir: scratch });
rmSync(scratch, { recursive: true, force: true });

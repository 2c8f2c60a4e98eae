#!/usr/bin/env node
// The packaging check: what a user installing kiln from npm meets. It packs every package with `pnpm pack`
// (workspace:^ → real versions, publishConfig.exports → the published exports), then
//   1. checks each tarball: published exports without the workspace-only `source` condition, every target and
//      bin present, no TypeScript besides src/ (maps point at src/ and embed nothing), no test files, no
//      workspace: ranges, no class bundled into two entry files of one format;
//   2. installs each package ALONE (its tarball plus those of the @kiln packages it depends on) into its own
//      scratch project with npm, and there imports every entry point by ESM `import` and CJS `require`, runs its
//      bins through npm's node_modules/.bin links, and runs every runnable block of its READMEs (readme-blocks.mjs);
//   3. in the project with every package: `instanceof` across entry points, one tensor backend registry for the
//      ESM and CJS builds, types of every entry under moduleResolution node10 and node16, the README TypeScript
//      blocks type-checked against the shipped .d.ts files.
// `node tooling/scripts/pack-test.mjs [--keep] [--only=<pkg,...>]` (--only: install and README-check just these).
import { execFileSync, spawn, spawnSync } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { readmeBlocks } from "./readme-blocks.mjs";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const scratch = join(root, ".tmp", "pack-test");
const tarballDir = join(scratch, "tarballs");
const keep = process.argv.includes("--keep");
const only = process.argv
  .find((a) => a.startsWith("--only="))
  ?.slice(7)
  .split(",");
const ts = createRequire(join(root, "package.json"))("typescript");

rmSync(scratch, { recursive: true, force: true });
mkdirSync(tarballDir, { recursive: true });
const failures = [];
const fail = (msg) => {
  failures.push(msg);
  console.error(`FAIL ${msg}`);
};
const step = (msg) => console.log(`[pack-test] ${msg}`);

// ---------------------------------------------------------------- pack
const packages = readdirSync(join(root, "packages"))
  .filter((dir) => existsSync(join(root, "packages", dir, "package.json")))
  .map((dir) => {
    const manifest = JSON.parse(readFileSync(join(root, "packages", dir, "package.json"), "utf8"));
    return { dir, name: manifest.name, manifest };
  });
const byName = new Map(packages.map((p) => [p.name, p]));
for (const p of packages) {
  const out = execFileSync("pnpm", ["pack", "--pack-destination", tarballDir], {
    cwd: join(root, "packages", p.dir),
    encoding: "utf8",
  });
  const tgz = out.trim().split("\n").pop().trim();
  p.tarball = tgz.startsWith("/") ? tgz : join(tarballDir, tgz.split("/").pop());
  p.unpacked = join(scratch, "unpacked", p.dir);
  mkdirSync(p.unpacked, { recursive: true });
  execFileSync("tar", ["xzf", p.tarball, "-C", p.unpacked, "--strip-components=1"]);
  p.published = JSON.parse(readFileSync(join(p.unpacked, "package.json"), "utf8"));
}
step(`packed ${packages.length} packages`);

// ---------------------------------------------------------------- 1. tarball contents
function filesUnder(dir, base = dir) {
  return readdirSync(dir).flatMap((f) => {
    const p = join(dir, f);
    return statSync(p).isDirectory() ? filesUnder(p, base) : [relative(base, p)];
  });
}
function exportTargets(node, conditions = []) {
  if (typeof node === "string") return [{ target: node, conditions }];
  if (node === null || typeof node !== "object") return [];
  return Object.entries(node).flatMap(([k, v]) => exportTargets(v, [...conditions, k]));
}
for (const p of packages) {
  const pub = p.published;
  const files = filesUnder(p.unpacked);
  const label = `${p.name} tarball`;
  for (const { target, conditions } of exportTargets(pub.exports)) {
    if (conditions.includes("source")) fail(`${label}: published exports keep the workspace-only "source" condition`);
    if (/\.(ts|tsx|mts|cts)$/.test(target) && !/\.d\.(c|m)?ts$/.test(target))
      fail(`${label}: export ${conditions.join(" > ")} points at TypeScript (${target})`);
    if (!target.includes("*") && !existsSync(join(p.unpacked, target)))
      fail(`${label}: export ${conditions.join(" > ")} → ${target} is not in the tarball`);
  }
  for (const field of ["main", "module", "types"]) {
    if (pub[field] && !existsSync(join(p.unpacked, pub[field]))) fail(`${label}: "${field}" → ${pub[field]} missing`);
  }
  for (const [, targets] of Object.entries(pub.typesVersions?.["*"] ?? {})) {
    for (const t of targets) if (!existsSync(join(p.unpacked, t))) fail(`${label}: typesVersions → ${t} missing`);
  }
  for (const [bin, target] of Object.entries(pub.bin ?? {})) {
    const file = join(p.unpacked, target);
    if (!existsSync(file)) fail(`${label}: bin ${bin} → ${target} missing`);
    else if (!readFileSync(file, "utf8").startsWith("#!")) fail(`${label}: bin ${bin} (${target}) has no #! line`);
  }
  for (const field of ["dependencies", "peerDependencies", "optionalDependencies"]) {
    for (const [dep, range] of Object.entries(pub[field] ?? {}))
      if (String(range).startsWith("workspace:"))
        fail(`${label}: ${field} ${dep}@${range} (workspace range published)`);
  }
  const typescript = files.filter((f) => /\.(ts|tsx|mts|cts)$/.test(f) && !/\.d\.(c|m)?ts$/.test(f));
  const outsideSrc = typescript.filter((f) => !f.startsWith("src/"));
  if (outsideSrc.length) fail(`${label}: TypeScript outside src/: ${outsideSrc.slice(0, 5).join(", ")}`);
  const tests = files.filter((f) => /\.(test|spec)\.[cm]?[jt]s$/.test(f));
  if (tests.length) fail(`${label}: ships test files: ${tests.slice(0, 5).join(", ")}`);
  for (const map of files.filter((f) => f.endsWith(".map"))) {
    const json = JSON.parse(readFileSync(join(p.unpacked, map), "utf8"));
    if (json.sourcesContent?.some((c) => c !== null))
      fail(`${label}: ${map} embeds its sources (the tarball already ships src/)`);
    for (const source of json.sources ?? []) {
      const at = relative(p.unpacked, resolve(dirname(join(p.unpacked, map)), source));
      if (at.startsWith("src/") && !existsSync(join(p.unpacked, at))) fail(`${label}: ${map} → ${at} not shipped`);
    }
  }
  // One class, one entry file per format: otherwise `instanceof` fails across entry points.
  for (const ext of [".js", ".cjs"]) {
    const seen = new Map();
    for (const f of files.filter((x) => x.startsWith("dist/") && x.endsWith(ext))) {
      for (const m of readFileSync(join(p.unpacked, f), "utf8").matchAll(
        /^(?:export )?(?:var|let|const)?\s*(\w+) = class|^(?:export )?class (\w+)/gm,
      )) {
        const name = m[1] ?? m[2];
        if (seen.has(name) && seen.get(name) !== f)
          fail(`${label}: class ${name} is bundled into both ${seen.get(name)} and ${f}`);
        seen.set(name, f);
      }
    }
  }
  const kb = (statSync(p.tarball).size / 1024).toFixed(0);
  step(`${p.name}: ${files.length} files, ${kb} KiB packed, ${typescript.length} .ts (src/ only)`);
}

// ---------------------------------------------------------------- 2. each package alone
function closure(names) {
  const out = new Set();
  const visit = (n) => {
    if (out.has(n)) return;
    out.add(n);
    for (const dep of Object.keys(byName.get(n)?.published.dependencies ?? {})) if (byName.has(dep)) visit(dep);
  };
  for (const n of names) visit(n);
  return out;
}
const projects = new Map(); // closure key → { dir, names }
function project(names) {
  const set = closure(names);
  const key = [...set].sort().join(" ");
  if (projects.has(key)) return projects.get(key);
  const dir = join(scratch, `project-${projects.size}-${[...names].map((n) => n.replace("@kiln/", "")).join("+")}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "kiln-user", private: true, version: "0.0.0" }));
  const tarballs = [...set].map((n) => byName.get(n).tarball);
  const t0 = Date.now();
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--loglevel=error", "--prefer-offline", ...tarballs], {
    cwd: dir,
    stdio: "inherit",
    env: { ...process.env, ONNXRUNTIME_NODE_INSTALL: "skip" },
  });
  step(`installed ${[...names].join(", ")} (${set.size} kiln packages) in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
  const entry = { dir, names: set };
  projects.set(key, entry);
  return entry;
}

function run(cmd, args, opts) {
  const r = spawnSync(cmd, args, { encoding: "utf8", timeout: 300_000, ...opts });
  return { code: r.status ?? (r.signal ? 128 : 1), stdout: r.stdout ?? "", stderr: r.stderr ?? "", error: r.error };
}
const userEnv = (dir) => ({
  ...process.env,
  PATH: `${join(dir, "node_modules", ".bin")}:${process.env.PATH}`,
  npm_config_offline: "true",
  npm_config_yes: "false",
  NODE_OPTIONS: "",
});

function checkEntries(p, dir) {
  const subpaths = Object.keys(p.published.exports ?? { ".": null }).filter((k) => k !== "./package.json");
  const specs = subpaths.map((s) => (s === "." ? p.name : `${p.name}/${s.slice(2)}`));
  const script = `
const specs = ${JSON.stringify(specs)};
const { createRequire } = await import("node:module");
const require = createRequire(import.meta.url);
for (const s of specs) {
  const esm = await import(s);
  if (Object.keys(esm).length === 0) throw new Error(s + ": ESM import has no exports");
  const cjs = require(s);
  if (Object.keys(cjs).length === 0) throw new Error(s + ": CJS require has no exports");
  const missing = Object.keys(esm).filter((k) => k !== "default" && !(k in cjs));
  if (missing.length) throw new Error(s + ": CJS lacks " + missing.slice(0, 5).join(", "));
}
console.log("entries ok: " + specs.join(", "));`;
  writeFileSync(join(dir, "entries.mjs"), script);
  const r = run("node", ["entries.mjs"], { cwd: dir, env: userEnv(dir) });
  if (r.code !== 0) fail(`${p.name} alone: ${r.stderr.trim() || r.stdout.trim()}`);
  else step(`${p.name} alone: ${r.stdout.trim()}`);
}

// A process whose reader goes away at once: a CLI must exit 0 without an EPIPE trace (as with `| head`).
async function closedPipe(bin, args, cwd, env) {
  return await new Promise((resolvePromise) => {
    const child = spawn(bin, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.on("data", (d) => {
      stderr += d;
    });
    child.stdout.once("data", () => child.stdout.destroy());
    child.on("close", (code, signal) => resolvePromise({ code, signal, stderr }));
  });
}

async function checkBins(p, dir) {
  const env = userEnv(dir);
  if (p.name === "@kiln/hub-io") {
    // a file with many tensors, written by the installed library, inspected through the .bin link
    writeFileSync(
      join(dir, "make-st.mjs"),
      `import { serializeSafetensors } from "@kiln/hub-io";
import { writeFileSync } from "node:fs";
const tensors = new Map();
for (let i = 0; i < 20000; i++) tensors.set("layer." + i + ".weight", { dtype: "F32", shape: [1], data: new Uint8Array(4) });
writeFileSync("many.safetensors", serializeSafetensors(tensors));`,
    );
    const made = run("node", ["make-st.mjs"], { cwd: dir, env });
    if (made.code !== 0) return fail(`kiln-hub-io: could not write a test file: ${made.stderr}`);
    const bin = join(dir, "node_modules", ".bin", "kiln-hub-io");
    const inspect = run(bin, ["inspect", "many.safetensors"], { cwd: dir, env });
    if (inspect.code !== 0 || !inspect.stdout.includes("layer.0.weight\tF32\t[1]"))
      fail(
        `kiln-hub-io inspect through node_modules/.bin printed ${JSON.stringify(inspect.stdout.slice(0, 200))} (exit ${inspect.code}) ${inspect.stderr}`,
      );
    const piped = await closedPipe(bin, ["inspect", "many.safetensors"], dir, env);
    if (piped.code !== 0 || piped.stderr.includes("EPIPE"))
      fail(`kiln-hub-io inspect | head: exit ${piped.code ?? piped.signal}, stderr ${piped.stderr.slice(0, 300)}`);
    const usage = run(bin, [], { cwd: dir, env });
    if (usage.code !== 2 || !usage.stderr.includes("usage:")) fail(`kiln-hub-io without arguments: exit ${usage.code}`);
    step("kiln-hub-io through node_modules/.bin: inspect, | head (closed pipe), usage");
  }
  if (p.name === "@kiln/kit") {
    const bin = join(dir, "node_modules", ".bin", "kiln");
    const help = run(bin, ["help"], { cwd: dir, env });
    if (help.code !== 0 || !help.stdout.includes("usage: kiln"))
      fail(`kiln help through .bin: ${help.stdout.slice(0, 200)}`);
    const piped = await closedPipe(bin, ["help"], dir, env);
    if (piped.code !== 0 || piped.stderr.includes("EPIPE"))
      fail(`kiln help | head: exit ${piped.code}, ${piped.stderr}`);
    step("kiln through node_modules/.bin: help, | head (closed pipe)");
  }
}

// Behaviour beyond the READMEs that only the built files can show.
const runtimeChecks = {
  // the shipped wasm kernels and their worker threads run from the CJS build
  "@kiln/tensor": `const T = require("@kiln/tensor");
(async () => {
  await T.initBackend("wasm", { threads: 2 });
  const y = T.matmul(T.ones([3, 4]), T.ones([4, 5]));
  const v = typeof y.toArray === "function" ? y.toArray().flat(Infinity) : Array.from(y.dataSync());
  if (v.some((x) => x !== 4)) throw new Error("wasm matmul (2 threads) from the CJS build gave " + v);
  T.disposeWasmBackend();
  console.log("CJS build: wasm kernels on 2 threads");
})().catch((e) => { console.error(e); process.exit(1); });`,
  // the shipped model resolves from both builds
  "@kiln/models": `const { existsSync } = require("node:fs");
const M = require("@kiln/models");
(async () => {
  for (const f of [M.stories260KPaths().checkpoint, M.stories260KPaths().tokenizer])
    if (!existsSync(f)) throw new Error("stories260K file missing: " + f);
  const { model } = await M.loadStories260K();
  if (model.config.numLayers !== 5) throw new Error("stories260K: " + model.config.numLayers + " layers");
  console.log("CJS build: stories260K located and loaded");
})().catch((e) => { console.error(e); process.exit(1); });`,
  // shipped benchmark data resolves relative to the installed package from the CJS build and the shared chunks
  "@kiln/benchmarks": `const { tau2 } = require("@kiln/benchmarks");
const cb = require("@kiln/benchmarks/clembench");
(async () => {
  const tasks = tau2.loadSplitTasks("test", "v1.0");
  if (tasks.length !== 40) throw new Error("tau2: expected 40 test tasks from the shipped data, got " + tasks.length);
  const games = await cb.runBenchmark({
    games: [cb.codenames],
    players: [cb.codenamesCluegiver("team"), cb.codenamesGuesser()],
    filter: { limitPerExperiment: 1 },
  });
  const won = games.results.filter((e) => Number(e.scores?.["episode scores"]?.["Main Score"]) === 100).length;
  if (games.results.length !== 13 || won === 0) throw new Error("codenames: " + won + "/" + games.results.length + " won");
  console.log("CJS build: tau2 data, codenames with the shipped WordNet excerpt (" + won + "/13 won)");
})().catch((e) => { console.error(e); process.exit(1); });`,
};
function checkRuntime(p, dir) {
  const code = runtimeChecks[p.name];
  if (!code) return;
  writeFileSync(join(dir, "runtime.cjs"), code);
  const r = run("node", ["runtime.cjs"], { cwd: dir, env: userEnv(dir) });
  if (r.code !== 0) fail(`${p.name} runtime: ${tail(r.stderr || r.stdout)}`);
  else step(`${p.name}: ${r.stdout.trim()}`);
}

// README blocks, in order, in one scratch project per README (files made by one block are there for the next).
const readmes = [];
for (const p of packages) {
  const base = join(root, "packages", p.dir);
  const found = [
    join(base, "README.md"),
    ...filesUnder(join(base, "src"))
      .filter((f) => f.endsWith("README.md"))
      .map((f) => join(base, "src", f)),
  ];
  for (const file of found.filter(existsSync)) readmes.push({ file, owner: p.name });
}
readmes.push({ file: join(root, "README.md"), owner: null });

function transpile(code, file) {
  const out = ts.transpileModule(code, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: false },
    fileName: file,
    reportDiagnostics: true,
  });
  if (out.diagnostics?.length) throw new Error(ts.flattenDiagnosticMessageText(out.diagnostics[0].messageText, "\n"));
  return out.outputText;
}

const typedBlocks = []; // README ts blocks, type-checked in the all-packages project below
async function runReadme({ file, owner }) {
  const label = relative(root, file);
  let parsed;
  try {
    parsed = readmeBlocks(readFileSync(file, "utf8"), label);
  } catch (e) {
    return fail(e.message);
  }
  const runnable = parsed.blocks.filter((b) => b.kind !== null && b.skip === null);
  const skipped = parsed.blocks.filter((b) => b.kind !== null && b.skip !== null);
  for (const b of parsed.blocks) if (b.kind === "ts") typedBlocks.push({ label: `${label}:${b.line}`, code: b.code });
  if (runnable.length === 0) return step(`${label}: no runnable blocks (${skipped.length} marked skip)`);
  if (only && owner && !only.includes(owner.replace("@kiln/", ""))) return;
  const { dir } = project([owner, ...parsed.install]);
  // each README in a folder of its own that looks like the project root (./node_modules/.bin/… as a user has it)
  const work = join(dir, "readme", label.replaceAll("/", "_"));
  mkdirSync(work, { recursive: true });
  symlinkSync(join(dir, "node_modules"), join(work, "node_modules"));
  for (const [i, b] of runnable.entries()) {
    const where = `${label}:${b.line}`;
    const t0 = Date.now();
    let r;
    if (b.kind === "sh") {
      const script = join(work, `block-${i}.sh`);
      writeFileSync(script, `set -euo pipefail\n${b.code}\n`);
      r = await runDetached("bash", [script], work, userEnv(dir));
    } else {
      const script = join(work, `block-${i}.mjs`);
      try {
        writeFileSync(script, b.kind === "ts" ? transpile(b.code, `${where}.ts`) : b.code);
      } catch (e) {
        fail(`${where}: does not parse as TypeScript: ${e.message}`);
        continue;
      }
      r = await runDetached("node", [script], work, userEnv(dir));
    }
    const secs = ((Date.now() - t0) / 1000).toFixed(1);
    if (r.code !== 0) fail(`${where} (${b.kind} block) exited ${r.code} after ${secs} s:\n${tail(r.output)}`);
    else step(`${where}: ${b.kind} block ok (${secs} s)`);
  }
}

// Runs a block in its own process group and ends the group after, so a server a block starts in the background
// does not outlive it.
async function runDetached(cmd, args, cwd, env) {
  return await new Promise((resolvePromise) => {
    const child = spawn(cmd, args, { cwd, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    child.stdout.on("data", (d) => {
      output += d;
    });
    child.stderr.on("data", (d) => {
      output += d;
    });
    const timer = setTimeout(() => {
      output += "\n[pack-test] timed out after 600 s";
      killGroup(child.pid);
    }, 600_000);
    let exit = 1;
    // 'exit', not 'close': a server left running in the background keeps the pipes open until the group ends
    child.on("exit", async (code, signal) => {
      clearTimeout(timer);
      exit = code ?? (signal ? 128 : 1);
      // a server the block stopped may take a moment to go; one still there after 5 s was left running
      for (let waited = 0; waited < 5000 && groupAlive(child.pid); waited += 100) await sleep(100);
      if (groupAlive(child.pid)) {
        killGroup(child.pid);
        output += "\n[pack-test] the block left processes running (ended now)";
        if (exit === 0) exit = 1;
      }
    });
    child.on("close", () => resolvePromise({ code: exit, output }));
  });
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
function groupAlive(pid) {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}
function killGroup(pid) {
  try {
    process.kill(-pid, "SIGTERM");
  } catch {
    // the group is gone already
  }
}
const tail = (s) => s.trim().split("\n").slice(-25).join("\n");

for (const p of packages) {
  if (only && !only.includes(p.dir)) continue;
  const { dir } = project([p.name]);
  checkEntries(p, dir);
  await checkBins(p, dir);
  checkRuntime(p, dir);
}
for (const r of readmes) await runReadme(r);

// ---------------------------------------------------------------- 3. everything installed together
const all = project(packages.map((p) => p.name)).dir;
writeFileSync(
  join(all, "identity.mjs"),
  `import { createRequire } from "node:module";
const require = createRequire(import.meta.url);
const problems = [];
// one class per name across entry points, in each build
for (const [main, sub, ns] of [
  ["@kiln/rollout", "@kiln/rollout/core", null],
  ["@kiln/hub-io", "@kiln/hub-io/cli", null],
  ["@kiln/benchmarks", "@kiln/benchmarks/clembench", "clembench"],
  ["@kiln/benchmarks", "@kiln/benchmarks/questworld", "questworld"],
  ["@kiln/benchmarks", "@kiln/benchmarks/tau2", "tau2"],
]) {
  for (const [kind, a, b] of [
    ["ESM", await import(main), await import(sub)],
    ["CJS", require(main), require(sub)],
  ]) {
    const left = ns ? a[ns] : a;
    for (const k of Object.keys(b)) {
      if (k === "default" || !(k in left)) continue;
      if (left[k] !== b[k]) problems.push(kind + ": " + main + (ns ? "." + ns : "") + "." + k + " !== " + sub + "." + k);
    }
  }
}
const core = await import("@kiln/rollout/core");
const root = await import("@kiln/rollout");
const policy = new core.HttpPolicy({ baseUrls: "http://127.0.0.1:9", model: "m" });
if (!(policy instanceof root.HttpPolicy)) problems.push("HttpPolicy from /core is not instanceof @kiln/rollout's");
// one tensor backend registry for the ESM and CJS builds
const E = await import("@kiln/tensor");
const C = require("@kiln/tensor");
await E.initBackend("wasm", { threads: 1 });
if (C.getBackend() !== "wasm") problems.push("after initBackend('wasm') in ESM the CJS build reports " + C.getBackend());
const y = C.matmul(C.ones([3, 4]), C.ones([4, 5]));
const values = typeof y.toArray === "function" ? y.toArray().flat(Infinity) : Array.from(y.dataSync());
if (values.some((v) => v !== 4)) problems.push("CJS matmul on the ESM-initialised wasm backend gave " + values.slice(0, 5));
C.setBackend("js");
if (E.getBackend() !== "js") problems.push("setBackend('js') in CJS is not seen by ESM");
if (typeof E.disposeWasmBackend === "function") E.disposeWasmBackend();
if (problems.length) {
  console.error(problems.join("\\n"));
  process.exit(1);
}
console.log("identity ok: entry points share classes; ESM and CJS share the tensor backend");
`,
);
{
  const r = run("node", ["identity.mjs"], { cwd: all, env: userEnv(all) });
  if (r.code !== 0) fail(`identity: ${r.stderr.trim() || r.stdout.trim()}`);
  else step(r.stdout.trim());
}

// Browsers: the built ESM of the browser-facing packages, as installed, bundles with esbuild
// --platform=browser and pulls in no Node built-in (tooling/scripts/browser-kit.mjs).
{
  const { checkBrowserBundles } = await import("./browser-kit.mjs");
  try {
    await checkBrowserBundles({ resolveDir: all, log: step });
  } catch (err) {
    fail(err.message);
  }
}

// Types: every entry point under node10 (typesVersions) and node16 (exports), and the README ts blocks.
{
  const specs = packages.flatMap((p) =>
    Object.keys(p.published.exports ?? {})
      .filter((k) => k !== "./package.json")
      .map((k) => (k === "." ? p.name : `${p.name}/${k.slice(2)}`)),
  );
  const typesDir = join(all, "types");
  mkdirSync(typesDir, { recursive: true });
  writeFileSync(
    join(typesDir, "entries.ts"),
    specs.map((s, i) => `import * as m${i} from "${s}";\nvoid m${i};`).join("\n"),
  );
  const blocksDir = join(typesDir, "readme");
  mkdirSync(blocksDir, { recursive: true });
  typedBlocks.forEach((b, i) => {
    writeFileSync(join(blocksDir, `block${i}.mts`), `// ${b.label}\nexport {};\n${b.code}\n`);
  });
  const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
  for (const [resolution, module, include] of [
    ["node10", "commonjs", ["entries.ts"]],
    ["node16", "node16", ["entries.ts", "readme/*.mts"]],
  ]) {
    writeFileSync(
      join(typesDir, `tsconfig.${resolution}.json`),
      JSON.stringify({
        compilerOptions: {
          module,
          moduleResolution: resolution,
          target: "es2022",
          lib: ["es2023", "dom"],
          strict: true,
          noEmit: true,
          skipLibCheck: true,
          types: ["node"],
          typeRoots: [join(root, "node_modules", "@types")],
        },
        include,
      }),
    );
    const r = run("node", [tsc, "-p", `tsconfig.${resolution}.json`], { cwd: typesDir });
    if (r.code !== 0) {
      const map = (line) =>
        line.replace(/readme\/block(\d+)\.mts\((\d+),/g, (_, n, l) => `${typedBlocks[n].label} (+${Number(l) - 2}),`);
      fail(`types (${resolution}):\n${tail(r.stdout.split("\n").map(map).join("\n"))}`);
    } else
      step(
        `types ok under moduleResolution ${resolution}${resolution === "node16" ? ` (+ ${typedBlocks.length} README ts blocks)` : ""}`,
      );
  }
}

if (!keep && failures.length === 0) rmSync(scratch, { recursive: true, force: true });
if (failures.length) {
  console.error(`\n[pack-test] ${failures.length} problem(s); scratch projects kept in ${scratch}`);
  process.exit(1);
}
step("all checks passed");

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
execFileSync("node", ["check.mjs"], { cwd: scratch, stdio: "inherit" });
execFileSync("node", ["check.cjs"], { cwd: scratch, stdio: "inherit" });
const kilnBin = join(scratch, "node_modules", ".bin", "kiln");
const help = execFileSync(kilnBin, ["help"], { cwd: scratch, encoding: "utf8" });
if (!help.includes("usage: kiln")) throw new Error(`kiln binary printed unexpected help: ${help}`);
console.log("kiln binary ok");
rmSync(scratch, { recursive: true, force: true });

// Builds the example into a directory a static server can serve: the page, its esbuild bundle (kiln from
// the repo's sources, so no package build is needed), and stories260K as a Hugging Face model directory
// (config.json, model.safetensors, tokenizer.json, …) converted from the llama2.c files @kiln/models ships.
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  bundleForBrowser,
  loadEsbuild,
  repoRoot,
  stories260KDir,
  workspaceSourceAliases,
} from "../../tooling/scripts/browser-kit.mjs";

const here = dirname(fileURLToPath(import.meta.url));

/** hub-io's llama2.c converter, bundled for Node from its sources (this script runs without a build). */
async function loadConverter(scratch) {
  const out = join(scratch, "convert.mjs");
  await loadEsbuild().build({
    stdin: { contents: 'export { convertLlama2cToHf } from "@kiln/hub-io";', resolveDir: repoRoot, loader: "js" },
    bundle: true,
    platform: "node",
    format: "esm",
    outfile: out,
    alias: workspaceSourceAliases(),
    logLevel: "silent",
  });
  return import(pathToFileURL(out).href);
}

/** Writes the servable example to `outdir` (default .tmp/example-browser-finetune) and returns it. */
export async function buildExample(outdir = join(repoRoot, ".tmp", "example-browser-finetune")) {
  rmSync(outdir, { recursive: true, force: true });
  mkdirSync(join(outdir, "model"), { recursive: true });
  const { result, builtins } = await bundleForBrowser({
    entryPoints: [join(here, "main.js")],
    outdir,
    sourceAliases: true,
    minify: true,
  });
  if (builtins.length > 0) throw new Error(`example bundle pulls in Node built-ins: ${builtins.join(", ")}`);
  copyFileSync(join(here, "index.html"), join(outdir, "index.html"));

  const { convertLlama2cToHf } = await loadConverter(join(outdir, ".convert"));
  const source = stories260KDir();
  const { files } = convertLlama2cToHf(
    new Uint8Array(readFileSync(join(source, "stories260K.bin"))),
    new Uint8Array(readFileSync(join(source, "tok512.bin"))),
  );
  const names = [];
  for (const [name, contents] of files) {
    writeFileSync(join(outdir, "model", name), contents);
    names.push(name);
  }
  // The page fetches exactly these names (a static server cannot list a directory).
  writeFileSync(join(outdir, "model", "files.json"), JSON.stringify(names.sort()));
  for (const licence of readdirSync(source).filter((n) => /LICENSE|SOURCES/.test(n)))
    copyFileSync(join(source, licence), join(outdir, "model", licence));
  rmSync(join(outdir, ".convert"), { recursive: true, force: true });
  const bytes = Object.entries(result.metafile.outputs)
    .filter(([name]) => name.endsWith(".js"))
    .reduce((sum, [, o]) => sum + o.bytes, 0);
  return { outdir, bundleBytes: bytes, modelFiles: names };
}

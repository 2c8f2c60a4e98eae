// A real pretrained model that ships with the package: llama2.c's stories260K (Karpathy, MIT; data/stories260K/
// with its licence). It is small (1 MB), so examples, tests and `kiln demo` run offline on a model that writes
// real text, and a user needs only this package for it.
import { convertLlama2cToHf } from "@kiln/hub-io";
import { ModelFileError } from "./errors.js";
import { type LoadModelOptions, type Model, loadModel } from "./load-model.js";
import type { ModelFileMap } from "./model-files.js";
import { type Tokenizer, loadTokenizer } from "./tokenizer.js";

export interface Stories260KFiles<T> {
  /** llama2.c checkpoint (`stories260K.bin`, 5 layers, d = 64, vocab 512). */
  checkpoint: T;
  /** llama2.c tokenizer (`tok512.bin`, SentencePiece BPE with byte fallback). */
  tokenizer: T;
}

// src/stories260K.ts (tests, the source condition) and dist/index.{js,cjs} both sit one level below the package.
function dataUrl(name: string): URL {
  return new URL(`../data/stories260K/${name}`, import.meta.url);
}

/** Where the shipped files are, as URLs (also in browsers, where a bundler may copy them as assets). */
export function stories260KUrls(): Stories260KFiles<URL> {
  return { checkpoint: dataUrl("stories260K.bin"), tokenizer: dataUrl("tok512.bin") };
}

/** Paths of the shipped llama2.c files (Node), e.g. for `kiln convert-llama2c` or hub-io's `convertLlama2c`. */
export function stories260KPaths(): Stories260KFiles<string> & { dir: string } {
  const urls = stories260KUrls();
  return { dir: filePath(dataUrl("")), checkpoint: filePath(urls.checkpoint), tokenizer: filePath(urls.tokenizer) };
}

export interface Stories260K {
  model: Model;
  tokenizer: Tokenizer;
  /** The Hugging Face files (config.json, model.safetensors, tokenizer.json, …) the model was loaded from. */
  files: ModelFileMap;
}

/** Convert the shipped stories260K to Hugging Face files in memory and load it. No chat template: a base model. */
export async function loadStories260K(options: LoadModelOptions = {}): Promise<Stories260K> {
  const urls = stories260KUrls();
  const [checkpoint, tokenizerBytes] = await Promise.all([readUrl(urls.checkpoint), readUrl(urls.tokenizer)]);
  const { files } = convertLlama2cToHf(checkpoint, tokenizerBytes);
  const [model, tokenizer] = await Promise.all([loadModel(files, options), loadTokenizer(files)]);
  return { model, tokenizer, files };
}

async function readUrl(url: URL): Promise<Uint8Array> {
  if (url.protocol === "file:") {
    const { readFile } = await import("node:fs/promises");
    const b = await readFile(filePath(url));
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  }
  const response = await fetch(url);
  if (!response.ok) throw new ModelFileError(`stories260K: fetching ${url.href} gave HTTP ${response.status}`);
  return new Uint8Array(await response.arrayBuffer());
}

type NodeUrlModule = { fileURLToPath(url: URL): string };

// node:url's fileURLToPath when the runtime offers built-ins synchronously (Node ≥ 20.16); a static import would
// put a Node built-in into browser bundles of this package.
function filePath(url: URL): string {
  if (url.protocol !== "file:")
    throw new ModelFileError(
      `stories260K: the package is not on a local file system (${url.href}); use stories260KUrls()`,
    );
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown; platform?: string } }).process;
  const nodeUrl = proc?.getBuiltinModule?.("node:url") as NodeUrlModule | undefined;
  if (nodeUrl) return nodeUrl.fileURLToPath(url);
  const path = decodeURIComponent(url.pathname);
  return proc?.platform === "win32" ? path.replace(/^\//, "").replaceAll("/", "\\") : path;
}

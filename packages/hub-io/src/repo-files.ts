// Hugging Face model repo files: config.json, generation_config.json, tokenizer.json,
// tokenizer_config.json, special_tokens_map.json, chat_template.jinja — read, validate, and write
// them the way transformers / tokenizers do, so diffs against a Python-saved repo are empty.

import { readFileText, writeFileAtomic } from "./atomic-file.js";
import { RepoFileError } from "./errors.js";
import { parsePythonJson, pythonJsonDumps } from "./python-json.js";

export const REPO_FILES = {
  config: "config.json",
  generationConfig: "generation_config.json",
  tokenizer: "tokenizer.json",
  tokenizerConfig: "tokenizer_config.json",
  specialTokensMap: "special_tokens_map.json",
  chatTemplate: "chat_template.jinja",
  modelCard: "README.md",
  weights: "model.safetensors",
  weightsIndex: "model.safetensors.index.json",
} as const;

export type JsonObject = Record<string, unknown>;

/**
 * Parse a repo JSON file; it must be a JSON object. Numbers written as floats (`0.0`) are remembered
 * (python-json.ts FLOAT_KEYS), so serializing the object again reproduces transformers' file exactly.
 */
export function parseJsonObject(text: string, file: string): JsonObject {
  let v: unknown;
  try {
    v = parsePythonJson(text);
  } catch (e) {
    throw new RepoFileError(`${file}: not valid JSON (${(e as Error).message})`);
  }
  if (v === null || typeof v !== "object" || Array.isArray(v))
    throw new RepoFileError(`${file}: must be a JSON object`);
  return v as JsonObject;
}

/** config.json: an object with a string `model_type` (transformers' AutoConfig needs it). */
export function parseModelConfig(text: string): JsonObject {
  const c = parseJsonObject(text, REPO_FILES.config);
  if (typeof c.model_type !== "string") throw new RepoFileError('config.json: "model_type" must be a string');
  return c;
}

/** transformers `PretrainedConfig.to_json_string`: json.dumps(indent=2, sort_keys=True) + "\n". */
export function serializeModelConfig(config: JsonObject): string {
  return `${pythonJsonDumps(config, { indent: 2, sortKeys: true })}\n`;
}

/** generation_config.json is written exactly like config.json (GenerationConfig.to_json_string). */
export const serializeGenerationConfig = serializeModelConfig;

/** tokenizer_config.json / special_tokens_map.json: json.dumps(indent=2, sort_keys=True, ensure_ascii=False) + "\n". */
export function serializeTokenizerConfig(config: JsonObject): string {
  return `${pythonJsonDumps(config, { indent: 2, sortKeys: true, ensureAscii: false })}\n`;
}

/** tokenizer.json as the Rust tokenizers crate saves it (serde pretty, 2 spaces, struct key order). */
export function serializeTokenizerJson(tokenizer: JsonObject): string {
  return JSON.stringify(tokenizer, null, 2);
}

/** tokenizer.json: needs a `model` object with a `type` (BPE, Unigram, WordPiece, WordLevel). */
export function parseTokenizerJson(text: string): JsonObject {
  const t = parseJsonObject(text, REPO_FILES.tokenizer);
  const model = t.model as JsonObject | undefined;
  if (!model || typeof model !== "object" || typeof model.type !== "string") {
    throw new RepoFileError('tokenizer.json: "model.type" must be a string');
  }
  return t;
}

/** In-memory repo: file name (relative, "/"-separated) → contents. */
export type RepoFileMap = Map<string, Uint8Array | string>;

/** Write every file of a map under `dir`, each atomically. Node only. */
export async function writeRepoFiles(dir: string, files: RepoFileMap): Promise<void> {
  const { join } = await import("node:path");
  for (const [name, data] of files) {
    if (name.startsWith("/") || name.split("/").includes(".."))
      throw new RepoFileError(`refusing to write outside the repo: ${name}`);
    await writeFileAtomic(join(dir, name), data);
  }
}

export interface RepoConfigs {
  config: JsonObject;
  generationConfig?: JsonObject;
  tokenizer?: JsonObject;
  tokenizerConfig?: JsonObject;
  specialTokensMap?: JsonObject;
  /** chat_template.jinja, or tokenizer_config.json's `chat_template` when the file is absent. */
  chatTemplate?: string;
}

async function maybeRead(path: string): Promise<string | undefined> {
  try {
    return await readFileText(path);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw e;
  }
}

/** Read the config and tokenizer files of a local model directory (config.json is required). Node only. */
export async function readRepoConfigs(dir: string): Promise<RepoConfigs> {
  const { join } = await import("node:path");
  const configText = await maybeRead(join(dir, REPO_FILES.config));
  if (configText === undefined) throw new RepoFileError(`${dir}: no config.json`);
  const out: RepoConfigs = { config: parseModelConfig(configText) };
  const gen = await maybeRead(join(dir, REPO_FILES.generationConfig));
  if (gen !== undefined) out.generationConfig = parseJsonObject(gen, REPO_FILES.generationConfig);
  const tok = await maybeRead(join(dir, REPO_FILES.tokenizer));
  if (tok !== undefined) out.tokenizer = parseTokenizerJson(tok);
  const tokCfg = await maybeRead(join(dir, REPO_FILES.tokenizerConfig));
  if (tokCfg !== undefined) out.tokenizerConfig = parseJsonObject(tokCfg, REPO_FILES.tokenizerConfig);
  const stm = await maybeRead(join(dir, REPO_FILES.specialTokensMap));
  if (stm !== undefined) out.specialTokensMap = parseJsonObject(stm, REPO_FILES.specialTokensMap);
  const tmpl = await maybeRead(join(dir, REPO_FILES.chatTemplate));
  if (tmpl !== undefined) out.chatTemplate = tmpl;
  else if (typeof out.tokenizerConfig?.chat_template === "string") out.chatTemplate = out.tokenizerConfig.chat_template;
  return out;
}

/**
 * The files of a model repo as transformers / tokenizers would save them, ready for writeRepoFiles.
 * A `chatTemplate` goes to chat_template.jinja (transformers ≥ 4.43 layout), not into tokenizer_config.json.
 */
export function buildRepoFiles(configs: Partial<RepoConfigs> & { modelCard?: string }): RepoFileMap {
  const files: RepoFileMap = new Map();
  if (configs.config) files.set(REPO_FILES.config, serializeModelConfig(configs.config));
  if (configs.generationConfig)
    files.set(REPO_FILES.generationConfig, serializeGenerationConfig(configs.generationConfig));
  if (configs.tokenizer) files.set(REPO_FILES.tokenizer, serializeTokenizerJson(configs.tokenizer));
  if (configs.tokenizerConfig) files.set(REPO_FILES.tokenizerConfig, serializeTokenizerConfig(configs.tokenizerConfig));
  if (configs.specialTokensMap)
    files.set(REPO_FILES.specialTokensMap, serializeTokenizerConfig(configs.specialTokensMap));
  if (configs.chatTemplate !== undefined) files.set(REPO_FILES.chatTemplate, configs.chatTemplate);
  if (configs.modelCard !== undefined) files.set(REPO_FILES.modelCard, configs.modelCard);
  return files;
}

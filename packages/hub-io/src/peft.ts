// PEFT LoRA adapter directories: adapter_config.json + adapter_model.safetensors, with PEFT's key
// names and shapes (huggingface/peft `tuners/lora/config.py`, `utils/save_and_load.py`,
// `config.py` save_pretrained; docs/NUMERICS.md §2.5).

import { readFileBytes, readFileText } from "./atomic-file.js";
import { type TensorData, isDtype, toFloat32 } from "./dtypes.js";
import { PeftError } from "./errors.js";
import { pyFloat, pythonJsonDumps } from "./python-json.js";
import type { RepoFileMap } from "./repo-files.js";
import { writeRepoFiles } from "./repo-files.js";
import { parseSafetensors } from "./safetensors-read.js";
import { serializeSafetensors } from "./safetensors-write.js";

export const ADAPTER_CONFIG_FILE = "adapter_config.json";
export const ADAPTER_WEIGHTS_FILE = "adapter_model.safetensors";
/** PeftModel → LoraModel → HF model: every saved key starts with this (adapter name stripped). */
export const PEFT_PREFIX = "base_model.model.";

export type LoraBias = "none" | "all" | "lora_only";

export interface LoraAdapterConfig {
  peft_type: "LORA";
  task_type: string | null;
  base_model_name_or_path: string | null;
  r: number;
  lora_alpha: number;
  lora_dropout: number;
  /** List: exact name or "." suffix match; string: full regex match (or "all-linear"). */
  target_modules: string[] | string | null;
  use_rslora: boolean;
  bias: LoraBias;
  fan_in_fan_out: boolean;
  inference_mode: boolean;
  modules_to_save: string[] | null;
  init_lora_weights: boolean | string;
  rank_pattern: Record<string, number>;
  alpha_pattern: Record<string, number>;
  /**
   * Any other key PEFT wrote (revision, use_dora, layers_to_transform, peft_version, …) is kept;
   * those kiln does not apply must hold their inert default (see refuseUnappliedFields).
   */
  [key: string]: unknown;
}

/** LoraConfig defaults (peft `tuners/lora/config.py`). */
export const LORA_DEFAULTS = {
  peft_type: "LORA",
  task_type: null,
  base_model_name_or_path: null,
  r: 8,
  lora_alpha: 8,
  lora_dropout: 0,
  target_modules: null,
  use_rslora: false,
  bias: "none",
  fan_in_fan_out: false,
  inference_mode: true,
  modules_to_save: null,
  init_lora_weights: true,
  rank_pattern: {},
  alpha_pattern: {},
} as const satisfies Omit<LoraAdapterConfig, never>;

/** A LoRA config with PEFT's defaults for every field not given. */
export function loraConfig(partial: Partial<LoraAdapterConfig>): LoraAdapterConfig {
  const cfg = { ...LORA_DEFAULTS, ...partial } as LoraAdapterConfig;
  validateLoraConfig(cfg);
  return cfg;
}

/**
 * Every LoraConfig field of PEFT (huggingface/peft `tuners/lora/config.py`, up to 0.17) and what kiln
 * does with it. "applied": kiln reproduces PEFT's effect exactly (rank, scaling and patterns; which
 * modules carry weights — target_modules, exclude_modules, layers_to_transform/layers_pattern are
 * checked against the saved weights; modules_to_save and bias copies replace the base's tensors
 * in `@kiln/lora`). "inert": no effect on the weights or the forward pass of a saved adapter
 * (metadata, training-only or initialization-only settings, fan_in_fan_out which PEFT resets to
 * false for nn.Linear). Anything else set to a value other than its inert default is refused by
 * name: ignoring it would load an adapter that computes something other than what was trained.
 */
const INERT_FIELDS = new Set([
  "peft_type",
  "task_type",
  "base_model_name_or_path",
  "revision",
  "inference_mode",
  "auto_mapping",
  "peft_version",
  "lora_dropout",
  "runtime_config",
  "megatron_core",
  "qalora_group_size",
  "fan_in_fan_out",
  "layers_pattern",
  "ensure_weight_tying",
]);
const APPLIED_FIELDS = new Set([
  "r",
  "lora_alpha",
  "use_rslora",
  "rank_pattern",
  "alpha_pattern",
  "target_modules",
  "exclude_modules",
  "layers_to_transform",
  "modules_to_save",
  "bias",
  "init_lora_weights",
]);
/** Fields that change the adapter's computation when set, with why kiln refuses them. */
const REFUSED_WHEN_SET: Record<string, string> = {
  use_dora: "DoRA adapters are not supported",
  use_qalora: "QA-LoRA adapters are not supported",
  layer_replication: "layer replication is not supported",
  lora_bias: "a bias on lora_B is not supported",
  target_parameters: "LoRA on nn.Parameter targets is not supported",
  trainable_token_indices: "trainable token rows are not supported",
  alora_invocation_tokens: "activated LoRA is not supported",
  arrow_config: "Arrow routing is not supported",
  megatron_config: "Megatron parallel layers are not supported",
  loftq_config: "LoftQ quantized bases are not supported",
  eva_config: "EVA initialization is not supported",
  corda_config: "CorDA initialization is not supported",
};
/** init_lora_weights values that rewrite the base weights at initialization (the adapter needs that residual base). */
const BASE_MODIFYING_INIT = /^(pissa|olora|loftq|corda|eva)/;

/** A value that cannot change anything: the inert default of an optional feature. */
function isUnset(v: unknown): boolean {
  return (
    v === null ||
    v === undefined ||
    v === false ||
    v === "" ||
    (Array.isArray(v) && v.length === 0) ||
    (typeof v === "object" && v !== null && !Array.isArray(v) && Object.keys(v).length === 0)
  );
}

function refuseUnappliedFields(c: Record<string, unknown>, bad: (field: string, rule: string) => never): void {
  for (const [field, value] of Object.entries(c)) {
    if (INERT_FIELDS.has(field) || APPLIED_FIELDS.has(field) || isUnset(value)) continue;
    const why = REFUSED_WHEN_SET[field];
    bad(
      field,
      why
        ? `is ${JSON.stringify(value)}: ${why}`
        : `is ${JSON.stringify(value)}: kiln does not apply this field, and refuses it rather than ignore it`,
    );
  }
  const init = c.init_lora_weights;
  if (typeof init === "string" && BASE_MODIFYING_INIT.test(init))
    bad(
      "init_lora_weights",
      `is "${init}": that initialization rewrites the base weights, so the adapter only fits the modified base (convert it to a plain LoRA with PEFT's path_initial_model_for_weight_conversion)`,
    );
}

function validateLoraConfig(c: LoraAdapterConfig): void {
  const bad = (field: string, rule: string): never => {
    throw new PeftError(`adapter_config.json: "${field}" ${rule}`);
  };
  if (c.peft_type !== "LORA") bad("peft_type", `must be "LORA", got ${JSON.stringify(c.peft_type)}`);
  if (!Number.isInteger(c.r) || c.r <= 0) bad("r", `must be a positive integer, got ${JSON.stringify(c.r)}`);
  if (typeof c.lora_alpha !== "number" || !Number.isFinite(c.lora_alpha) || c.lora_alpha <= 0)
    bad("lora_alpha", `must be a positive number (the scale is lora_alpha / r), got ${JSON.stringify(c.lora_alpha)}`);
  refuseUnappliedFields(c as Record<string, unknown>, bad);
  if (typeof c.lora_dropout !== "number" || c.lora_dropout < 0 || c.lora_dropout >= 1)
    bad("lora_dropout", "must be in [0, 1)");
  if (!["none", "all", "lora_only"].includes(c.bias))
    bad("bias", `must be "none", "all" or "lora_only", got ${JSON.stringify(c.bias)}`);
  if (typeof c.use_rslora !== "boolean") bad("use_rslora", "must be a boolean");
  const tm = c.target_modules;
  if (tm !== null && typeof tm !== "string" && !(Array.isArray(tm) && tm.every((t) => typeof t === "string"))) {
    bad("target_modules", "must be a list of names, a regex string or null");
  }
  if (typeof tm === "string" && tm !== "all-linear") compilePattern(tm, "target_modules", bad);
  for (const field of ["modules_to_save", "exclude_modules"] as const) {
    const v = (c as Record<string, unknown>)[field];
    if (v === null || v === undefined) continue;
    const list = Array.isArray(v) && v.every((t) => typeof t === "string");
    if (field === "modules_to_save" ? !list : !list && typeof v !== "string")
      bad(
        field,
        field === "modules_to_save"
          ? "must be a list of module names or null"
          : "must be a list of names, a regex string or null",
      );
    if (typeof v === "string") compilePattern(v, field, bad);
  }
  const ltt = (c as Record<string, unknown>).layers_to_transform;
  if (
    ltt !== null &&
    ltt !== undefined &&
    !(Number.isInteger(ltt) || (Array.isArray(ltt) && ltt.every(Number.isInteger)))
  )
    bad("layers_to_transform", "must be a layer index, a list of layer indices or null");
  const lp = (c as Record<string, unknown>).layers_pattern;
  if (lp !== null && lp !== undefined) {
    if (!(typeof lp === "string" || (Array.isArray(lp) && lp.every((p) => typeof p === "string"))))
      bad("layers_pattern", "must be a name, a list of names or null");
    for (const p of typeof lp === "string" ? [lp] : (lp as string[])) compilePattern(p, "layers_pattern", bad);
  }
  for (const [field, pattern] of [
    ["rank_pattern", c.rank_pattern],
    ["alpha_pattern", c.alpha_pattern],
  ] as const) {
    if (!pattern || typeof pattern !== "object" || Array.isArray(pattern))
      bad(field, "must map module patterns to numbers");
    for (const [key, value] of Object.entries(pattern)) {
      compilePattern(key, `${field}.${key}`, bad);
      const ok =
        field === "rank_pattern"
          ? Number.isInteger(value) && value > 0
          : typeof value === "number" && Number.isFinite(value) && value > 0;
      if (!ok)
        bad(
          `${field}.${key}`,
          `must be a positive ${field === "rank_pattern" ? "integer" : "number"}, got ${JSON.stringify(value)}`,
        );
    }
  }
}

/** Compiles a PEFT pattern (a Python regex) so that a bad one is a PeftError naming the field. */
function compilePattern(pattern: string, field: string, bad: (field: string, rule: string) => never): void {
  try {
    new RegExp(pattern);
  } catch (e) {
    bad(field, `is not a valid regular expression: ${(e as Error).message}`);
  }
}

/** Parse adapter_config.json; missing fields take PEFT's defaults. Only LoRA adapters are supported. */
export function parseAdapterConfig(text: string): LoraAdapterConfig {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw new PeftError(`adapter_config.json: not valid JSON (${(e as Error).message})`);
  }
  if (!v || typeof v !== "object" || Array.isArray(v))
    throw new PeftError("adapter_config.json: must be a JSON object");
  return loraConfig(v as Partial<LoraAdapterConfig>);
}

/**
 * PEFT's save_pretrained format: json.dumps(indent=2, sort_keys=True), no trailing newline,
 * inference_mode forced to true. Float fields (lora_dropout) keep their Python float form.
 */
export function serializeAdapterConfig(config: LoraAdapterConfig): string {
  validateLoraConfig(config);
  return pythonJsonDumps(
    { ...config, inference_mode: true, lora_dropout: pyFloat(config.lora_dropout) },
    { indent: 2, sortKeys: true },
  );
}

/** PEFT's pattern lookup (`get_pattern_key`): the first key k with `(.*\.)?(k)$` matching the module. */
function patternValue(patterns: Record<string, number>, module: string): number | undefined {
  for (const [k, v] of Object.entries(patterns)) {
    if (new RegExp(`^(.*\\.)?(${k})$`).test(module)) return v;
  }
  return undefined;
}

/** Rank and alpha of one module, with rank_pattern / alpha_pattern applied. */
export function loraRankAlpha(config: LoraAdapterConfig, module: string): { r: number; alpha: number } {
  return {
    r: patternValue(config.rank_pattern, module) ?? config.r,
    alpha: patternValue(config.alpha_pattern, module) ?? config.lora_alpha,
  };
}

/** s = alpha / r, or alpha / √r with use_rslora (peft `tuners/lora/layer.py` update_layer). */
export function loraScaling(config: LoraAdapterConfig, module: string): number {
  const { r, alpha } = loraRankAlpha(config, module);
  return config.use_rslora ? alpha / Math.sqrt(r) : alpha / r;
}

/** Does `module` (an HF module path) match target_modules? "all-linear" must be resolved by the caller. */
export function matchesTargetModules(module: string, target: LoraAdapterConfig["target_modules"]): boolean {
  if (target === null) return false;
  if (typeof target === "string") return new RegExp(`^(?:${target})$`).test(module);
  return target.some((t) => module === t || module.endsWith(`.${t}`));
}

/**
 * modules_to_save as PEFT uses it: the config's list plus the heads its task model adds
 * (PeftModelForSequenceClassification / TokenClassification: classifier, score; QuestionAnswering: qa_outputs).
 */
export function effectiveModulesToSave(config: LoraAdapterConfig): string[] {
  const own = config.modules_to_save ?? [];
  const task =
    config.task_type === "SEQ_CLS" || config.task_type === "TOKEN_CLS"
      ? ["classifier", "score"]
      : config.task_type === "QUESTION_ANS"
        ? ["qa_outputs"]
        : [];
  return [...new Set([...own, ...task])];
}

/** PEFT's modules_to_save match (`_set_trainable`): the module name ends with one of the entries. */
export function matchesModulesToSave(module: string, modulesToSave: readonly string[]): boolean {
  return modulesToSave.some((m) => module.endsWith(m));
}

/**
 * The layer index PEFT reads from a module name for layers_to_transform (`check_target_module_exists`):
 * the number after `.<layers_pattern>.` (any component when no pattern is given), last match wins.
 */
export function peftLayerIndex(
  module: string,
  layersPattern: string | readonly string[] | null | undefined,
): number | undefined {
  const patterns =
    layersPattern === null || layersPattern === undefined || layersPattern.length === 0
      ? ["[^.]*"]
      : typeof layersPattern === "string"
        ? [layersPattern]
        : layersPattern;
  // As in PEFT: something precedes the pattern, and the index is followed by "." (a submodule of the layer).
  for (const p of patterns) {
    const m = new RegExp(`^.*\\.${p}\\.(\\d+)\\.`).exec(module);
    if (m) return Number(m[1]);
  }
  return undefined;
}

export type LoraPart = "lora_A" | "lora_B";

/** `model.layers.0.self_attn.q_proj` + lora_A → `base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight`. */
export function peftKey(module: string, part: LoraPart): string {
  return `${PEFT_PREFIX}${module}.${part}.weight`;
}

/** Inverse of peftKey; undefined for keys that are not LoRA A/B weights (bias, modules_to_save, …). */
export function parsePeftKey(key: string): { module: string; part: LoraPart } | undefined {
  const m = /^base_model\.model\.(.+)\.(lora_A|lora_B)\.weight$/.exec(key);
  return m ? { module: m[1], part: m[2] as LoraPart } : undefined;
}

export interface LoraLayer {
  /** [r, in_features] */
  A: TensorData;
  /** [out_features, r] */
  B: TensorData;
}

export interface PeftAdapter {
  config: LoraAdapterConfig;
  /** HF module path → its A and B. */
  layers: Map<string, LoraLayer>;
  /** Saved tensors that are not LoRA A/B (e.g. modules_to_save copies, lora biases), by full key. */
  other: Map<string, TensorData>;
}

/** Check the A/B pairs: both present, 2-D, ranks agree with each other and with the config. */
function checkLayers(config: LoraAdapterConfig, layers: Map<string, Partial<LoraLayer>>): Map<string, LoraLayer> {
  for (const [module, l] of layers) {
    const name = (p: LoraPart) => peftKey(module, p);
    if (!l.A) throw new PeftError(`tensor "${name("lora_A")}" is missing (its lora_B is present)`);
    if (!l.B) throw new PeftError(`tensor "${name("lora_B")}" is missing (its lora_A is present)`);
    if (l.A.shape.length !== 2)
      throw new PeftError(`tensor "${name("lora_A")}" must be 2-D [r, in], got [${l.A.shape}]`);
    if (l.B.shape.length !== 2)
      throw new PeftError(`tensor "${name("lora_B")}" must be 2-D [out, r], got [${l.B.shape}]`);
    const { r } = loraRankAlpha(config, module);
    if (l.A.shape[0] !== r)
      throw new PeftError(`tensor "${name("lora_A")}" has rank ${l.A.shape[0]} but the config says r = ${r}`);
    if (l.B.shape[1] !== r)
      throw new PeftError(`tensor "${name("lora_B")}" has rank ${l.B.shape[1]} but the config says r = ${r}`);
  }
  return layers as Map<string, LoraLayer>;
}

/** Read an adapter from its two files' contents. */
export function parsePeftAdapter(configText: string, weights: Uint8Array): PeftAdapter {
  const config = parseAdapterConfig(configText);
  const { tensors } = parseSafetensors(weights);
  const layers = new Map<string, Partial<LoraLayer>>();
  const other = new Map<string, TensorData>();
  for (const [key, t] of tensors) {
    const k = parsePeftKey(key);
    if (!k) {
      other.set(key, t);
      continue;
    }
    const l = layers.get(k.module) ?? {};
    l[k.part === "lora_A" ? "A" : "B"] = t;
    layers.set(k.module, l);
  }
  if (layers.size === 0)
    throw new PeftError(
      `adapter_model.safetensors holds no LoRA tensors (no "...lora_A.weight"/"...lora_B.weight" keys among ${tensors.size} tensors)`,
    );
  const tm = config.target_modules;
  if (tm !== null && tm !== "all-linear") {
    for (const module of layers.keys()) {
      if (!matchesTargetModules(module, tm))
        throw new PeftError(
          `module "${module}" has LoRA weights but does not match target_modules ${JSON.stringify(tm)} in adapter_config.json`,
        );
    }
  }
  const exclude = config.exclude_modules as LoraAdapterConfig["target_modules"] | undefined;
  const onlyLayers = config.layers_to_transform as number | number[] | null | undefined;
  for (const module of layers.keys()) {
    if (exclude !== null && exclude !== undefined && matchesTargetModules(module, exclude))
      throw new PeftError(
        `module "${module}" has LoRA weights but matches exclude_modules ${JSON.stringify(exclude)} in adapter_config.json`,
      );
    if (onlyLayers !== null && onlyLayers !== undefined) {
      const index = peftLayerIndex(module, config.layers_pattern as string | string[] | null | undefined);
      const allowed = Array.isArray(onlyLayers) ? onlyLayers : [onlyLayers];
      if (index === undefined || !allowed.includes(index))
        throw new PeftError(
          `module "${module}" has LoRA weights but layers_to_transform ${JSON.stringify(onlyLayers)} in adapter_config.json ${index === undefined ? "finds no layer index in its name" : `excludes layer ${index}`}`,
        );
    }
  }
  for (const key of other.keys()) {
    const param = key.startsWith(PEFT_PREFIX) ? key.slice(PEFT_PREFIX.length) : undefined;
    const module = param?.slice(0, param.lastIndexOf("."));
    if (param !== undefined && module !== undefined && matchesModulesToSave(module, effectiveModulesToSave(config)))
      continue;
    if (param?.endsWith(".bias") && config.bias !== "none") continue;
    throw new PeftError(
      `tensor "${key}" in adapter_model.safetensors is not a LoRA A/B weight, a copy of a module in modules_to_save (${JSON.stringify(effectiveModulesToSave(config))}) or a saved bias (bias is "${config.bias}"); kiln does not know how to apply it and refuses rather than ignore it`,
    );
  }
  const checked = checkLayers(config, layers);
  for (const [module, l] of checked) {
    for (const [part, t] of [
      ["lora_A", l.A],
      ["lora_B", l.B],
    ] as const) {
      if (!isFloatDtype(t.dtype)) continue;
      const values = toFloat32(t);
      const i = values.findIndex((v) => !Number.isFinite(v));
      if (i >= 0)
        throw new PeftError(`tensor "${peftKey(module, part)}" holds a non-finite value (${values[i]}) at index ${i}`);
    }
  }
  return { config, layers: checked, other };
}

const isFloatDtype = (d: string) => d === "F16" || d === "BF16" || d === "F32" || d === "F64";

/** Read `dir/adapter_config.json` and `dir/adapter_model.safetensors`. Node only. */
export async function readPeftAdapter(dir: string): Promise<PeftAdapter> {
  const { join } = await import("node:path");
  return parsePeftAdapter(
    await readAdapterFile(dir, join(dir, ADAPTER_CONFIG_FILE), readFileText),
    await readAdapterFile(dir, join(dir, ADAPTER_WEIGHTS_FILE), readFileBytes),
  );
}

// A bare ENOENT names one file; the user needs to know the whole directory layout that was expected.
async function readAdapterFile<T>(dir: string, path: string, read: (path: string) => Promise<T>): Promise<T> {
  try {
    return await read(path);
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    if (code !== "ENOENT" && code !== "ENOTDIR") throw e;
    const { stat } = await import("node:fs/promises");
    const dirExists = await stat(dir).then(
      (s) => s.isDirectory(),
      () => false,
    );
    const what = dirExists ? `"${path}" does not exist` : `directory "${dir}" does not exist`;
    throw new PeftError(
      `readPeftAdapter: ${what}; a PEFT adapter directory must hold ${ADAPTER_CONFIG_FILE} and ${ADAPTER_WEIGHTS_FILE}`,
    );
  }
}

/** The two files of an adapter in memory; weights carry `{format: "pt"}` metadata as PEFT writes. */
export function buildPeftAdapterFiles(adapter: {
  config: LoraAdapterConfig;
  layers: Map<string, LoraLayer>;
  other?: Map<string, TensorData>;
}): RepoFileMap {
  checkLayers(adapter.config, adapter.layers);
  const tensors = new Map<string, TensorData>();
  for (const [module, l] of adapter.layers) {
    for (const [part, t] of [
      ["lora_A", l.A],
      ["lora_B", l.B],
    ] as const) {
      if (!isDtype(t.dtype)) throw new PeftError(`tensor "${peftKey(module, part)}" has unknown dtype ${t.dtype}`);
      tensors.set(peftKey(module, part), t);
    }
  }
  for (const [k, t] of adapter.other ?? []) tensors.set(k, t);
  return new Map<string, Uint8Array | string>([
    [ADAPTER_CONFIG_FILE, serializeAdapterConfig(adapter.config)],
    [ADAPTER_WEIGHTS_FILE, serializeSafetensors(tensors, { format: "pt" })],
  ]);
}

/** Write an adapter directory PEFT's `PeftModel.from_pretrained` loads. Node only. */
export async function writePeftAdapter(
  dir: string,
  adapter: { config: LoraAdapterConfig; layers: Map<string, LoraLayer>; other?: Map<string, TensorData> },
): Promise<void> {
  await writeRepoFiles(dir, buildPeftAdapterFiles(adapter));
}

/**
 * Check an adapter against its base model: every LoRA module must be a 2-D `<module>.weight` of the
 * base with shape [out, in] ([in, out] with fan_in_fan_out) matching [B.shape[0], A.shape[1]]. `baseShape` looks a base tensor up by
 * its HF name (e.g. from SafetensorsFile.info) and returns undefined when it is absent.
 */
export function checkAdapterAgainstBase(adapter: PeftAdapter, baseShape: (name: string) => number[] | undefined): void {
  for (const [module, l] of adapter.layers) {
    const w = baseShape(`${module}.weight`);
    if (!w) throw new PeftError(`module "${module}": the base model has no tensor "${module}.weight"`);
    // fan_in_fan_out: the base stores [in, out] (GPT-2's Conv1D); LoRA's A/B keep nn.Linear shapes.
    const [out, inF] = adapter.config.fan_in_fan_out ? [w[1], w[0]] : [w[0], w[1]];
    if (w.length !== 2 || out !== l.B.shape[0] || inF !== l.A.shape[1]) {
      throw new PeftError(
        `module "${module}": base weight is [${w}] but lora_B·lora_A is [${l.B.shape[0]}, ${l.A.shape[1]}]`,
      );
    }
  }
}

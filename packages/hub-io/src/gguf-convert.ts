// Whole conversions between a Hugging Face model (or PEFT LoRA adapter) directory and a GGUF file
// that llama.cpp loads: `exportModelToGguf`, `exportAdapterToGguf` (a GGUF LoRA, general.type =
// adapter, that llama.cpp applies on the base with --lora), `convertGgufToHf` / `ggufToHfFiles`.
// Writes stream one tensor at a time through temp + rename; nothing holds the whole model.

import { type TensorData, fromFloat32, toFloat32 } from "./dtypes.js";
import { GgufConvertError } from "./errors.js";
import { GgufFile, type GgufMetadata, type GgufTensorInput, ggufValue, writeGgufFile } from "./gguf.js";
import {
  type GgufArchitecture,
  ggufArchitectureOf,
  ggufHyperparameters,
  ggufModuleName,
  applyQwen35Change,
  ggufTensorName,
  ggufTextConfig,
  hfConfigFromGguf,
  hfTensorName,
  llama3RopeFactors,
  permuteRopeRows,
  qwen35TensorChange,
  qwen35TensorChangeFromGguf,
  ropePermuteHeads,
} from "./gguf-models.js";
import { tokenizerFromGguf, tokenizerToGguf } from "./gguf-tokenizer.js";
import { type GgmlType, ggmlRowFits, ggufDecode, ggufEncode } from "./gguf-types.js";
import { type LoraAdapterConfig, loraRankAlpha, loraScaling, readPeftAdapter } from "./peft.js";
import {
  type JsonObject,
  REPO_FILES,
  type RepoFileMap,
  readRepoConfigs,
  serializeGenerationConfig,
  serializeModelConfig,
  serializeTokenizerConfig,
  serializeTokenizerJson,
  writeRepoFiles,
} from "./repo-files.js";
import { type TensorInput, serializeSafetensors, writeSafetensorsFile } from "./safetensors-write.js";
import { ShardedSafetensors } from "./sharded.js";

/** Storage of the matrices in the GGUF; vectors (norms, biases) are always F32, as llama.cpp's converter writes them. */
export type GgufExportDtype = "f32" | "f16" | "bf16" | "q8_0";
export const GGUF_EXPORT_DTYPES: readonly GgufExportDtype[] = ["f32", "f16", "bf16", "q8_0"];

/** llama_ftype: general.file_type (ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_BF16). */
const FILE_TYPE: Record<GgufExportDtype, number> = { f32: 0, f16: 1, q8_0: 7, bf16: 32 };
const MATRIX_TYPE: Record<GgufExportDtype, GgmlType> = { f32: "F32", f16: "F16", bf16: "BF16", q8_0: "Q8_0" };

export interface GgufTensorReport {
  name: string;
  type: GgmlType;
  shape: number[];
}

export interface GgufExportReport {
  path: string;
  kind: "model" | "adapter";
  architecture: GgufArchitecture;
  tensors: GgufTensorReport[];
  /** Where the file differs from the input's behaviour or layout, in words. */
  notes: string[];
  fileSize: number;
}

function checkDtype(dtype: string): GgufExportDtype {
  if (!(GGUF_EXPORT_DTYPES as readonly string[]).includes(dtype)) {
    throw new GgufConvertError(`dtype ${JSON.stringify(dtype)} is not one of ${GGUF_EXPORT_DTYPES.join(", ")}`);
  }
  return dtype as GgufExportDtype;
}

/** The GGUF type of one tensor: vectors F32; matrices the chosen type, F16 where Q8_0 blocks do not fit a row. */
function tensorType(shape: readonly number[], dtype: GgufExportDtype): GgmlType {
  if (shape.length !== 2) return "F32";
  const t = MATRIX_TYPE[dtype];
  return t === "Q8_0" && !ggmlRowFits("Q8_0", shape[1]) ? "F16" : t;
}

/** Encode a safetensors tensor as `type`, copying the bits when the dtypes already agree. */
function encodeAs(data: TensorData, type: GgmlType): Uint8Array {
  if (data.dtype === type && (type === "F32" || type === "F16" || type === "BF16")) return data.data;
  return ggufEncode(toFloat32(data), type as "F32" | "F16" | "BF16" | "Q8_0");
}

/** Order llama.cpp's converter writes: embedding, per layer, output norm, output. */
function ggufOrder(name: string): number {
  if (name.startsWith("token_embd")) return -2;
  if (name.startsWith("rope_freqs")) return -1;
  const m = /^blk\.(\d+)\./.exec(name);
  if (m) return Number(m[1]);
  return name.startsWith("output_norm") ? 1e9 : 1e9 + 1;
}

const IGNORED_HF = [/\.rotary_emb\.inv_freq$/];

export interface ExportModelOptions {
  dtype?: GgufExportDtype;
  /** general.name; default the directory's base name. */
  name?: string;
}

/** A HF Llama / Qwen2 / Qwen3 / Qwen3.5 (text) directory → a GGUF model file llama.cpp runs. Node only. */
export async function exportModelToGguf(
  modelDir: string,
  outPath: string,
  options: ExportModelOptions = {},
): Promise<GgufExportReport> {
  const dtype = checkDtype(options.dtype ?? "f32");
  const { basename } = await import("node:path");
  const configs = await readRepoConfigs(modelDir);
  const config = configs.config;
  const { gguf: arch } = ggufArchitectureOf(config);
  if (!configs.tokenizer)
    throw new GgufConvertError(`${modelDir}: no tokenizer.json; a GGUF model needs its vocabulary`);
  const notes: string[] = [];
  const meta: GgufMetadata = new Map();
  meta.set("general.architecture", ggufValue.string(arch));
  meta.set("general.type", ggufValue.string("model"));
  meta.set("general.name", ggufValue.string(options.name ?? basename(modelDir)));
  meta.set("general.file_type", ggufValue.u32(FILE_TYPE[dtype]));
  if (dtype === "q8_0") meta.set("general.quantization_version", ggufValue.u32(2));
  for (const [k, v] of ggufHyperparameters(arch, config)) meta.set(k, v);
  const tok = tokenizerToGguf({
    tokenizer: configs.tokenizer,
    tokenizerConfig: configs.tokenizerConfig,
    config,
    generationConfig: configs.generationConfig,
    chatTemplate: configs.chatTemplate,
    arch,
  });
  for (const [k, v] of tok.metadata) meta.set(k, v);
  notes.push(...tok.notes);

  const weights = await ShardedSafetensors.open(modelDir);
  try {
    const tied = (arch === "qwen35" ? ggufTextConfig(config) : config).tie_word_embeddings === true;
    const tensors: GgufTensorInput[] = [];
    const unknown: string[] = [];
    const skipped = { vision: 0, mtp: 0 };
    let fellBack = 0;
    for (const hfName of weights.keys()) {
      if (IGNORED_HF.some((r) => r.test(hfName))) continue;
      if (hfName === "lm_head.weight" && tied) continue;
      if (arch === "qwen35" && /^(model\.)?visual\./.test(hfName)) {
        skipped.vision++;
        continue;
      }
      if (arch === "qwen35" && /^mtp\./.test(hfName)) {
        skipped.mtp++;
        continue;
      }
      const name = ggufTensorName(hfName, arch);
      if (name === undefined) {
        unknown.push(hfName);
        continue;
      }
      const info = weights.info(hfName);
      const change = arch === "qwen35" ? qwen35TensorChange(hfName, config) : undefined;
      const shape = change?.shape ?? [...info.shape];
      const type = change?.forceF32 ? "F32" : tensorType(shape, dtype);
      if (dtype === "q8_0" && shape.length === 2 && type !== "Q8_0" && !change?.forceF32) fellBack++;
      const heads = ropePermuteHeads(arch, hfName, config);
      tensors.push({
        name,
        type,
        shape,
        data: async () => {
          const data = await weights.read(hfName);
          if (change) {
            const values = applyQwen35Change(toFloat32({ dtype: info.dtype, data }), shape, change);
            return ggufEncode(values, type as "F32" | "F16" | "BF16" | "Q8_0");
          }
          const bytes = encodeAs({ dtype: info.dtype, shape, data }, type);
          return heads > 0 ? permuteRopeRows(bytes, shape[0], heads, true) : bytes;
        },
      });
    }
    if (skipped.vision > 0)
      notes.push(
        `${skipped.vision} vision-tower tensors left out (llama.cpp reads a vision tower from a separate mmproj file)`,
      );
    if (skipped.mtp > 0) notes.push(`${skipped.mtp} multi-token-prediction (mtp.*) tensors left out`);
    if (unknown.length > 0) {
      throw new GgufConvertError(`${modelDir}: tensors with no llama.cpp name for ${arch}: ${unknown.join(", ")}`);
    }
    const factors = arch === "llama" ? llama3RopeFactors(config) : undefined;
    if (factors)
      tensors.push({
        name: "rope_freqs.weight",
        type: "F32",
        shape: [factors.length],
        data: ggufEncode(factors, "F32"),
      });
    if (fellBack > 0) notes.push(`${fellBack} matrices whose rows are not a multiple of 32 are F16 instead of Q8_0`);
    // Stable: within a layer the checkpoint's order stays.
    tensors.sort((a, b) => ggufOrder(a.name) - ggufOrder(b.name));
    const plan = await writeGgufFile(outPath, meta, tensors);
    return {
      path: outPath,
      kind: "model",
      architecture: arch,
      tensors: plan.tensors.map((t) => ({ name: t.name, type: t.type, shape: t.shape })),
      notes,
      fileSize: plan.fileSize,
    };
  } finally {
    await weights.close();
  }
}

export interface ExportAdapterOptions {
  dtype?: GgufExportDtype;
  /** The base model's config.json object (architecture, heads); read from `baseDir` when not given. */
  baseConfig?: JsonObject;
  /** The base model directory; default adapter_config.json's base_model_name_or_path when it is a local directory. */
  baseDir?: string;
}

/**
 * A PEFT LoRA adapter directory → a GGUF LoRA file (general.type = adapter, adapter.type = lora,
 * adapter.lora.alpha; tensors `<base tensor>.lora_a` [r, in] and `.lora_b` [out, r]) that llama.cpp
 * applies on the base GGUF. llama.cpp scales by alpha / r with one alpha per file: when every module
 * has the same scaling s the file stores alpha = s·r; otherwise each module's s is folded into its B
 * and alpha is 0 (llama.cpp then applies scale 1). Node only.
 */
export async function exportAdapterToGguf(
  adapterDir: string,
  outPath: string,
  options: ExportAdapterOptions = {},
): Promise<GgufExportReport> {
  const dtype = checkDtype(options.dtype ?? "f32");
  const adapter = await readPeftAdapter(adapterDir);
  let baseConfig = options.baseConfig;
  if (!baseConfig) {
    const baseDir = options.baseDir ?? adapter.config.base_model_name_or_path ?? undefined;
    if (!baseDir) {
      throw new GgufConvertError(
        `${adapterDir}: adapter_config.json names no base model; give the base model directory (its config.json decides the architecture)`,
      );
    }
    baseConfig = (
      await readRepoConfigs(baseDir).catch((e: Error) => {
        throw new GgufConvertError(`base model ${JSON.stringify(baseDir)} for ${adapterDir}: ${e.message}`);
      })
    ).config;
  }
  const { gguf: arch } = ggufArchitectureOf(baseConfig);
  if (adapter.other.size > 0) {
    throw new GgufConvertError(
      `${adapterDir}: tensors other than LoRA A/B (${[...adapter.other.keys()].join(", ")}) have no GGUF LoRA form`,
    );
  }
  const cfg: LoraAdapterConfig = adapter.config;
  const modules = [...adapter.layers.keys()];
  const scalings = modules.map((m) => loraScaling(cfg, m));
  const ranks = modules.map((m) => loraRankAlpha(cfg, m).r);
  const uniform = scalings.every((s) => s === scalings[0]) && ranks.every((r) => r === ranks[0]);
  const notes: string[] = [];
  if (!uniform)
    notes.push("modules differ in LoRA scaling: each module's scaling is folded into its lora_b, alpha = 0");
  const meta: GgufMetadata = new Map();
  meta.set("general.architecture", ggufValue.string(arch));
  meta.set("general.type", ggufValue.string("adapter"));
  meta.set("adapter.type", ggufValue.string("lora"));
  meta.set("adapter.lora.alpha", ggufValue.f32(uniform ? scalings[0] * ranks[0] : 0));
  meta.set("general.file_type", ggufValue.u32(FILE_TYPE[dtype]));
  const tensors: GgufTensorInput[] = [];
  for (const [i, module] of modules.entries()) {
    const base = ggufModuleName(module, arch);
    if (base === undefined || base === "token_embd" || base.endsWith(".ssm_conv1d")) {
      throw new GgufConvertError(`${adapterDir}: LoRA on ${JSON.stringify(module)} has no GGUF LoRA form`);
    }
    const { A, B } = adapter.layers.get(module)!;
    const heads = ropePermuteHeads(arch, `${module}.weight`, baseConfig);
    // Qwen3.5's value-head reorder moves B's rows (outputs) and A's columns (inputs) with the base's.
    const change = arch === "qwen35" ? qwen35TensorChange(`${module}.weight`, baseConfig) : undefined;
    const typeA = tensorType(A.shape, dtype);
    const typeB = tensorType(B.shape, dtype);
    tensors.push({
      name: `${base}.weight.lora_a`,
      type: typeA,
      shape: [...A.shape],
      data: () =>
        change?.columns
          ? ggufEncode(applyQwen35Change(toFloat32(A), A.shape, { columns: change.columns }), typeA as "F32")
          : encodeAs(A, typeA),
    });
    tensors.push({
      name: `${base}.weight.lora_b`,
      type: typeB,
      shape: [...B.shape],
      data: () => {
        let values = toFloat32(B);
        if (!uniform) values = values.map((v) => v * scalings[i]);
        if (change?.rows) values = applyQwen35Change(values, B.shape, { rows: change.rows });
        const bytes = uniform && !change?.rows ? encodeAs(B, typeB) : ggufEncode(values, typeB as "F32");
        return heads > 0 ? permuteRopeRows(bytes, B.shape[0], heads, true) : bytes;
      },
    });
  }
  tensors.sort((a, b) => ggufOrder(a.name) - ggufOrder(b.name));
  const plan = await writeGgufFile(outPath, meta, tensors);
  return {
    path: outPath,
    kind: "adapter",
    architecture: arch,
    tensors: plan.tensors.map((t) => ({ name: t.name, type: t.type, shape: t.shape })),
    notes,
    fileSize: plan.fileSize,
  };
}

export interface GgufToHfOptions {
  /** Storage of the matrices in model.safetensors: "f32" (default) or "bf16" (BF16 tensors keep their bits). Vectors are F32. */
  dtype?: "f32" | "bf16";
}

export interface GgufToHf {
  config: JsonObject;
  /** config.json, generation_config.json, tokenizer files, chat template (not the weights). */
  files: RepoFileMap;
  /** model.safetensors' tensors, each produced when asked for. */
  tensors: Map<string, TensorInput>;
  file: GgufFile;
  /** What the Hugging Face files leave out of the GGUF, in words. */
  notes: string[];
}

/** Plan a GGUF → HF conversion: configs and tokenizer now, each weight on demand. Close `file` after. */
export async function planGgufToHf(input: string | Uint8Array, options: GgufToHfOptions = {}): Promise<GgufToHf> {
  const dtype = options.dtype ?? "f32";
  if (dtype !== "f32" && dtype !== "bf16")
    throw new GgufConvertError(`dtype ${JSON.stringify(dtype)} is not f32 or bf16`);
  const file = await GgufFile.open(input);
  try {
    if (file.get("general.type") === "adapter") {
      throw new GgufConvertError("this GGUF is a LoRA adapter (general.type = adapter), not a model");
    }
    const tok = tokenizerFromGguf(file.metadata);
    const vocabSize = (file.get("tokenizer.ggml.tokens") as string[]).length;
    const config = hfConfigFromGguf(file.metadata, {
      hasOutput: file.tensors.some((t) => t.name === "output.weight"),
      vocabSize,
    });
    const embd = file.tensors.find((t) => t.name === "token_embd.weight");
    if (embd && embd.shape[0] !== vocabSize) config.vocab_size = embd.shape[0];
    if (tok.bosTokenId !== undefined) config.bos_token_id = tok.bosTokenId;
    if (tok.eosTokenId !== undefined) config.eos_token_id = tok.eosTokenId;
    if (tok.padTokenId !== undefined) config.pad_token_id = tok.padTokenId;
    const arch = file.get("general.architecture") as GgufArchitecture;
    const tensors = new Map<string, TensorInput>();
    const unknown: string[] = [];
    const notes: string[] = [...tok.notes];
    const textLayers = config.num_hidden_layers as number;
    const mtpTensors = new Set<string>();
    for (const t of file.tensors) {
      // A llama.cpp qwen35 conversion appends its multi-token-prediction blocks after the text layers.
      const block = /^blk\.(\d+)\./.exec(t.name);
      if (arch === "qwen35" && block && Number(block[1]) >= textLayers) {
        mtpTensors.add(t.name);
        continue;
      }
      const hfName = hfTensorName(t.name, arch);
      if (hfName === undefined) {
        unknown.push(`${t.name}${t.name === "rope_freqs.weight" ? " (llama3 RoPE scaling)" : ""}`);
        continue;
      }
      const change = arch === "qwen35" ? qwen35TensorChangeFromGguf(hfName, config) : undefined;
      const shape = change?.shape ?? t.shape;
      const matrix = shape.length === 2;
      const outDtype = matrix && dtype === "bf16" ? "BF16" : "F32";
      const heads = ropePermuteHeads(arch, hfName, config);
      const count = t.shape.reduce((a, d) => a * d, 1);
      tensors.set(hfName, {
        dtype: outDtype,
        shape,
        data: async () => {
          const raw = await file.raw(t.name);
          if (change) {
            const values = applyQwen35Change(ggufDecode(t.type, raw, count, t.name), t.shape, change);
            return fromFloat32(values, outDtype);
          }
          const bytes = t.type === outDtype ? raw : fromFloat32(ggufDecode(t.type, raw, count, t.name), outDtype);
          return heads > 0 ? permuteRopeRows(bytes, t.shape[0], heads, false) : bytes;
        },
      });
    }
    if (mtpTensors.size > 0) {
      notes.push(
        `${mtpTensors.size} multi-token-prediction tensors (blocks ${textLayers}+, qwen35.nextn_predict_layers) left out`,
      );
    }
    if (unknown.length > 0) throw new GgufConvertError(`tensors kiln does not import: ${unknown.join(", ")}`);
    // Fail on an unsupported tensor type now, naming it, rather than halfway through the weights.
    for (const t of file.tensors) {
      if (!mtpTensors.has(t.name) && !["F32", "F16", "BF16", "Q8_0"].includes(t.type))
        ggufDecode(t.type, new Uint8Array(0), 0, t.name);
    }
    const files: RepoFileMap = new Map();
    files.set(REPO_FILES.config, serializeModelConfig(config));
    const gen: JsonObject = {};
    if (tok.bosTokenId !== undefined) gen.bos_token_id = tok.bosTokenId;
    if (tok.eosTokenId !== undefined) gen.eos_token_id = tok.eosTokenId;
    if (tok.padTokenId !== undefined) gen.pad_token_id = tok.padTokenId;
    files.set(REPO_FILES.generationConfig, serializeGenerationConfig(gen));
    files.set(REPO_FILES.tokenizer, serializeTokenizerJson(tok.tokenizer));
    files.set(REPO_FILES.tokenizerConfig, serializeTokenizerConfig(tok.tokenizerConfig));
    if (tok.chatTemplate !== undefined) files.set(REPO_FILES.chatTemplate, tok.chatTemplate);
    return { config, files, tensors, file, notes };
  } catch (e) {
    await file.close();
    throw e;
  }
}

/** A GGUF model as Hugging Face files in memory (for loading it directly). */
export async function ggufToHfFiles(input: string | Uint8Array, options: GgufToHfOptions = {}): Promise<RepoFileMap> {
  const plan = await planGgufToHf(input, options);
  try {
    const tensors = new Map<string, TensorData>();
    for (const [name, t] of plan.tensors) {
      tensors.set(name, { dtype: t.dtype, shape: [...t.shape], data: await (t.data as () => Promise<Uint8Array>)() });
    }
    const files = new Map(plan.files);
    files.set(REPO_FILES.weights, serializeSafetensors(tensors, { format: "pt" }));
    return files;
  } finally {
    await plan.file.close();
  }
}

/** A GGUF model file → a Hugging Face directory (weights streamed one tensor at a time). Node only. */
export async function convertGgufToHf(
  ggufPath: string,
  outDir: string,
  options: GgufToHfOptions = {},
): Promise<{ config: JsonObject; tensors: number; notes: string[] }> {
  const plan = await planGgufToHf(ggufPath, options);
  try {
    const { join } = await import("node:path");
    await writeSafetensorsFile(join(outDir, REPO_FILES.weights), plan.tensors, { format: "pt" });
    await writeRepoFiles(outDir, plan.files);
    return { config: plan.config, tensors: plan.tensors.size, notes: plan.notes };
  } finally {
    await plan.file.close();
  }
}

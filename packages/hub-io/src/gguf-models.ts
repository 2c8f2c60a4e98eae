// Hugging Face decoder models ↔ GGUF as llama.cpp reads them: architecture names, tensor names,
// hyperparameter keys and RoPE row order, following llama.cpp's `convert_hf_to_gguf.py`,
// `gguf-py/gguf/constants.py` and `src/llama-arch.cpp` (the tree node-llama-cpp 3.21.1 ships).
// Llama's q/k rows go back to Meta's interleaved-pair RoPE layout (llama.cpp runs `llama` with
// LLAMA_ROPE_TYPE_NORM); Qwen2/Qwen3 keep the rotate-half layout (LLAMA_ROPE_TYPE_NEOX).
// Qwen3.5 (`qwen35`: Gated DeltaNet + gated attention, src/models/qwen35.cpp) stores its norms as
// 1 + w (llama.cpp's RMSNorm multiplies by the weight), A_log as −exp(A_log), the conv kernel
// squeezed to [channels, kernel], and — when there are more value heads than key heads — the value
// heads in tiled order (ggml_repeat broadcasts key heads tiled, transformers repeats them grouped).

import { GgufConvertError } from "./errors.js";
import { type GgufMetadata, type GgufValue, ggufPlain, ggufValue } from "./gguf.js";
import type { JsonObject } from "./repo-files.js";

/** HF `architectures[0]` → llama.cpp `general.architecture`. */
export const GGUF_ARCHITECTURES = {
  LlamaForCausalLM: "llama",
  Qwen2ForCausalLM: "qwen2",
  Qwen3ForCausalLM: "qwen3",
  Qwen3_5ForCausalLM: "qwen35",
  Qwen3_5ForConditionalGeneration: "qwen35",
} as const;
export type GgufHfArchitecture = keyof typeof GGUF_ARCHITECTURES;
export type GgufArchitecture = (typeof GGUF_ARCHITECTURES)[GgufHfArchitecture];

/** The HF architecture of a config.json (architectures[0], else model_type), or a typed error. */
export function ggufArchitectureOf(config: JsonObject): { hf: GgufHfArchitecture; gguf: GgufArchitecture } {
  const archs = Array.isArray(config.architectures) ? config.architectures : [];
  const byType: Record<string, GgufHfArchitecture> = {
    llama: "LlamaForCausalLM",
    qwen2: "Qwen2ForCausalLM",
    qwen3: "Qwen3ForCausalLM",
    qwen3_5: "Qwen3_5ForConditionalGeneration",
    qwen3_5_text: "Qwen3_5ForCausalLM",
  };
  const hf =
    typeof archs[0] === "string"
      ? archs[0]
      : typeof config.model_type === "string"
        ? byType[config.model_type]
        : undefined;
  if (hf === undefined || !(hf in GGUF_ARCHITECTURES)) {
    throw new GgufConvertError(
      `architecture ${JSON.stringify(hf ?? config.model_type)} has no GGUF export; supported: ${Object.keys(GGUF_ARCHITECTURES).join(", ")}`,
    );
  }
  return { hf: hf as GgufHfArchitecture, gguf: GGUF_ARCHITECTURES[hf as GgufHfArchitecture] };
}

const LAYER_NAMES: [string, string][] = [
  ["input_layernorm", "attn_norm"],
  ["self_attn.q_proj", "attn_q"],
  ["self_attn.k_proj", "attn_k"],
  ["self_attn.v_proj", "attn_v"],
  ["self_attn.o_proj", "attn_output"],
  ["self_attn.q_norm", "attn_q_norm"],
  ["self_attn.k_norm", "attn_k_norm"],
  ["post_attention_layernorm", "ffn_norm"],
  ["mlp.gate_proj", "ffn_gate"],
  ["mlp.up_proj", "ffn_up"],
  ["mlp.down_proj", "ffn_down"],
];
// Qwen3.5: the post-attention norm keeps its own name, and the Gated DeltaNet mixer's projections
// are llama.cpp's attn_qkv / attn_gate / ssm_* tensors (gguf-py constants.py MODEL_ARCH.QWEN35).
const QWEN35_LAYER_NAMES: [string, string][] = [
  ...LAYER_NAMES.filter(([hf]) => hf !== "post_attention_layernorm"),
  ["post_attention_layernorm", "post_attention_norm"],
  ["linear_attn.in_proj_qkv", "attn_qkv"],
  ["linear_attn.in_proj_z", "attn_gate"],
  ["linear_attn.in_proj_b", "ssm_beta"],
  ["linear_attn.in_proj_a", "ssm_alpha"],
  ["linear_attn.out_proj", "ssm_out"],
  ["linear_attn.conv1d", "ssm_conv1d"],
  ["linear_attn.norm", "ssm_norm"],
];
/** Qwen3.5 parameters that are not `<module>.weight`: whole HF tensor suffix ↔ whole GGUF suffix. */
const QWEN35_PARAMS: [string, string][] = [
  ["linear_attn.dt_bias", "ssm_dt.bias"],
  ["linear_attn.A_log", "ssm_a"],
];
const NAMES = {
  default: { toGguf: new Map(LAYER_NAMES), toHf: new Map(LAYER_NAMES.map(([a, b]) => [b, a])) },
  qwen35: { toGguf: new Map(QWEN35_LAYER_NAMES), toHf: new Map(QWEN35_LAYER_NAMES.map(([a, b]) => [b, a])) },
};
const namesOf = (arch?: GgufArchitecture) => (arch === "qwen35" ? NAMES.qwen35 : NAMES.default);

/** Qwen3_5ForConditionalGeneration keeps the text model under model.language_model. */
function textModule(hf: string): string {
  return hf.startsWith("model.language_model.") ? `model.${hf.slice("model.language_model.".length)}` : hf;
}

/** HF module path (without `.weight`) → llama.cpp tensor base name, e.g. `blk.3.attn_q`; undefined if unknown. */
export function ggufModuleName(hfModule: string, arch?: GgufArchitecture): string | undefined {
  const hf = arch === "qwen35" ? textModule(hfModule) : hfModule;
  if (hf === "model.embed_tokens") return "token_embd";
  if (hf === "model.norm") return "output_norm";
  if (hf === "lm_head") return "output";
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hf);
  const g = m ? namesOf(arch).toGguf.get(m[2]) : undefined;
  return m && g ? `blk.${m[1]}.${g}` : undefined;
}

/** llama.cpp tensor base name → HF module path; undefined if unknown. */
export function hfModuleName(ggufModule: string, arch?: GgufArchitecture): string | undefined {
  if (ggufModule === "token_embd") return "model.embed_tokens";
  if (ggufModule === "output_norm") return "model.norm";
  if (ggufModule === "output") return "lm_head";
  const m = /^blk\.(\d+)\.(.+)$/.exec(ggufModule);
  const h = m ? namesOf(arch).toHf.get(m[2]) : undefined;
  return m && h ? `model.layers.${m[1]}.${h}` : undefined;
}

/** `model.layers.0.self_attn.q_proj.weight` → `blk.0.attn_q.weight` (`.weight`/`.bias` kept). */
export function ggufTensorName(hfName: string, arch?: GgufArchitecture): string | undefined {
  if (arch === "qwen35") {
    const p = /^model\.layers\.(\d+)\.(.+)$/.exec(textModule(hfName));
    const g = p ? QWEN35_PARAMS.find(([hf]) => hf === p[2])?.[1] : undefined;
    if (p && g) return `blk.${p[1]}.${g}`;
  }
  const m = /^(.+)\.(weight|bias)$/.exec(hfName);
  const base = m ? ggufModuleName(m[1], arch) : undefined;
  return m && base ? `${base}.${m[2]}` : undefined;
}

/** Inverse of ggufTensorName (text-model names: `model.layers.…`). */
export function hfTensorName(ggufName: string, arch?: GgufArchitecture): string | undefined {
  if (arch === "qwen35") {
    const p = /^blk\.(\d+)\.(.+)$/.exec(ggufName);
    const h = p ? QWEN35_PARAMS.find(([, g]) => g === p[2])?.[0] : undefined;
    if (p && h) return `model.layers.${p[1]}.${h}`;
  }
  const m = /^(.+)\.(weight|bias)$/.exec(ggufName);
  const base = m ? hfModuleName(m[1], arch) : undefined;
  return m && base ? `${base}.${m[2]}` : undefined;
}

/** Heads whose rows a Llama q/k tensor is permuted over, or 0 when the tensor keeps its row order. */
export function ropePermuteHeads(arch: GgufArchitecture, hfName: string, config: JsonObject): number {
  if (arch !== "llama") return 0;
  const heads = config.num_attention_heads as number;
  if (/\.self_attn\.q_proj\.(weight|bias)$/.test(hfName)) return heads;
  if (/\.self_attn\.k_proj\.(weight|bias)$/.test(hfName)) return (config.num_key_value_heads as number) ?? heads;
  return 0;
}

/**
 * Reorder whole rows (each `rowBytes` long) of a q/k projection between HF's rotate-half layout and
 * Meta's interleaved pairs: HF row h·d + half·d/2 + j ↔ Meta row h·d + 2j + half. Works on encoded
 * bytes of any row-wise type (f32, f16, bf16, q8_0), so no value is touched.
 */
export function permuteRopeRows(bytes: Uint8Array, rows: number, heads: number, toInterleaved: boolean): Uint8Array {
  if (rows % heads !== 0 || (rows / heads) % 2 !== 0 || bytes.byteLength % rows !== 0) {
    throw new GgufConvertError(`cannot permute ${rows} rows (${bytes.byteLength} bytes) over ${heads} heads for RoPE`);
  }
  const d = rows / heads;
  const rowBytes = bytes.byteLength / rows;
  const out = new Uint8Array(bytes.byteLength);
  for (let h = 0; h < heads; h++) {
    for (let half = 0; half < 2; half++) {
      for (let j = 0; j < d / 2; j++) {
        const hf = h * d + half * (d / 2) + j;
        const meta = h * d + 2 * j + half;
        const [dst, src] = toInterleaved ? [meta, hf] : [hf, meta];
        out.set(bytes.subarray(src * rowBytes, (src + 1) * rowBytes), dst * rowBytes);
      }
    }
  }
  return out;
}

function intField(config: JsonObject, key: string, fallback?: number): number {
  const v = config[key] ?? fallback;
  if (typeof v !== "number" || !Number.isInteger(v) || v <= 0) {
    throw new GgufConvertError(`config.json: "${key}" must be a positive integer, got ${JSON.stringify(config[key])}`);
  }
  return v;
}

function numField(config: JsonObject, key: string, fallback: number): number {
  const v = config[key] ?? fallback;
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new GgufConvertError(`config.json: "${key}" must be a number, got ${JSON.stringify(config[key])}`);
  }
  return v;
}

/**
 * The text model's config: Qwen3_5ForConditionalGeneration nests it under `text_config` (token ids
 * and tie_word_embeddings fall back to the top level, as transformers reads them).
 */
export function ggufTextConfig(config: JsonObject): JsonObject {
  const text = config.text_config;
  if (text === undefined || text === null) return config;
  if (typeof text !== "object" || Array.isArray(text))
    throw new GgufConvertError(`config.json: "text_config" must be an object, got ${JSON.stringify(text)}`);
  const merged: JsonObject = { ...(text as JsonObject) };
  for (const key of ["tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id"]) {
    if (merged[key] === undefined && config[key] !== undefined) merged[key] = config[key];
  }
  return merged;
}

/** Gated DeltaNet dimensions of a Qwen3.5 text config (transformers Qwen3_5TextConfig defaults). */
export function qwen35LinearDims(config: JsonObject): {
  numKeyHeads: number;
  numValueHeads: number;
  keyHeadDim: number;
  valueHeadDim: number;
  convKernel: number;
} {
  const dims = {
    numKeyHeads: intField(config, "linear_num_key_heads", 16),
    numValueHeads: intField(config, "linear_num_value_heads", 32),
    keyHeadDim: intField(config, "linear_key_head_dim", 128),
    valueHeadDim: intField(config, "linear_value_head_dim", 128),
    convKernel: intField(config, "linear_conv_kernel_dim", 4),
  };
  if (dims.numValueHeads % dims.numKeyHeads !== 0) {
    throw new GgufConvertError(
      `config.json: linear_num_value_heads ${dims.numValueHeads} is not a multiple of linear_num_key_heads ${dims.numKeyHeads}`,
    );
  }
  return dims;
}

/** Qwen3.5's `qwen35.*` keys beyond the dense ones: Gated DeltaNet sizes, layer pattern, partial MRoPE. */
function qwen35Hyperparameters(config: JsonObject, headDim: number, k: (key: string, v: GgufValue) => void): void {
  const numLayers = intField(config, "num_hidden_layers");
  const interval = intField(config, "full_attention_interval", 4);
  if (Array.isArray(config.layer_types)) {
    const pattern = Array.from({ length: numLayers }, (_, i) =>
      (i + 1) % interval === 0 ? "full_attention" : "linear_attention",
    );
    if (JSON.stringify(config.layer_types) !== JSON.stringify(pattern)) {
      throw new GgufConvertError(
        `config.json: layer_types ${JSON.stringify(config.layer_types)} is not every ${interval}th layer full attention; llama.cpp's qwen35 reads only full_attention_interval`,
      );
    }
  }
  const full = Array.from({ length: numLayers }, (_, i) => (i + 1) % interval === 0).filter(Boolean).length;
  if (full === 0 || full === numLayers) {
    throw new GgufConvertError(
      `config.json: ${full === 0 ? "no" : "every"} layer is full attention (full_attention_interval ${interval}, ${numLayers} layers); llama.cpp's qwen35 aborts loading a model without both layer kinds`,
    );
  }
  if (config.attn_output_gate === false) {
    throw new GgufConvertError(
      "config.json: attn_output_gate = false has no llama.cpp qwen35 equivalent (always gated)",
    );
  }
  const d = qwen35LinearDims(config);
  if (d.keyHeadDim !== d.valueHeadDim) {
    throw new GgufConvertError(
      `config.json: linear_key_head_dim ${d.keyHeadDim} ≠ linear_value_head_dim ${d.valueHeadDim}; llama.cpp's qwen35 keeps one head size for the delta-rule state (ssm.state_size)`,
    );
  }
  k("ssm.conv_kernel", ggufValue.u32(d.convKernel));
  k("ssm.state_size", ggufValue.u32(d.keyHeadDim));
  k("ssm.group_count", ggufValue.u32(d.numKeyHeads));
  k("ssm.time_step_rank", ggufValue.u32(d.numValueHeads));
  k("ssm.inner_size", ggufValue.u32(d.valueHeadDim * d.numValueHeads));
  k("full_attention_interval", ggufValue.u32(interval));
  const params = (config.rope_parameters ?? null) as JsonObject | null;
  const factor = numField(params?.partial_rotary_factor !== undefined ? params : config, "partial_rotary_factor", 0.25);
  const rotary = Math.round(headDim * factor);
  k("rope.dimension_count", ggufValue.u32(rotary));
  // Interleaved MRoPE sections, in rotary pairs: llama.cpp's IMROPE gives pair i the position of
  // section i mod 3 while i < 3·sections[i mod 3], else the 4th position, which is 0 for text. So
  // every pair must be covered (Qwen3.5's [11, 11, 10] covers its 32 pairs); text tokens give all
  // sections the same position, so covered sections reproduce plain RoPE. Without mrope_section,
  // each section gets the pairs of its class, as [11, 11, 10] does.
  const rs = (config.rope_scaling ?? params ?? null) as JsonObject | null;
  const pairs = rotary / 2;
  const given = Array.isArray(rs?.mrope_section)
    ? (rs.mrope_section as number[])
    : [0, 1, 2].map((c) => Math.ceil((pairs - c) / 3));
  const sections = [...given, 0, 0, 0, 0].slice(0, 4);
  const total = sections.reduce((a, b) => a + b, 0);
  const covered =
    sections.every((v) => Number.isInteger(v) && v >= 0) &&
    Array.from({ length: pairs }, (_, i) => i % total).every((sector) => sector < 3 * sections[sector % 3]);
  if (given.length > 4 || total > headDim || !covered) {
    throw new GgufConvertError(
      `config.json: mrope_section ${JSON.stringify(given)} does not give every one of the ${pairs} rotary pairs a text position in llama.cpp's interleaved MRoPE (at most 4 non-negative integers, sum ≤ head dim ${headDim})`,
    );
  }
  k("rope.dimension_sections", ggufValue.array("i32", Int32Array.from(sections)));
}

/** llama.cpp's `<arch>.*` hyperparameters from a config.json. */
export function ggufHyperparameters(arch: GgufArchitecture, fullConfig: JsonObject): GgufMetadata {
  const config = arch === "qwen35" ? ggufTextConfig(fullConfig) : fullConfig;
  const hidden = intField(config, "hidden_size");
  const heads = intField(config, "num_attention_heads");
  const kvHeads = intField(config, "num_key_value_heads", heads);
  const headDim = config.head_dim == null ? hidden / heads : intField(config, "head_dim");
  const m: GgufMetadata = new Map();
  const k = (key: string, v: GgufValue) => m.set(`${arch}.${key}`, v);
  k("context_length", ggufValue.u32(intField(config, "max_position_embeddings", 2048)));
  k("embedding_length", ggufValue.u32(hidden));
  k("block_count", ggufValue.u32(intField(config, "num_hidden_layers")));
  k("feed_forward_length", ggufValue.u32(intField(config, "intermediate_size")));
  k("attention.head_count", ggufValue.u32(heads));
  k("attention.head_count_kv", ggufValue.u32(kvHeads));
  const params = (config.rope_parameters ?? null) as JsonObject | null;
  k("rope.freq_base", ggufValue.f32(numField(config, "rope_theta", (params?.rope_theta as number) ?? 10000)));
  k("attention.layer_norm_rms_epsilon", ggufValue.f32(numField(config, "rms_norm_eps", 1e-6)));
  k("attention.key_length", ggufValue.u32(headDim));
  k("attention.value_length", ggufValue.u32(headDim));
  k("rope.dimension_count", ggufValue.u32(headDim));
  k("vocab_size", ggufValue.u32(intField(config, "vocab_size")));
  if (arch === "qwen35") qwen35Hyperparameters(config, headDim, k);
  const rs = (config.rope_scaling ?? params ?? null) as JsonObject | null;
  const kind = rs ? (rs.rope_type ?? rs.type ?? "default") : "default";
  if (kind === "linear") {
    k("rope.scaling.type", ggufValue.string("linear"));
    k("rope.scaling.factor", ggufValue.f32(rs?.factor as number));
  } else if (kind !== "default" && kind !== "llama3") {
    throw new GgufConvertError(
      `config.json: rope scaling ${JSON.stringify(kind)} has no GGUF export (default, linear, llama3)`,
    );
  }
  if (config.attention_bias === true && arch !== "qwen2") {
    throw new GgufConvertError(`config.json: attention_bias = true on ${arch} has no llama.cpp equivalent`);
  }
  if (config.mlp_bias === true) throw new GgufConvertError("config.json: mlp_bias = true has no llama.cpp equivalent");
  return m;
}

/**
 * Llama 3 RoPE scaling as llama.cpp applies it: a `rope_freqs.weight` tensor of per-frequency
 * divisors (convert_hf_to_gguf.py LlamaModel.generate_extra_tensors). Undefined without llama3 scaling.
 */
export function llama3RopeFactors(config: JsonObject): Float32Array | undefined {
  const params = (config.rope_parameters ?? null) as JsonObject | null;
  const rs = (config.rope_scaling ?? params ?? null) as JsonObject | null;
  if (!rs || (rs.rope_type ?? rs.type) !== "llama3") return undefined;
  const hidden = config.hidden_size as number;
  const heads = config.num_attention_heads as number;
  const dim = (config.head_dim as number | undefined) ?? hidden / heads;
  const base = (config.rope_theta as number | undefined) ?? (params?.rope_theta as number) ?? 10000;
  const factor = rs.factor as number;
  const low = rs.low_freq_factor as number;
  const high = rs.high_freq_factor as number;
  const old = rs.original_max_position_embeddings as number;
  const lowWavelen = old / low;
  const highWavelen = old / high;
  const out = new Float32Array(dim / 2);
  for (let i = 0; i < dim / 2; i++) {
    const freq = 1 / base ** ((2 * i) / dim);
    const wavelen = (2 * Math.PI) / freq;
    if (wavelen < highWavelen) out[i] = 1;
    else if (wavelen > lowWavelen) out[i] = factor;
    else {
      const smooth = (old / wavelen - low) / (high - low);
      out[i] = 1 / ((1 - smooth) / factor + smooth);
    }
  }
  return out;
}

/** The shortest decimal that is the same float32 (so 1e-6 stored as f32 reads back as 1e-6). */
export function shortestFloat32(v: number): number {
  const f = Math.fround(v);
  for (let p = 1; p <= 9; p++) {
    const c = Number(f.toPrecision(p));
    if (Math.fround(c) === f) return c;
  }
  return f;
}

/** A config.json (HF) from a GGUF's `<arch>.*` keys; `hasOutput` says whether output.weight exists. */
export function hfConfigFromGguf(meta: GgufMetadata, opts: { hasOutput: boolean; vocabSize: number }): JsonObject {
  const archValue = meta.get("general.architecture");
  const arch = archValue?.kind === "string" ? archValue.value : undefined;
  const hf = Object.entries(GGUF_ARCHITECTURES).find(([, g]) => g === arch)?.[0];
  if (!hf) {
    throw new GgufConvertError(
      `general.architecture ${JSON.stringify(arch)} has no import; supported: ${Object.values(GGUF_ARCHITECTURES).join(", ")}`,
    );
  }
  const get = (key: string, required = true): number | undefined => {
    const v = meta.get(`${arch}.${key}`);
    if (v === undefined) {
      if (required) throw new GgufConvertError(`GGUF has no "${arch}.${key}"`);
      return undefined;
    }
    const x = ggufPlain(v);
    if (typeof x !== "number" && typeof x !== "bigint") {
      throw new GgufConvertError(`"${arch}.${key}" must be a number, got ${v.kind}`);
    }
    return Number(x);
  };
  const hidden = get("embedding_length") as number;
  const heads = get("attention.head_count") as number;
  const kvRaw = meta.get(`${arch}.attention.head_count_kv`);
  if (kvRaw?.kind === "array") {
    throw new GgufConvertError(`"${arch}.attention.head_count_kv" varies per layer; kiln's import needs one value`);
  }
  const headDim = get("attention.key_length", false) ?? hidden / heads;
  const rotary = get("rope.dimension_count", false);
  if (arch !== "qwen35" && rotary !== undefined && rotary !== headDim) {
    throw new GgufConvertError(
      `"${arch}.rope.dimension_count" ${rotary} ≠ head dim ${headDim}: partial RoPE is not imported`,
    );
  }
  const config: JsonObject = {
    architectures: [hf],
    model_type: arch,
    hidden_size: hidden,
    intermediate_size: get("feed_forward_length"),
    num_hidden_layers: get("block_count"),
    num_attention_heads: heads,
    num_key_value_heads: get("attention.head_count_kv", false) ?? heads,
    head_dim: headDim,
    vocab_size: opts.vocabSize,
    rms_norm_eps: shortestFloat32(get("attention.layer_norm_rms_epsilon") as number),
    rope_theta: shortestFloat32(get("rope.freq_base", false) ?? 10000),
    max_position_embeddings: get("context_length", false) ?? 2048,
    tie_word_embeddings: !opts.hasOutput,
    hidden_act: "silu",
    torch_dtype: "float32",
  };
  if (arch === "qwen35") {
    Object.assign(config, qwen35ConfigFromGguf(meta, get, headDim, rotary ?? headDim));
  }
  const scaling = meta.get(`${arch}.rope.scaling.type`);
  if (scaling !== undefined && ggufPlain(scaling) !== "none") {
    if (ggufPlain(scaling) !== "linear") {
      throw new GgufConvertError(
        `"${arch}.rope.scaling.type" ${JSON.stringify(ggufPlain(scaling))} is not imported (linear only)`,
      );
    }
    config.rope_scaling = { type: "linear", factor: shortestFloat32(get("rope.scaling.factor") as number) };
  }
  return config;
}

/**
 * Where a Qwen3.5 tensor's values change on the way to llama.cpp (convert_hf_to_gguf.py
 * Qwen3NextModel / _LinearAttentionVReorderBase). Permutations are `out[i] = in[perm[i]]` over rows
 * (`rows`) or over the columns of every row (`columns`); `values` maps each value after them.
 */
export interface Qwen35TensorChange {
  rows?: Int32Array;
  columns?: Int32Array;
  values?: (v: Float32Array) => Float32Array;
  /** The GGUF shape when it differs (the conv kernel loses its middle 1). */
  shape?: number[];
  /** llama.cpp's ssm_conv reads an F32 kernel whatever the file's matrix type. */
  forceF32?: boolean;
}

/** Grouped-by-key-head value heads → tiled order: index j·K + g takes g·r + j, each head `headDim` wide. */
function tiledHeads(numKeyHeads: number, perKey: number, headDim: number, offset = 0, total?: number): Int32Array {
  const n = numKeyHeads * perKey * headDim;
  const perm = Int32Array.from({ length: total ?? offset + n }, (_, i) => i);
  for (let g = 0; g < numKeyHeads; g++)
    for (let j = 0; j < perKey; j++)
      for (let e = 0; e < headDim; e++)
        perm[offset + (j * numKeyHeads + g) * headDim + e] = offset + (g * perKey + j) * headDim + e;
  return perm;
}

/** The change one Qwen3.5 HF tensor (text-model name, `.weight` or not) needs, or undefined. */
export function qwen35TensorChange(hfName: string, config: JsonObject): Qwen35TensorChange | undefined {
  const text = ggufTextConfig(config);
  const name = textModule(hfName);
  if (name.endsWith("norm.weight") && !name.endsWith("linear_attn.norm.weight")) {
    // transformers' Qwen3_5RMSNorm computes x̂ · (1 + w); llama.cpp's RMSNorm x̂ · w.
    return { values: (v) => v.map((x) => x + 1) };
  }
  if (!name.includes(".linear_attn.")) return undefined;
  const d = qwen35LinearDims(text);
  const r = d.numValueHeads / d.numKeyHeads;
  const keyDim = d.numKeyHeads * d.keyHeadDim;
  const reorder = r > 1;
  const change: Qwen35TensorChange = {};
  if (name.endsWith(".A_log")) change.values = (v) => v.map((x) => -Math.exp(x));
  if (name.endsWith(".conv1d.weight")) {
    change.shape = [2 * keyDim + d.numValueHeads * d.valueHeadDim, d.convKernel];
    change.forceF32 = true;
  }
  if (reorder) {
    if (name.endsWith(".in_proj_qkv.weight") || name.endsWith(".conv1d.weight"))
      change.rows = tiledHeads(d.numKeyHeads, r, d.valueHeadDim, 2 * keyDim);
    else if (name.endsWith(".in_proj_z.weight")) change.rows = tiledHeads(d.numKeyHeads, r, d.valueHeadDim);
    else if (/\.(in_proj_a\.weight|in_proj_b\.weight|A_log|dt_bias)$/.test(name))
      change.rows = tiledHeads(d.numKeyHeads, r, 1);
    else if (name.endsWith(".out_proj.weight")) change.columns = tiledHeads(d.numKeyHeads, r, d.valueHeadDim);
  }
  return Object.keys(change).length > 0 ? change : undefined;
}

/** Apply a Qwen35TensorChange to row-major f32 values of `shape` (a vector is one column of rows). */
export function applyQwen35Change(
  values: Float32Array,
  shape: readonly number[],
  change: Qwen35TensorChange,
): Float32Array {
  const rows = shape[0];
  const width = values.length / rows;
  let out = values;
  if (change.columns) {
    const perm = change.columns;
    if (perm.length !== width) throw new GgufConvertError(`column permutation of ${perm.length} for rows of ${width}`);
    const next = new Float32Array(out.length);
    for (let i = 0; i < rows; i++) for (let c = 0; c < width; c++) next[i * width + c] = out[i * width + perm[c]];
    out = next;
  }
  if (change.rows) {
    const perm = change.rows;
    if (perm.length !== rows) throw new GgufConvertError(`row permutation of ${perm.length} for ${rows} rows`);
    const next = new Float32Array(out.length);
    for (let i = 0; i < rows; i++) next.set(out.subarray(perm[i] * width, (perm[i] + 1) * width), i * width);
    out = next;
  }
  return change.values ? change.values(out) : out;
}

/**
 * The Qwen3.5 text-config fields of a `qwen35` GGUF (the inverse of qwen35Hyperparameters). A
 * llama.cpp conversion may append multi-token-prediction blocks (`nextn_predict_layers`) after the
 * text layers; they are not part of the model kiln runs (planGgufToHf leaves their tensors out).
 */
function qwen35ConfigFromGguf(
  meta: GgufMetadata,
  get: (key: string, required?: boolean) => number | undefined,
  headDim: number,
  rotary: number,
): JsonObject {
  const blocks = get("block_count") as number;
  const nextn = get("nextn_predict_layers", false) ?? 0;
  if (nextn >= blocks) {
    throw new GgufConvertError(
      `"qwen35.nextn_predict_layers" ${nextn} leaves none of the ${blocks} blocks as text layers`,
    );
  }
  const valueHeads = get("ssm.time_step_rank") as number;
  const inner = get("ssm.inner_size") as number;
  if (inner % valueHeads !== 0) {
    throw new GgufConvertError(
      `"qwen35.ssm.inner_size" ${inner} is not a multiple of "qwen35.ssm.time_step_rank" ${valueHeads} (value heads)`,
    );
  }
  if (rotary % 2 !== 0 || rotary > headDim) {
    throw new GgufConvertError(
      `"qwen35.rope.dimension_count" ${rotary} is not an even rotary dim ≤ head dim ${headDim}`,
    );
  }
  // llama.cpp's interleaved MRoPE gives text tokens plain RoPE only where every rotary pair falls in
  // one of the three position sections (see qwen35Hyperparameters); otherwise kiln would compute
  // something else, so refuse.
  const sectionsValue = meta.get("qwen35.rope.dimension_sections");
  const sectionsPlain = sectionsValue === undefined ? undefined : ggufPlain(sectionsValue);
  const sections = Array.isArray(sectionsPlain) ? sectionsPlain.map(Number) : undefined;
  if (sections !== undefined) {
    const padded = [...sections, 0, 0, 0, 0].slice(0, 4);
    const total = padded.reduce((a, b) => a + b, 0);
    const pairs = rotary / 2;
    const covered = total > 0 && Array.from({ length: pairs }, (_, i) => i % total).every((s) => s < 3 * padded[s % 3]);
    if (!covered) {
      throw new GgufConvertError(
        `"qwen35.rope.dimension_sections" ${JSON.stringify(sections)} leaves some of the ${pairs} rotary pairs without a text position; kiln's import needs plain partial RoPE for text`,
      );
    }
  }
  const numLayers = blocks - nextn;
  const interval = get("full_attention_interval", false) ?? 4;
  return {
    architectures: ["Qwen3_5ForCausalLM"],
    model_type: "qwen3_5_text",
    num_hidden_layers: numLayers,
    layer_types: Array.from({ length: numLayers }, (_, i) =>
      (i + 1) % interval === 0 ? "full_attention" : "linear_attention",
    ),
    full_attention_interval: interval,
    linear_conv_kernel_dim: get("ssm.conv_kernel"),
    linear_key_head_dim: get("ssm.state_size"),
    linear_value_head_dim: inner / valueHeads,
    linear_num_key_heads: get("ssm.group_count"),
    linear_num_value_heads: valueHeads,
    attn_output_gate: true,
    rope_parameters: {
      rope_type: "default",
      rope_theta: shortestFloat32(get("rope.freq_base", false) ?? 10000),
      partial_rotary_factor: rotary / headDim,
      ...(sections !== undefined ? { mrope_section: sections.slice(0, 3) } : {}),
    },
  };
}

/** `out[perm[i]] = in[i]`'s permutation: the one that undoes `perm`. */
function inversePermutation(perm: Int32Array): Int32Array {
  const inv = new Int32Array(perm.length);
  for (let i = 0; i < perm.length; i++) inv[perm[i]] = i;
  return inv;
}

/**
 * What a `qwen35` GGUF tensor needs to become the Hugging Face one (the inverse of
 * qwen35TensorChange): value heads back to grouped order, norms w − 1, A_log = log(−A), the conv
 * kernel back to [channels, 1, kernel]. `shape` is the HF shape when it differs.
 * The norm's w − 1 is exact wherever 1 + w ≥ 0.5 (Sterbenz), so the (1 + w) kiln multiplies by is the
 * GGUF's value bit for bit; log(−A) comes back within float32 rounding of A_log.
 */
export function qwen35TensorChangeFromGguf(hfName: string, config: JsonObject): Qwen35TensorChange | undefined {
  const forward = qwen35TensorChange(hfName, config);
  if (!forward) return undefined;
  const name = textModule(hfName);
  const back: Qwen35TensorChange = {};
  if (forward.rows) back.rows = inversePermutation(forward.rows);
  if (forward.columns) back.columns = inversePermutation(forward.columns);
  if (name.endsWith(".A_log")) {
    back.values = (v) => {
      const i = v.findIndex((x) => !(x < 0));
      if (i >= 0) {
        throw new GgufConvertError(`${hfName}: the GGUF's A (−exp(A_log)) must be negative, element ${i} is ${v[i]}`);
      }
      return v.map((x) => Math.log(-x));
    };
  } else if (forward.values) {
    back.values = (v) => v.map((x) => x - 1);
  }
  if (forward.shape) {
    const d = qwen35LinearDims(ggufTextConfig(config));
    back.shape = [forward.shape[0], 1, d.convKernel];
  }
  return back;
}

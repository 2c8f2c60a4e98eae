// Hugging Face decoder models ↔ GGUF as llama.cpp reads them: architecture names, tensor names,
// hyperparameter keys and RoPE row order, following llama.cpp's `convert_hf_to_gguf.py`,
// `gguf-py/gguf/constants.py` and `src/llama-arch.cpp` (the tree node-llama-cpp 3.21.1 ships).
// Llama's q/k rows go back to Meta's interleaved-pair RoPE layout (llama.cpp runs `llama` with
// LLAMA_ROPE_TYPE_NORM); Qwen2/Qwen3 keep the rotate-half layout (LLAMA_ROPE_TYPE_NEOX).

import { GgufConvertError } from "./errors.js";
import { type GgufMetadata, type GgufValue, ggufPlain, ggufValue } from "./gguf.js";
import type { JsonObject } from "./repo-files.js";

/** HF `architectures[0]` → llama.cpp `general.architecture`. */
export const GGUF_ARCHITECTURES = {
  LlamaForCausalLM: "llama",
  Qwen2ForCausalLM: "qwen2",
  Qwen3ForCausalLM: "qwen3",
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
const TO_GGUF = new Map(LAYER_NAMES);
const TO_HF = new Map(LAYER_NAMES.map(([a, b]) => [b, a]));

/** HF module path (without `.weight`) → llama.cpp tensor base name, e.g. `blk.3.attn_q`; undefined if unknown. */
export function ggufModuleName(hfModule: string): string | undefined {
  if (hfModule === "model.embed_tokens") return "token_embd";
  if (hfModule === "model.norm") return "output_norm";
  if (hfModule === "lm_head") return "output";
  const m = /^model\.layers\.(\d+)\.(.+)$/.exec(hfModule);
  const g = m ? TO_GGUF.get(m[2]) : undefined;
  return m && g ? `blk.${m[1]}.${g}` : undefined;
}

/** llama.cpp tensor base name → HF module path; undefined if unknown. */
export function hfModuleName(ggufModule: string): string | undefined {
  if (ggufModule === "token_embd") return "model.embed_tokens";
  if (ggufModule === "output_norm") return "model.norm";
  if (ggufModule === "output") return "lm_head";
  const m = /^blk\.(\d+)\.(.+)$/.exec(ggufModule);
  const h = m ? TO_HF.get(m[2]) : undefined;
  return m && h ? `model.layers.${m[1]}.${h}` : undefined;
}

/** `model.layers.0.self_attn.q_proj.weight` → `blk.0.attn_q.weight` (`.weight`/`.bias` kept). */
export function ggufTensorName(hfName: string): string | undefined {
  const m = /^(.+)\.(weight|bias)$/.exec(hfName);
  const base = m ? ggufModuleName(m[1]) : undefined;
  return m && base ? `${base}.${m[2]}` : undefined;
}

/** Inverse of ggufTensorName. */
export function hfTensorName(ggufName: string): string | undefined {
  const m = /^(.+)\.(weight|bias)$/.exec(ggufName);
  const base = m ? hfModuleName(m[1]) : undefined;
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

/** llama.cpp's `<arch>.*` hyperparameters from a config.json. */
export function ggufHyperparameters(arch: GgufArchitecture, config: JsonObject): GgufMetadata {
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
  if (rotary !== undefined && rotary !== headDim) {
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

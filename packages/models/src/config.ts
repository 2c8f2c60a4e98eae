// config.json → a normalised decoder config (docs/NUMERICS.md §5.1). Field names and defaults follow
// transformers' configuration_llama.py / configuration_qwen2.py / configuration_qwen3.py /
// configuration_qwen3_5.py (read at commit 8116e632367180f6edec221d17cd36513334d169).
import { hasBlockType, registeredBlockTypes } from "./block-types.js";
import {
  type Architecture,
  type DecoderConfig,
  type LayerType,
  type LinearAttentionConfig,
  type RopeScaling,
  SUPPORTED_ARCHITECTURES,
} from "./decoder-config.js";
import { ModelConfigError, UnsupportedArchitectureError } from "./errors.js";

export * from "./decoder-config.js";

const MODEL_TYPE_TO_ARCH: Record<string, Architecture> = {
  llama: "LlamaForCausalLM",
  qwen2: "Qwen2ForCausalLM",
  qwen3: "Qwen3ForCausalLM",
  qwen3_5: "Qwen3_5ForConditionalGeneration",
  qwen3_5_text: "Qwen3_5ForCausalLM",
};

/** model_type values kiln builds, and the architectures each may name (transformers' config classes). */
const MODEL_TYPE_ARCHITECTURES: Record<string, readonly Architecture[]> = {
  llama: ["LlamaForCausalLM"],
  qwen2: ["Qwen2ForCausalLM"],
  qwen3: ["Qwen3ForCausalLM"],
  qwen3_5: ["Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"],
  qwen3_5_text: ["Qwen3_5ForCausalLM", "Qwen3_5ForConditionalGeneration"],
};

/**
 * Upper bounds on config sizes: far above any released checkpoint (the largest vocabularies are
 * ~262 k, the longest contexts ~10 M positions), low enough that a typo or a hostile file cannot
 * ask for an absurd allocation or a context the position arithmetic cannot hold exactly.
 */
export const CONFIG_LIMITS = {
  vocab_size: 2 ** 24,
  hidden_size: 2 ** 16,
  intermediate_size: 2 ** 20,
  num_hidden_layers: 1024,
  num_attention_heads: 1024,
  num_key_value_heads: 1024,
  head_dim: 4096,
  max_position_embeddings: 2 ** 24,
  linear_conv_kernel_dim: 64,
  linear_num_key_heads: 1024,
  linear_num_value_heads: 1024,
  linear_key_head_dim: 4096,
  linear_value_head_dim: 4096,
  full_attention_interval: 1024,
} as const;

const QWEN3_5_ARCHITECTURES: readonly Architecture[] = ["Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM"];

function num(raw: Record<string, unknown>, key: string, fallback?: number): number {
  const v = raw[key] ?? fallback;
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new ModelConfigError(`config.json: "${key}" must be a number, got ${JSON.stringify(raw[key])}`);
  }
  return v;
}

/** A number that must be > 0 (e.g. rms_norm_eps: a negative epsilon can make 1/sqrt(mean + eps) NaN). */
function positiveNum(raw: Record<string, unknown>, key: string, fallback?: number): number {
  const v = num(raw, key, fallback);
  if (!(v > 0)) throw new ModelConfigError(`config.json: "${key}" must be positive, got ${v}`);
  return v;
}

function posInt(raw: Record<string, unknown>, key: keyof typeof CONFIG_LIMITS, fallback?: number): number {
  const v = num(raw, key, fallback);
  const max = CONFIG_LIMITS[key];
  if (!Number.isInteger(v) || v <= 0 || v > max)
    throw new ModelConfigError(
      `config.json: "${key}" must be a positive integer of at most ${max}, got ${JSON.stringify(raw[key] ?? v)}`,
    );
  return v;
}

/** bos/eos ids: integers the model can emit (0 ≤ id < vocab_size); absent is allowed. */
function tokenIds(raw: Record<string, unknown>, key: string, vocabSize: number): number[] {
  const v = raw[key];
  if (v === undefined || v === null) return [];
  const ids = Array.isArray(v) ? v : [v];
  for (const id of ids)
    if (!(typeof id === "number" && Number.isInteger(id) && id >= 0 && id < vocabSize))
      throw new ModelConfigError(
        `config.json: "${key}" must be a token id in [0, vocab_size ${vocabSize}) or a list of them, got ${JSON.stringify(v)}`,
      );
  return ids as number[];
}

/** model_type, when given, must be one kiln builds and agree with the architecture. */
function checkModelType(config: Record<string, unknown>, architecture: Architecture): void {
  const mt = config.model_type;
  if (mt === undefined) return;
  const archs = typeof mt === "string" ? MODEL_TYPE_ARCHITECTURES[mt] : undefined;
  if (!archs)
    throw new UnsupportedArchitectureError(
      `config.json: "model_type" ${JSON.stringify(mt)} is not supported; supported: ${Object.keys(MODEL_TYPE_ARCHITECTURES).join(", ")}`,
    );
  if (!archs.includes(architecture))
    throw new ModelConfigError(
      `config.json: "model_type" "${mt}" does not match architecture "${architecture}" (${mt} builds ${archs.join(" or ")})`,
    );
}

/** Which architecture a config asks for; throws listing the supported ones otherwise. */
export function resolveArchitecture(raw: Record<string, unknown>): Architecture {
  const archs = Array.isArray(raw.architectures) ? (raw.architectures as unknown[]) : [];
  const named = archs.find((a): a is string => typeof a === "string");
  if (named !== undefined) {
    if ((SUPPORTED_ARCHITECTURES as readonly string[]).includes(named)) return named as Architecture;
    throw new UnsupportedArchitectureError(
      `config.json: architecture "${named}" is not supported; supported: ${SUPPORTED_ARCHITECTURES.join(", ")}`,
    );
  }
  const mt = raw.model_type;
  if (typeof mt === "string" && MODEL_TYPE_TO_ARCH[mt]) return MODEL_TYPE_TO_ARCH[mt];
  throw new UnsupportedArchitectureError(
    `config.json: model_type ${JSON.stringify(mt)} without a supported "architectures" entry; supported: ${SUPPORTED_ARCHITECTURES.join(", ")}`,
  );
}

function parseRopeScaling(raw: Record<string, unknown>): { theta: number; scaling: RopeScaling } {
  // Newer transformers store theta and scaling together under rope_parameters (docs/NUMERICS.md §5.1).
  const params = (raw.rope_parameters ?? null) as Record<string, unknown> | null;
  const rs = (raw.rope_scaling ?? params ?? null) as Record<string, unknown> | null;
  const theta = num(raw, "rope_theta", (params?.rope_theta as number | undefined) ?? 10000);
  // inv_freq = theta^(-2i/d): theta <= 0 gives NaN or infinite frequencies.
  if (!(theta > 0)) throw new ModelConfigError(`config.json: "rope_theta" must be positive, got ${theta}`);
  if (rs === null || typeof rs !== "object") return { theta, scaling: { type: "default" } };
  const kind = (rs.rope_type ?? rs.type ?? "default") as string;
  if (kind === "default") return { theta, scaling: { type: "default" } };
  const sub = (key: string): number => num(rs, key);
  if (kind === "linear") return { theta, scaling: { type: "linear", factor: sub("factor") } };
  if (kind === "llama3") {
    return {
      theta,
      scaling: {
        type: "llama3",
        factor: sub("factor"),
        lowFreqFactor: sub("low_freq_factor"),
        highFreqFactor: sub("high_freq_factor"),
        originalMaxPositionEmbeddings: sub("original_max_position_embeddings"),
      },
    };
  }
  throw new ModelConfigError(
    `config.json: rope scaling type "${kind}" is not supported; supported: default, linear, llama3`,
  );
}

/**
 * A vision-language config (`Qwen3_5ForConditionalGeneration`) nests the text model's fields under
 * `text_config`; the decoder reads them from there. Token ids and `tie_word_embeddings` fall back to
 * the top level when the text config leaves them out.
 */
function textConfigOf(raw: Record<string, unknown>): Record<string, unknown> {
  const text = raw.text_config;
  if (text === undefined || text === null) return raw;
  if (typeof text !== "object" || Array.isArray(text))
    throw new ModelConfigError(`config.json: "text_config" must be an object, got ${JSON.stringify(text)}`);
  const merged: Record<string, unknown> = { ...(text as Record<string, unknown>) };
  for (const key of ["tie_word_embeddings", "bos_token_id", "eos_token_id", "pad_token_id"]) {
    if (merged[key] === undefined && raw[key] !== undefined) merged[key] = raw[key];
  }
  return merged;
}

function parseLinearAttention(raw: Record<string, unknown>): LinearAttentionConfig {
  const cfg = {
    convKernel: posInt(raw, "linear_conv_kernel_dim", 4),
    numKeyHeads: posInt(raw, "linear_num_key_heads", 16),
    numValueHeads: posInt(raw, "linear_num_value_heads", 32),
    keyHeadDim: posInt(raw, "linear_key_head_dim", 128),
    valueHeadDim: posInt(raw, "linear_value_head_dim", 128),
  };
  if (cfg.numValueHeads % cfg.numKeyHeads !== 0) {
    throw new ModelConfigError(
      `config.json: linear_num_value_heads ${cfg.numValueHeads} is not a multiple of linear_num_key_heads ${cfg.numKeyHeads}`,
    );
  }
  return cfg;
}

/** Normalise a config.json object. */
export function parseDecoderConfig(config: Record<string, unknown>): DecoderConfig {
  const architecture = resolveArchitecture(config);
  checkModelType(config, architecture);
  const isQwen35 = QWEN3_5_ARCHITECTURES.includes(architecture);
  const raw = isQwen35 ? textConfigOf(config) : config;
  const hiddenSize = posInt(raw, "hidden_size");
  const numHeads = posInt(raw, "num_attention_heads");
  const numKvHeads = posInt(raw, "num_key_value_heads", numHeads);
  const numLayers = posInt(raw, "num_hidden_layers");
  if (numHeads % numKvHeads !== 0) {
    throw new ModelConfigError(
      `config.json: num_attention_heads ${numHeads} is not a multiple of num_key_value_heads ${numKvHeads}`,
    );
  }
  if (raw.head_dim == null && hiddenSize % numHeads !== 0)
    throw new ModelConfigError(
      `config.json: "hidden_size" ${hiddenSize} is not a multiple of "num_attention_heads" ${numHeads} (and no "head_dim" is given)`,
    );
  const headDim = raw.head_dim == null ? hiddenSize / numHeads : posInt(raw, "head_dim");
  if (headDim % 2 !== 0) {
    throw new ModelConfigError(
      `config.json: head dim ${headDim} must be even for RoPE (hidden_size / num_attention_heads or "head_dim")`,
    );
  }
  const act = raw.hidden_act ?? "silu";
  if (act !== "silu")
    throw new ModelConfigError(`config.json: hidden_act "${String(act)}" is not supported; only "silu" (SwiGLU)`);
  if (raw.use_sliding_window === true) {
    throw new ModelConfigError("config.json: use_sliding_window = true is not supported (sliding-window attention)");
  }
  const { theta, scaling } = parseRopeScaling(raw);
  const modelType = typeof config.model_type === "string" ? config.model_type : architecture;
  const attentionBias = raw.attention_bias === true;
  const isQwen2 = architecture === "Qwen2ForCausalLM";
  // Qwen3.5 without layer_types: every `full_attention_interval`-th layer is softmax attention.
  const interval = isQwen35 ? posInt(raw, "full_attention_interval", 4) : 0;
  const layerTypes: LayerType[] = Array.isArray(raw.layer_types)
    ? (raw.layer_types as unknown[]).map((t, i) => {
        if (typeof t !== "string" || !hasBlockType(t)) {
          throw new ModelConfigError(
            `config.json: layer_types[${i}] = ${JSON.stringify(t)} is not supported; supported: ${registeredBlockTypes().join(", ")}`,
          );
        }
        return t;
      })
    : Array.from({ length: numLayers }, (_, i) =>
        isQwen35 && (i + 1) % interval !== 0 ? "linear_attention" : "full_attention",
      );
  if (layerTypes.length !== numLayers) {
    throw new ModelConfigError(`config.json: layer_types has ${layerTypes.length} entries for ${numLayers} layers`);
  }
  const linearAttention = layerTypes.includes("linear_attention") ? parseLinearAttention(raw) : null;
  const ropeParams = (raw.rope_parameters ?? null) as Record<string, unknown> | null;
  // Qwen3.5 rotates a quarter of each head by default (Qwen3_5TextConfig); newer configs repeat the
  // factor inside rope_parameters, which is what the rotary embedding reads.
  const partialRotaryFactor = num(
    ropeParams?.partial_rotary_factor !== undefined ? ropeParams : raw,
    "partial_rotary_factor",
    isQwen35 ? 0.25 : 1,
  );
  const rotaryDim = Math.round(headDim * partialRotaryFactor);
  if (!(partialRotaryFactor > 0 && partialRotaryFactor <= 1) || rotaryDim % 2 !== 0) {
    throw new ModelConfigError(
      `config.json: partial_rotary_factor ${partialRotaryFactor} must be in (0, 1] and give an even rotary dim (head dim ${headDim} → ${rotaryDim})`,
    );
  }
  const vocabSize = posInt(raw, "vocab_size");
  return {
    architecture,
    modelType,
    vocabSize,
    hiddenSize,
    intermediateSize: posInt(raw, "intermediate_size"),
    numLayers,
    numHeads,
    numKvHeads,
    headDim,
    rmsNormEps: positiveNum(raw, "rms_norm_eps", 1e-6),
    ropeTheta: theta,
    ropeScaling: scaling,
    partialRotaryFactor,
    // LlamaConfig / Qwen2Config / Qwen3Config default tie_word_embeddings to false.
    tieWordEmbeddings: raw.tie_word_embeddings === true,
    qkvBias: isQwen2 || attentionBias,
    oBias: !isQwen2 && attentionBias,
    mlpBias: raw.mlp_bias === true,
    qkNorm: architecture === "Qwen3ForCausalLM" || isQwen35,
    zeroCenteredNorm: isQwen35,
    attnOutputGate: isQwen35 && raw.attn_output_gate !== false,
    linearAttention,
    weightPrefix: architecture === "Qwen3_5ForConditionalGeneration" ? "model.language_model." : "model.",
    layerTypes,
    maxPositionEmbeddings: posInt(raw, "max_position_embeddings", 2048),
    bosTokenId: tokenIds(raw, "bos_token_id", vocabSize)[0] ?? null,
    eosTokenIds: tokenIds(raw, "eos_token_id", vocabSize),
    raw: config,
  };
}

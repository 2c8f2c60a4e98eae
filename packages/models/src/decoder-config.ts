// The normalised decoder config every block is built from (docs/NUMERICS.md §5.1): its types alone, so that
// the blocks can name them without importing config.ts, which reads config.json and asks the block-type
// registry which layer types exist.
/** Architectures (config.json `architectures[0]`) this package builds. */
export const SUPPORTED_ARCHITECTURES = [
  "LlamaForCausalLM",
  "Qwen2ForCausalLM",
  "Qwen3ForCausalLM",
  "Qwen3_5ForConditionalGeneration",
  "Qwen3_5ForCausalLM",
] as const;
export type Architecture = (typeof SUPPORTED_ARCHITECTURES)[number];

/** RoPE frequency scaling (`rope_scaling` / `rope_parameters`): default, linear or llama3. */
export type RopeScaling =
  | { type: "default" }
  | { type: "linear"; factor: number }
  | {
      type: "llama3";
      factor: number;
      lowFreqFactor: number;
      highFreqFactor: number;
      originalMaxPositionEmbeddings: number;
    };

/**
 * Layer kinds (config `layer_types`). Dense models use only "full_attention"; the Qwen3.5 hybrid
 * adds "linear_attention" (Gated DeltaNet) as a new registered block type (block-types.ts).
 */
export type LayerType = "full_attention" | "linear_attention" | (string & {});

/** Gated DeltaNet dimensions (Qwen3.5 `linear_*` config fields). */
export interface LinearAttentionConfig {
  /** Depthwise causal conv kernel (`linear_conv_kernel_dim`). */
  convKernel: number;
  numKeyHeads: number;
  numValueHeads: number;
  keyHeadDim: number;
  valueHeadDim: number;
}

export interface DecoderConfig {
  architecture: Architecture;
  modelType: string;
  vocabSize: number;
  hiddenSize: number;
  intermediateSize: number;
  numLayers: number;
  numHeads: number;
  numKvHeads: number;
  /** Per-head dim; independent of hiddenSize/numHeads for Qwen3 (docs/NUMERICS.md §5.1). */
  headDim: number;
  rmsNormEps: number;
  ropeTheta: number;
  ropeScaling: RopeScaling;
  /** Fraction of headDim that rotates (1 for the dense models; 0.25 for Qwen3.5). */
  partialRotaryFactor: number;
  tieWordEmbeddings: boolean;
  /** Biases on q/k/v projections (Qwen2 always; Llama/Qwen3 when attention_bias). */
  qkvBias: boolean;
  /** Bias on o_proj (Llama/Qwen3 attention_bias; never for Qwen2). */
  oBias: boolean;
  /** Biases on gate/up/down (Llama mlp_bias). */
  mlpBias: boolean;
  /** Qwen3: per-head RMSNorm of q and k before RoPE. */
  qkNorm: boolean;
  /** Qwen3.5-style (1 + w) norms. False for the dense models. */
  zeroCenteredNorm: boolean;
  /** Qwen3.5 gated attention: q_proj emits query and an output gate per head (2·H·d rows). */
  attnOutputGate: boolean;
  /** Gated DeltaNet dims; null when the model has no "linear_attention" layers. */
  linearAttention: LinearAttentionConfig | null;
  /**
   * Where the text model's tensors live: "model." (causal LMs) or "model.language_model."
   * (Qwen3_5ForConditionalGeneration). `lm_head` is always top level.
   */
  weightPrefix: string;
  layerTypes: LayerType[];
  maxPositionEmbeddings: number;
  bosTokenId: number | null;
  eosTokenIds: number[];
  /** The config.json object as read. */
  raw: Record<string, unknown>;
}

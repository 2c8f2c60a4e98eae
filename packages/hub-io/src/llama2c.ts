// llama2.c legacy checkpoints ("version 0" .bin) → Hugging Face Llama weights, and back.
// Format: llama2.c `run.c` (read_checkpoint, memory_map_weights) and `export.py` (legacy_export);
// layout summarised in test/fixtures/stories260K/SOURCES.md.

import { Llama2cError } from "./errors.js";

export interface Llama2cConfig {
  dim: number;
  hiddenDim: number;
  nLayers: number;
  nHeads: number;
  nKvHeads: number;
  vocabSize: number;
  seqLen: number;
  /** A positive vocab_size in the header: the classifier is the token embedding. */
  sharedClassifier: boolean;
}

export interface Llama2cCheckpoint {
  config: Llama2cConfig;
  /** Float32 arrays in llama2.c's own layout and naming (per-layer arrays stacked). */
  weights: {
    tokenEmbedding: Float32Array; // [vocab, dim]
    rmsAtt: Float32Array; // [layers, dim]
    wq: Float32Array; // [layers, dim, dim]
    wk: Float32Array; // [layers, kvDim, dim]
    wv: Float32Array; // [layers, kvDim, dim]
    wo: Float32Array; // [layers, dim, dim]
    rmsFfn: Float32Array; // [layers, dim]
    w1: Float32Array; // [layers, hidden, dim]
    w2: Float32Array; // [layers, dim, hidden]
    w3: Float32Array; // [layers, hidden, dim]
    rmsFinal: Float32Array; // [dim]
    /** Legacy RoPE tables (seq_len × head_size/2 cos, then sin); run.c ignores them. */
    freqCisReal: Float32Array;
    freqCisImag: Float32Array;
    /** Only when the classifier is not shared. */
    wcls?: Float32Array; // [vocab, dim]
  };
}

const HEADER_INTS = 7;

/** Parse a legacy llama2.c checkpoint; refuses the "ak42" v1/v2 exports and size mismatches. */
export function parseLlama2cCheckpoint(bytes: Uint8Array): Llama2cCheckpoint {
  if (bytes.byteLength < HEADER_INTS * 4) {
    throw new Llama2cError(`checkpoint has ${bytes.byteLength} bytes, fewer than its 28-byte header`);
  }
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (dv.getUint32(0, true) === 0x616b3432) {
    throw new Llama2cError(
      'checkpoint starts with magic "ak42" (llama2.c version 1/2 export); only legacy version 0 is supported',
    );
  }
  const h = Array.from({ length: HEADER_INTS }, (_, i) => dv.getInt32(i * 4, true));
  const [dim, hiddenDim, nLayers, nHeads, nKvHeads, rawVocab, seqLen] = h;
  const vocabSize = Math.abs(rawVocab);
  const config: Llama2cConfig = {
    dim,
    hiddenDim,
    nLayers,
    nHeads,
    nKvHeads,
    vocabSize,
    seqLen,
    sharedClassifier: rawVocab > 0,
  };
  for (const [k, v] of Object.entries({ dim, hiddenDim, nLayers, nHeads, nKvHeads, vocabSize, seqLen })) {
    if (!(v > 0)) throw new Llama2cError(`checkpoint header field ${k} = ${v} must be positive`);
  }
  if (dim % nHeads !== 0 || nHeads % nKvHeads !== 0 || (dim / nHeads) % 2 !== 0) {
    throw new Llama2cError(`checkpoint header dim ${dim}, n_heads ${nHeads}, n_kv_heads ${nKvHeads} are inconsistent`);
  }
  const headSize = dim / nHeads;
  const kvDim = (dim * nKvHeads) / nHeads;
  const sizes = {
    tokenEmbedding: vocabSize * dim,
    rmsAtt: nLayers * dim,
    wq: nLayers * dim * dim,
    wk: nLayers * kvDim * dim,
    wv: nLayers * kvDim * dim,
    wo: nLayers * dim * dim,
    rmsFfn: nLayers * dim,
    w1: nLayers * hiddenDim * dim,
    w2: nLayers * dim * hiddenDim,
    w3: nLayers * hiddenDim * dim,
    rmsFinal: dim,
    freqCisReal: (seqLen * headSize) / 2,
    freqCisImag: (seqLen * headSize) / 2,
    ...(config.sharedClassifier ? {} : { wcls: vocabSize * dim }),
  };
  const total = Object.values(sizes).reduce((a, b) => a + b, 0);
  const expected = HEADER_INTS * 4 + total * 4;
  if (bytes.byteLength !== expected) {
    throw new Llama2cError(
      `checkpoint has ${bytes.byteLength} bytes but its header (${h.join(", ")}) implies ${expected}`,
    );
  }
  // One aligned copy of all floats; each weight is a view into it.
  const floats = new Float32Array(total);
  new Uint8Array(floats.buffer).set(bytes.subarray(HEADER_INTS * 4));
  let off = 0;
  const weights: Record<string, Float32Array> = {};
  for (const [k, n] of Object.entries(sizes)) {
    weights[k] = floats.subarray(off, off + n);
    off += n;
  }
  return { config, weights: weights as unknown as Llama2cCheckpoint["weights"] };
}

/**
 * Reorder the rows of a q/k projection from llama2.c's interleaved-pair RoPE to HF's rotate-half RoPE.
 * HF row `h·hs + half·(hs/2) + j` takes llama2.c row `h·hs + 2j + half` (j < hs/2, half ∈ {0,1});
 * this is the `permute` in transformers' convert_llama_weights_to_hf.py and llama2.c export.py hf_export.
 */
export function permuteInterleavedToRotateHalf(
  w: Float32Array,
  nHeads: number,
  rows: number,
  cols: number,
): Float32Array {
  return permuteRows(w, nHeads, rows, cols, false);
}

/** The exact inverse of permuteInterleavedToRotateHalf (HF layout back to llama2.c layout). */
export function permuteRotateHalfToInterleaved(
  w: Float32Array,
  nHeads: number,
  rows: number,
  cols: number,
): Float32Array {
  return permuteRows(w, nHeads, rows, cols, true);
}

function permuteRows(w: Float32Array, nHeads: number, rows: number, cols: number, inverse: boolean): Float32Array {
  if (w.length !== rows * cols || rows % nHeads !== 0 || (rows / nHeads) % 2 !== 0) {
    throw new Llama2cError(`cannot permute a [${rows}, ${cols}] matrix (${w.length} values) over ${nHeads} heads`);
  }
  const hs = rows / nHeads;
  const out = new Float32Array(w.length);
  for (let h = 0; h < nHeads; h++) {
    for (let half = 0; half < 2; half++) {
      for (let j = 0; j < hs / 2; j++) {
        const hfRow = h * hs + half * (hs / 2) + j;
        const l2cRow = h * hs + 2 * j + half;
        const [dst, src] = inverse ? [l2cRow, hfRow] : [hfRow, l2cRow];
        out.set(w.subarray(src * cols, (src + 1) * cols), dst * cols);
      }
    }
  }
  return out;
}

/** HF Llama tensor name → float32 values (row-major, HF shapes). */
export interface HfLlamaWeights {
  tensors: Map<string, { shape: number[]; values: Float32Array }>;
}

/** llama2.c weights → HF LlamaForCausalLM names, shapes and RoPE row order. */
export function llama2cToHfWeights(ckpt: Llama2cCheckpoint): HfLlamaWeights {
  const { config: c, weights: w } = ckpt;
  const hs = c.dim / c.nHeads;
  const kvDim = c.nKvHeads * hs;
  const tensors = new Map<string, { shape: number[]; values: Float32Array }>();
  const layer = (arr: Float32Array, l: number, n: number) => arr.subarray(l * n, (l + 1) * n);
  tensors.set("model.embed_tokens.weight", { shape: [c.vocabSize, c.dim], values: w.tokenEmbedding });
  for (let l = 0; l < c.nLayers; l++) {
    const p = `model.layers.${l}.`;
    tensors.set(`${p}input_layernorm.weight`, { shape: [c.dim], values: layer(w.rmsAtt, l, c.dim) });
    tensors.set(`${p}self_attn.q_proj.weight`, {
      shape: [c.dim, c.dim],
      values: permuteInterleavedToRotateHalf(layer(w.wq, l, c.dim * c.dim), c.nHeads, c.dim, c.dim),
    });
    tensors.set(`${p}self_attn.k_proj.weight`, {
      shape: [kvDim, c.dim],
      values: permuteInterleavedToRotateHalf(layer(w.wk, l, kvDim * c.dim), c.nKvHeads, kvDim, c.dim),
    });
    tensors.set(`${p}self_attn.v_proj.weight`, { shape: [kvDim, c.dim], values: layer(w.wv, l, kvDim * c.dim) });
    tensors.set(`${p}self_attn.o_proj.weight`, { shape: [c.dim, c.dim], values: layer(w.wo, l, c.dim * c.dim) });
    tensors.set(`${p}post_attention_layernorm.weight`, { shape: [c.dim], values: layer(w.rmsFfn, l, c.dim) });
    tensors.set(`${p}mlp.gate_proj.weight`, {
      shape: [c.hiddenDim, c.dim],
      values: layer(w.w1, l, c.hiddenDim * c.dim),
    });
    tensors.set(`${p}mlp.down_proj.weight`, {
      shape: [c.dim, c.hiddenDim],
      values: layer(w.w2, l, c.dim * c.hiddenDim),
    });
    tensors.set(`${p}mlp.up_proj.weight`, { shape: [c.hiddenDim, c.dim], values: layer(w.w3, l, c.hiddenDim * c.dim) });
  }
  tensors.set("model.norm.weight", { shape: [c.dim], values: w.rmsFinal });
  // Tied classifier: transformers drops lm_head.weight from the file (docs/NUMERICS.md §1.2).
  if (!c.sharedClassifier && w.wcls) tensors.set("lm_head.weight", { shape: [c.vocabSize, c.dim], values: w.wcls });
  return { tensors };
}

/** HF Llama config.json fields for a llama2.c model (as llama2.c export.py hf_export writes them). */
export function llama2cHfConfig(c: Llama2cConfig): Record<string, unknown> {
  return {
    architectures: ["LlamaForCausalLM"],
    model_type: "llama",
    hidden_size: c.dim,
    intermediate_size: c.hiddenDim,
    num_hidden_layers: c.nLayers,
    num_attention_heads: c.nHeads,
    num_key_value_heads: c.nKvHeads,
    head_dim: c.dim / c.nHeads,
    vocab_size: c.vocabSize,
    max_position_embeddings: c.seqLen,
    rms_norm_eps: 1e-5,
    rope_theta: 10000,
    rope_scaling: null,
    hidden_act: "silu",
    attention_bias: false,
    attention_dropout: 0,
    mlp_bias: false,
    tie_word_embeddings: c.sharedClassifier,
    bos_token_id: 1,
    eos_token_id: 2,
    initializer_range: 0.02,
    pretraining_tp: 1,
    torch_dtype: "float32",
    use_cache: true,
  };
}

/** HF weights (as produced by llama2cToHfWeights) back to a legacy llama2.c checkpoint, byte-exact. */
export function hfWeightsToLlama2c(
  config: Llama2cConfig,
  hf: HfLlamaWeights,
  rope?: { real: Float32Array; imag: Float32Array },
): Uint8Array {
  const c = config;
  const hs = c.dim / c.nHeads;
  const kvDim = c.nKvHeads * hs;
  const get = (name: string) => {
    const t = hf.tensors.get(name);
    if (!t) throw new Llama2cError(`HF weights lack ${name}`);
    return t.values;
  };
  const perLayer = (suffix: string, map: (v: Float32Array) => Float32Array = (v) => v) =>
    Array.from({ length: c.nLayers }, (_, l) => map(get(`model.layers.${l}.${suffix}`)));
  const half = (c.seqLen * hs) / 2;
  const realTable = rope?.real ?? new Float32Array(half);
  const imagTable = rope?.imag ?? new Float32Array(half);
  if (!rope) {
    // Recompute llama2.c's legacy tables: freq_i = 10000^(-2i/hs), cos/sin(t·freq_i) (model.py precompute_freqs_cis).
    for (let t = 0; t < c.seqLen; t++) {
      for (let i = 0; i < hs / 2; i++) {
        const freq = 1 / 10000 ** ((2 * i) / hs);
        realTable[t * (hs / 2) + i] = Math.cos(t * freq);
        imagTable[t * (hs / 2) + i] = Math.sin(t * freq);
      }
    }
  }
  const parts: Float32Array[] = [
    get("model.embed_tokens.weight"),
    ...perLayer("input_layernorm.weight"),
    ...perLayer("self_attn.q_proj.weight", (v) => permuteRotateHalfToInterleaved(v, c.nHeads, c.dim, c.dim)),
    ...perLayer("self_attn.k_proj.weight", (v) => permuteRotateHalfToInterleaved(v, c.nKvHeads, kvDim, c.dim)),
    ...perLayer("self_attn.v_proj.weight"),
    ...perLayer("self_attn.o_proj.weight"),
    ...perLayer("post_attention_layernorm.weight"),
    ...perLayer("mlp.gate_proj.weight"),
    ...perLayer("mlp.down_proj.weight"),
    ...perLayer("mlp.up_proj.weight"),
    get("model.norm.weight"),
    realTable,
    imagTable,
    ...(c.sharedClassifier ? [] : [get("lm_head.weight")]),
  ];
  const n = parts.reduce((a, p) => a + p.length, 0);
  const out = new Uint8Array(HEADER_INTS * 4 + n * 4);
  const dv = new DataView(out.buffer);
  [
    c.dim,
    c.hiddenDim,
    c.nLayers,
    c.nHeads,
    c.nKvHeads,
    c.sharedClassifier ? c.vocabSize : -c.vocabSize,
    c.seqLen,
  ].forEach((v, i) => {
    dv.setInt32(i * 4, v, true);
  });
  const floats = new Float32Array(out.buffer, HEADER_INTS * 4, n);
  let off = 0;
  for (const p of parts) {
    floats.set(p, off);
    off += p.length;
  }
  return out;
}

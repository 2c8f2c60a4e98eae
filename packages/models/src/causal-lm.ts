// A decoder-only causal LM assembled from HF-named weights: embed → blocks → norm → lm_head.
import { Tensor, checkpoint, embedding, narrow, rmsNorm, tidy } from "@kiln/tensor";
import { blockType } from "./block-types.js";
import type { DecoderConfig } from "./config.js";
import { GenerationError, WeightLoadError } from "./errors.js";
import { type HeadLogProbsOptions, headTokenLogProbs } from "./chunked-head.js";
import { KVCache } from "./kv-cache.js";
import type { DecoderBlock, LayerContext, RaggedBatch } from "./layer-context.js";
import { Linear, pushLinear } from "./linear.js";
import { computeInvFreq } from "./rope.js";

export interface ForwardOptions {
  /**
   * 1 = real token, 0 = padding. Either [B, past + T] (transformers' convention, past = cache
   * length) or [B, T] for the new tokens only (the cache remembers earlier rows). Default all 1.
   */
  attentionMask?: Tensor | Uint8Array | Int32Array | readonly (readonly number[])[];
  /** Position ids of the new tokens, [B·T] or [T]. Default: cumsum(mask) − 1 as transformers' generate. */
  positions?: Int32Array | readonly number[];
  /** Decoding state; the new keys/values are appended to it. */
  cache?: KVCache;
  /** Recompute each block's activations in backward instead of storing them. */
  checkpointLayers?: boolean;
  /**
   * Compute logits only for the last N positions (transformers' `logits_to_keep`); the output is
   * then [B, N, V]. Saves the vocabulary projection of the prompt during prefill and scoring.
   */
  logitsToKeep?: number;
}

/** Token ids: an i32 [B, T] tensor, or plain rows of integer ids (all rows the same length). */
export type TokenIdsInput = Tensor | readonly (readonly number[])[];

export class CausalLM {
  readonly invFreq: Float32Array;

  constructor(
    readonly config: DecoderConfig,
    /** Replaced only through replaceParameter (a PEFT modules_to_save copy), which keeps a tied head in step. */
    public embedTokens: Tensor,
    readonly layers: DecoderBlock[],
    public norm: Tensor,
    readonly lmHead: Linear,
  ) {
    const rotaryDim = Math.round(config.headDim * config.partialRotaryFactor);
    this.invFreq = computeInvFreq(rotaryDim, config.ropeTheta, config.ropeScaling);
  }

  /** Build from a complete map of HF-named tensors (see parameterShapes); tied heads share the embedding. */
  static fromTensors(config: DecoderConfig, tensors: ReadonlyMap<string, Tensor>): CausalLM {
    const take = (name: string): Tensor => {
      const t = tensors.get(name);
      if (!t) throw new WeightLoadError(`missing tensor "${name}"`, [name]);
      // Errors elsewhere (the optimizer's dtype check) name a weight by its checkpoint key.
      t.name ??= name;
      return t;
    };
    const maybe = (name: string): Tensor | null => {
      const t = tensors.get(name);
      if (t) t.name ??= name;
      return t ?? null;
    };
    const p = config.weightPrefix;
    const layers = config.layerTypes.map((type, l) => blockType(type).build(config, `${p}layers.${l}.`, take, maybe));
    const embed = take(`${p}embed_tokens.weight`);
    const head = config.tieWordEmbeddings
      ? new Linear(embed)
      : new Linear(take("lm_head.weight"), maybe("lm_head.bias"));
    return new CausalLM(config, embed, layers, take(`${p}norm.weight`), head);
  }

  /** A fresh decoding cache for `batch` rows. */
  newCache(batch: number): KVCache {
    return new KVCache(this.layers.length, batch);
  }

  /** ids i32 [B, T] (or number[][]) → logits [B, T, V] (or [B, logitsToKeep, V]). */
  forward(ids: TokenIdsInput, options: ForwardOptions = {}): Tensor {
    // The head runs outside hiddenStates' tidy scope so that the logits stay memory the garbage collector
    // sees (one step's logits are V floats; a caller that never disposes them must not fill the heap).
    return this.lmHead.forward(this.hiddenStates(ids, options));
  }

  /**
   * log p(targets) under the model without full-vocabulary logits: the final hidden states go
   * through the head in row chunks (`headTokenLogProbs`), forward and backward. `targets` [B, T]
   * (or [B, logitsToKeep]) are the tokens each position predicts (next-token labels, already
   * shifted; `ignoreIndex` where nothing is scored). Returns [B, T] (0 where ignored).
   */
  tokenLogProbs(ids: TokenIdsInput, targets: Tensor, options: ForwardOptions & HeadLogProbsOptions = {}): Tensor {
    return headTokenLogProbs(this.lmHead, this.hiddenStates(ids, options), targets, options);
  }

  /**
   * The logits as hidden states plus the head, for losses that project a few rows at a time
   * (@kiln/losses `ChunkedLogits`: every loss there accepts this instead of a [B, T, V] tensor).
   */
  chunkedLogits(
    ids: TokenIdsInput,
    options: ForwardOptions & { chunkRows?: number } = {},
  ): { hidden: Tensor; vocab: number; project: (rows: Tensor) => Tensor; chunkRows?: number } {
    const hidden = this.hiddenStates(ids, options);
    return {
      hidden,
      vocab: this.lmHead.outFeatures,
      project: (rows) => this.lmHead.forward(rows),
      chunkRows: options.chunkRows,
    };
  }

  /** ids i32 [B, T] → the final-normed hidden states [B, T, D] (or [B, logitsToKeep, D]) the head reads. */
  hiddenStates(input: TokenIdsInput, options: ForwardOptions = {}): Tensor {
    const ids = input instanceof Tensor ? input : this.idsTensor(input);
    if (ids.dtype !== "i32" || ids.rank !== 2) {
      throw new GenerationError(`forward: ids must be i32 [B, T], got ${ids.dtype} [${ids.shape.join(", ")}]`);
    }
    const [B, T] = ids.shape;
    const cache = options.cache ?? null;
    if (cache && cache.batch !== B) throw new GenerationError(`forward: cache has batch ${cache.batch}, ids have ${B}`);
    const past = cache?.length ?? 0;
    const rows = resolveMask(options.attentionMask, B, T, cache);
    const padded = rows.some((r) => r.some((m) => m === 0));
    const total = past + T;
    let keyMask: Uint8Array | null = null;
    // A batch padded only at the end of its rows (how training batches are collated) needs no key mask: under
    // the causal mask a real token never sees a later position, so every real token's output, and every
    // gradient a loss on real tokens sends back, is what the masked path computes; only the padding positions'
    // own outputs differ, and they take no loss. The unmasked path runs the fused causal kernels instead of the
    // GEMM-tiled masked ones (docs/ARCHITECTURE.md, Kernels: padding and attention).
    if (padded && !(cache === null && rows.every(isRightPadded))) {
      keyMask = new Uint8Array(B * total);
      for (const [b, r] of rows.entries()) keyMask.set(r, b * total);
    }
    const positions = resolvePositions(options.positions, rows, B, T, past);
    const keep = options.logitsToKeep;
    if (keep !== undefined && !(Number.isInteger(keep) && keep >= 1 && keep <= T))
      throw new GenerationError(`forward: logitsToKeep = ${keep} must be an integer in [1, ${T}]`);
    const run = (): Tensor => {
      let x = embedding(this.embedTokens, ids);
      this.layers.forEach((layer, layerIndex) => {
        const ctx: LayerContext = { layerIndex, positions, keyMask, invFreq: this.invFreq, cache };
        x = options.checkpointLayers && !cache ? checkpoint((h) => layer.forward(h, ctx), x) : layer.forward(x, ctx);
      });
      if (keep !== undefined && keep < T) x = narrow(x, 1, T - keep);
      return rmsNorm(x, this.norm, { eps: this.config.rmsNormEps, zeroCentered: this.config.zeroCenteredNorm });
    };
    if (!cache) return run();
    cache.commit(rows, T);
    // Prefill and decode steps run in a tidy scope: on wasm/native an op output made outside one is a host
    // array the garbage collector can see, which every kernel then copies into the module's memory and
    // back; inside, intermediates are resident and go back to the pool as the step ends. What survives is
    // the result and the cache's new state (docs/ARCHITECTURE.md §Storage).
    const [hidden] = tidy(() => [run(), cache.layers] as const);
    return hidden;
  }

  /** Whether every block can run a scheduler step (softmax attention; recurrent blocks keep batch-shaped state). */
  get supportsRaggedBatches(): boolean {
    return this.layers.every((l) => l.layerType === "full_attention");
  }

  /**
   * The final-normed hidden states [B, T, D] of a batching-scheduler step: `ids` i32 [B, T] hold unrelated
   * sequences' new tokens as `batch` lays them out, `positions` [B·T] their positions in their own sequences.
   * Each segment's keys and values are appended to its SequenceKV (its length advances when the caller says).
   */
  raggedHiddenStates(ids: Tensor, positions: Int32Array, batch: RaggedBatch): Tensor {
    if (!this.supportsRaggedBatches)
      throw new GenerationError(
        `forward: a batched step needs softmax-attention layers only; this model has ${[...new Set(this.config.layerTypes)].join(", ")}`,
      );
    if (ids.dtype !== "i32" || ids.rank !== 2 || positions.length !== ids.size)
      throw new GenerationError(
        `forward: a batched step takes ids i32 [B, T] and B·T positions, got ${ids.dtype} [${ids.shape.join(", ")}] and ${positions.length}`,
      );
    let x = embedding(this.embedTokens, ids);
    for (const [layerIndex, layer] of this.layers.entries())
      x = layer.forward(x, { layerIndex, positions, keyMask: null, invFreq: this.invFreq, cache: null, ragged: batch });
    return rmsNorm(x, this.norm, { eps: this.config.rmsNormEps, zeroCentered: this.config.zeroCenteredNorm });
  }

  // Plain arrays are what users hold after tokenizing; checking them here gives a message
  // that names the bad row/id instead of an out-of-range embedding read.
  private idsTensor(rows: readonly (readonly number[])[]): Tensor {
    if (!Array.isArray(rows) || rows.length === 0 || !rows.every((r) => Array.isArray(r)))
      throw new GenerationError("forward: ids must be an i32 Tensor [B, T] or a non-empty number[][] of token ids");
    const T = rows[0].length;
    if (T === 0) throw new GenerationError("forward: ids rows must not be empty");
    const vocab = this.embedTokens.shape[0];
    const flat = new Int32Array(rows.length * T);
    for (const [b, row] of rows.entries()) {
      if (row.length !== T)
        throw new GenerationError(`forward: ids must be rectangular; row 0 has ${T} ids, row ${b} has ${row.length}`);
      for (const [t, id] of row.entries()) {
        if (!(Number.isInteger(id) && id >= 0 && id < vocab))
          throw new GenerationError(`forward: ids[${b}][${t}] = ${id} is not a token id in [0, ${vocab})`);
        flat[b * T + t] = id;
      }
    }
    return new Tensor(flat, [rows.length, T], "i32");
  }

  /**
   * Every linear layer by HF module path ("model.layers.0.self_attn.q_proj", …, "lm_head"; Qwen3.5
   * checkpoints: "model.language_model.layers.0.linear_attn.in_proj_qkv", …).
   */
  namedLinears(): [string, Linear][] {
    const out: [string, Linear][] = [];
    const p = this.config.weightPrefix;
    for (const [l, layer] of this.layers.entries()) out.push(...layer.namedLinears(`${p}layers.${l}.`));
    out.push(["lm_head", this.lmHead]);
    return out;
  }

  /**
   * Every parameter by HF state-dict key. A tied lm_head is the embedding tensor itself and is
   * listed once, as "model.embed_tokens.weight" (what save_pretrained writes).
   */
  namedParameters(): [string, Tensor][] {
    const p = this.config.weightPrefix;
    const out: [string, Tensor][] = [[`${p}embed_tokens.weight`, this.embedTokens]];
    for (const [l, layer] of this.layers.entries()) out.push(...layer.namedParameters(`${p}layers.${l}.`));
    out.push([`${p}norm.weight`, this.norm]);
    if (!this.config.tieWordEmbeddings) pushLinear(out, "lm_head", this.lmHead);
    return out;
  }

  /**
   * Swap the tensor behind one state-dict key for `value` (same shape) and return the one it
   * replaces. Used to apply a PEFT adapter's modules_to_save copies. Supported: the embedding (a
   * tied lm_head follows it, being the same tensor), the final norm, and the weight and bias of
   * every linear layer including an untied lm_head; anything else throws WeightLoadError naming it.
   */
  replaceParameter(key: string, value: Tensor): Tensor {
    const p = this.config.weightPrefix;
    const current = this.stateDict().get(key) ?? (key === "lm_head.weight" ? this.lmHead.weight : undefined);
    if (!current) throw new WeightLoadError(`replaceParameter: the model has no parameter "${key}"`, [key]);
    if (current.shape.length !== value.shape.length || current.shape.some((d, i) => d !== value.shape[i]))
      throw new WeightLoadError(
        `replaceParameter: "${key}" is [${current.shape}] in the model, the replacement is [${value.shape}]`,
        [key],
      );
    value.name ??= key;
    if (key === `${p}embed_tokens.weight` || (key === "lm_head.weight" && this.config.tieWordEmbeddings)) {
      this.embedTokens = value;
      if (this.config.tieWordEmbeddings) this.lmHead.weight = value;
      return current;
    }
    if (key === `${p}norm.weight`) {
      this.norm = value;
      return current;
    }
    const dot = key.lastIndexOf(".");
    const [module, leaf] = [key.slice(0, dot), key.slice(dot + 1)];
    const linear = this.namedLinears().find(([name]) => name === module)?.[1];
    if (linear && leaf === "weight") linear.weight = value;
    else if (linear && leaf === "bias" && linear.bias) linear.bias = value;
    else
      throw new WeightLoadError(
        `replaceParameter: "${key}" cannot be replaced (the embedding, the final norm and linear layers' weight and bias can)`,
        [key],
      );
    return current;
  }

  stateDict(): Map<string, Tensor> {
    return new Map(this.namedParameters());
  }

  /** Marks f32 parameters trainable (bf16 ones stay frozen) and returns them. */
  requireGrad(flag = true): Tensor[] {
    const out: Tensor[] = [];
    for (const [, t] of this.namedParameters()) {
      if (t.dtype === "f32") {
        t.requireGrad(flag);
        out.push(t);
      }
    }
    return out;
  }
}

/** Ones then zeros, at least one one: real tokens followed by padding. */
function isRightPadded(row: Uint8Array): boolean {
  let t = 0;
  while (t < row.length && row[t] === 1) t++;
  if (t === 0) return false;
  while (t < row.length && row[t] === 0) t++;
  return t === row.length;
}

function maskRowsFrom(mask: NonNullable<ForwardOptions["attentionMask"]>, B: number): Uint8Array[] {
  if (Array.isArray(mask))
    return (mask as readonly (readonly number[])[]).map((r) => Uint8Array.from(r, (v) => (v ? 1 : 0)));
  if ("dtype" in (mask as object) && !(mask as Tensor).storage.backend.hostVisible)
    throw new GenerationError(
      `forward: attentionMask is a tensor on backend "${(mask as Tensor).backend}", which the host cannot read without waiting; pass it as a Uint8Array or number[][]`,
    );
  const flat = "dtype" in (mask as object) ? (mask as Tensor).toFloat32Array() : (mask as Uint8Array | Int32Array);
  if (flat.length % B !== 0)
    throw new GenerationError(`forward: attentionMask has ${flat.length} entries, not a multiple of batch ${B}`);
  const w = flat.length / B;
  return Array.from({ length: B }, (_, b) => Uint8Array.from(flat.subarray(b * w, (b + 1) * w), (v) => (v ? 1 : 0)));
}

/** Full [B][past + T] key mask from the option and the cache. */
function resolveMask(mask: ForwardOptions["attentionMask"], B: number, T: number, cache: KVCache | null): Uint8Array[] {
  const past = cache?.length ?? 0;
  const given = mask === undefined ? null : maskRowsFrom(mask, B);
  return Array.from({ length: B }, (_, b) => {
    const row = given?.[b];
    if (row && row.length === past + T) return row;
    const out = new Uint8Array(past + T).fill(1);
    if (cache) out.set(cache.maskRow(b));
    if (row) {
      if (row.length !== T) {
        throw new GenerationError(
          `forward: attentionMask row ${b} has ${row.length} entries; expected past + T = ${past + T} or T = ${T}`,
        );
      }
      out.set(row, past);
    }
    return out;
  });
}

function resolvePositions(
  given: ForwardOptions["positions"],
  rows: Uint8Array[],
  B: number,
  T: number,
  past: number,
): Int32Array {
  const out = new Int32Array(B * T);
  if (given !== undefined) {
    if (given.length === B * T) out.set(given);
    else if (given.length === T) for (let b = 0; b < B; b++) out.set(given, b * T);
    else throw new GenerationError(`forward: ${given.length} positions for B=${B}, T=${T}; pass T or B·T`);
    return out;
  }
  // transformers generate: position_ids = cumsum(attention_mask) − 1. Padding positions get 0; they are
  // masked as keys and their own outputs are never used, so the value does not matter.
  for (let b = 0; b < B; b++) {
    let count = 0;
    const row = rows[b];
    for (let t = 0; t < past + T; t++) {
      count += row[t];
      if (t >= past) out[b * T + t - past] = Math.max(count - 1, 0);
    }
  }
  return out;
}

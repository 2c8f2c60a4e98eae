// What every block's forward receives besides its input: positions, key mask, RoPE
// frequencies and (when decoding) the cache.
import type { Tensor } from "@kiln/tensor";
import type { DecoderConfig } from "./decoder-config.js";
import type { KVCache } from "./kv-cache.js";
import type { Linear } from "./linear.js";
import type { SequenceKV } from "./sequence-kv.js";

/** One sequence's new tokens in a ragged step: rows [start, start + length) of batch row `row`. */
export interface RaggedSegment {
  row: number;
  start: number;
  length: number;
  kv: SequenceKV;
}

/**
 * A step of the batching scheduler: unrelated sequences share the rows of one [B, T, D] input and each
 * attends only to its own cache. Decode steps put one sequence per batch row (T = 1); prefill steps pack
 * sequences' prompt chunks along T (B = 1). Rows that belong to no segment are padding.
 */
export interface RaggedBatch {
  layout: "rows" | "packed";
  segments: RaggedSegment[];
}

export interface LayerContext {
  layerIndex: number;
  /** Position id of every new token, row-major [B·T]. */
  positions: Int32Array;
  /** Key mask over cached + new positions [B·(past+T)], or null when nothing is padded. */
  keyMask: Uint8Array | null;
  /** RoPE inverse frequencies (rotaryDim / 2 of them). */
  invFreq: Float32Array;
  cache: KVCache | null;
  /** Set by the batching scheduler instead of `cache`/`keyMask` (only attention blocks support it). */
  ragged?: RaggedBatch | null;
}

/** Anything that maps hidden states to hidden states inside the decoder stack. */
export interface DecoderBlock {
  readonly layerType: string;
  forward(x: Tensor, ctx: LayerContext): Tensor;
  /** Linear layers under `prefix` (HF module paths). */
  namedLinears(prefix: string): [string, Linear][];
  /** Every parameter under `prefix` (HF state-dict keys), linears' weights and biases included. */
  namedParameters(prefix: string): [string, Tensor][];
}

/** How one layer type (config `layer_types` entry) is shaped and built; registered in block-types.ts. */
export interface BlockType {
  readonly layerType: string;
  /** HF state-dict keys and shapes of one layer under `prefix` ("model.layers.3."). */
  shapes(config: DecoderConfig, prefix: string): [string, number[]][];
  /** Build the layer; `take` throws on a missing tensor, `maybe` returns null. */
  build(
    config: DecoderConfig,
    prefix: string,
    take: (name: string) => Tensor,
    maybe: (name: string) => Tensor | null,
  ): DecoderBlock;
}

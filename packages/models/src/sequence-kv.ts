// The KV cache of ONE sequence under the batching scheduler
// (docs/ARCHITECTURE.md §Continuous batching): per attention layer a key and a value buffer
// [1, Hkv, capacity, d] that only this sequence owns (kv-buffer.ts). New positions are written in place, so a
// decode step copies nothing that is already cached; when the buffer is full it is reallocated at
// twice the size (a copy of this sequence alone, amortised O(1) per token, never of the batch), and
// `free()` hands the memory back the moment the sequence ends. The scheduler reserves each
// sequence's worst case (prompt + max new tokens) against its byte budget before admitting it, so
// growth never fails for lack of budget.
import { type StorageArray, type Tensor, argOf, kernel } from "@kiln/tensor";
import type { DecoderConfig } from "./decoder-config.js";
import { GenerationError } from "./errors.js";
import { grownCapacity, growKVBuffer, newKVBuffer, writeKV } from "./kv-buffer.js";

/** Bytes one cached position takes over all attention layers (f32 keys and values). */
export function kvBytesPerPosition(config: DecoderConfig): number {
  const attentionLayers = config.layerTypes.filter((t) => t === "full_attention").length;
  return attentionLayers * 2 * config.numKvHeads * config.headDim * 4;
}

/**
 * Where a segment's new keys (or values) lie in a step's projection output: element offset of the first
 * one and strides between heads, between tokens and between channels.
 */
export interface KVSource {
  tensor: Tensor;
  offset: number;
  headStride: number;
  tokenStride: number;
}

/** Some consecutive positions of a sequence's cache: per layer keys and values [1, Hkv, count, d], or null. */
export interface KVRows {
  count: number;
  keys: (Tensor | null)[];
  values: (Tensor | null)[];
}

export class SequenceKV {
  private readonly keys: (Tensor | null)[];
  private readonly values: (Tensor | null)[];
  private capacityValue = 0;
  private lengthValue = 0;
  private freed = false;
  private readonly heads: number;
  private readonly headDim: number;

  /**
   * @param limit positions this sequence may ever hold (what the scheduler reserved for it); the buffers
   *   never grow past it.
   */
  constructor(
    config: DecoderConfig,
    readonly limit: number,
  ) {
    if (!(Number.isInteger(limit) && limit >= 1))
      throw new GenerationError(`SequenceKV: limit = ${limit} must be a positive integer`);
    this.heads = config.numKvHeads;
    this.headDim = config.headDim;
    this.keys = config.layerTypes.map(() => null);
    this.values = config.layerTypes.map(() => null);
  }

  /** Positions cached. */
  get length(): number {
    return this.lengthValue;
  }

  /** Positions the buffers hold room for. */
  get capacity(): number {
    return this.capacityValue;
  }

  /** Bytes allocated now, over all attention layers. */
  get allocatedBytes(): number {
    const layers = this.keys.filter((k) => k !== null).length;
    return layers * 2 * this.heads * this.capacityValue * this.headDim * 4;
  }

  /**
   * Makes room for `count` more positions before a forward writes them. Capacity depends only on this
   * sequence's own lengths, so its attention shapes (and numerics) never depend on its batch.
   */
  reserve(count: number): void {
    this.checkLive();
    const need = this.lengthValue + count;
    if (need > this.limit)
      throw new GenerationError(`SequenceKV: ${need} positions exceed this sequence's reservation of ${this.limit}`);
    if (need <= this.capacityValue) return;
    const next = grownCapacity(need, this.capacityValue, this.limit);
    for (const list of [this.keys, this.values]) {
      for (const [i, old] of list.entries()) {
        if (old === null) continue;
        list[i] = growKVBuffer(old, this.lengthValue, next);
      }
    }
    this.capacityValue = next;
  }

  /** Writes `count` new keys and values of attention layer `layer` at the current end (before `advance`). */
  write(layer: number, keySource: KVSource, valueSource: KVSource, count: number): void {
    this.checkLive();
    if (this.lengthValue + count > this.capacityValue)
      throw new GenerationError("SequenceKV: write past the reserved capacity (call reserve first)");
    const { heads: H, headDim: d } = this;
    const cap = this.capacityValue;
    for (const [list, src] of [
      [this.keys, keySource],
      [this.values, valueSource],
    ] as const) {
      let buffer = list[layer];
      if (buffer === null) {
        buffer = newKVBuffer(1, H, cap, d);
        list[layer] = buffer;
      }
      writeKV(buffer, this.lengthValue, src.tensor, src.offset, [src.headStride, src.tokenStride], count);
    }
  }

  /** Counts `count` written positions as cached (after every layer wrote them). */
  advance(count: number): void {
    this.lengthValue += count;
  }

  /** Keys and values of layer `layer`: the whole buffers [1, Hkv, capacity, d]; positions ≥ `visible` are not yet written. */
  layer(layer: number): { keys: Tensor; values: Tensor } {
    const keys = this.keys[layer];
    const values = this.values[layer];
    if (!keys || !values) throw new GenerationError(`SequenceKV: layer ${layer} holds no keys yet`);
    return { keys, values };
  }

  /**
   * Copies of the cached positions [start, start + count) of every attention layer, as buffers [1, Hkv, count, d]
   * (null for layers without a cache): what `append` takes back (the scheduler's prefix cache, prefix-cache.ts).
   */
  copyRows(start: number, count: number): KVRows {
    this.checkLive();
    if (!(Number.isInteger(start) && start >= 0 && count >= 1 && start + count <= this.lengthValue))
      throw new GenerationError(
        `SequenceKV: rows [${start}, ${start + count}) are not all cached (${this.lengthValue} are)`,
      );
    const { heads: H, headDim: d } = this;
    const cap = this.capacityValue;
    const copy = (buffer: Tensor | null) => {
      if (buffer === null) return null;
      const out = newKVBuffer(1, H, count, d);
      kernel("copy")(argOf(buffer) as StorageArray, argOf(out) as StorageArray, {
        shape: [H, count * d],
        srcOffset: start * d,
        srcStrides: [cap * d, 1],
        dstOffset: 0,
        dstStrides: [count * d, 1],
      });
      return out;
    };
    return { count, keys: this.keys.map(copy), values: this.values.map(copy) };
  }

  /** Appends the positions `rows` holds (from `copyRows`) at the current end, every layer, and counts them cached. */
  append(rows: KVRows): void {
    const n = rows.count;
    this.reserve(n);
    const d = this.headDim;
    for (const [layer, keys] of rows.keys.entries()) {
      const values = rows.values[layer];
      if (!keys || !values) continue;
      this.write(
        layer,
        { tensor: keys, offset: 0, headStride: n * d, tokenStride: d },
        { tensor: values, offset: 0, headStride: n * d, tokenStride: d },
        n,
      );
    }
    this.advance(n);
  }

  /** Returns the memory to the backend; the sequence cannot be used afterwards. Idempotent. */
  free(): void {
    if (this.freed) return;
    this.freed = true;
    for (const list of [this.keys, this.values])
      for (const [i, t] of list.entries()) {
        t?.dispose();
        list[i] = null;
      }
    this.capacityValue = 0;
  }

  private checkLive(): void {
    if (this.freed) throw new GenerationError("SequenceKV: used after free()");
  }
}

// Per-layer decoding state. Attention layers keep their keys and values (after RoPE) in growable buffers
// [B, Hkv, capacity, d] (kv-buffer.ts): a step writes its new positions in place and attention reads the
// written prefix where it lies (docs/ARCHITECTURE.md §KV cache). Other block types (Gated DeltaNet) keep
// their own state in the same slot list.
import { type RaggedKV, Tensor, attention, concat, narrow, raggedDecodeAttention } from "@kiln/tensor";
import { GenerationError } from "./errors.js";
import { grownCapacity, growKVBuffer, newKVBuffer, writeKV } from "./kv-buffer.js";

export interface AttentionLayerCache {
  kind: "attention";
  /** Keys and values [B, Hkv, capacity, d]; positions [0, length) are written, the rest is room to grow. */
  k: Tensor;
  v: Tensor;
  length: number;
}

/** Extension point: a recurrent block stores its state here under its own `kind`. */
export interface OtherLayerCache {
  kind: string;
  [key: string]: unknown;
}

export type LayerCache = AttentionLayerCache | OtherLayerCache;

export class KVCache {
  readonly layers: (LayerCache | null)[];
  /** Key mask of every cached position, row-major [batch, length] (1 keep, 0 padding). */
  private maskRows: Uint8Array[] = [];
  private lengthValue = 0;

  constructor(
    numLayers: number,
    readonly batch: number,
  ) {
    this.layers = Array.from({ length: numLayers }, () => null);
  }

  /** Number of cached positions. */
  get length(): number {
    return this.lengthValue;
  }

  /** The key mask of cached positions for row `b`. */
  maskRow(b: number): Uint8Array {
    return this.maskRows[b] ?? new Uint8Array(0);
  }

  /**
   * Appends the new keys and values k, v [B, Hkv, T, d] of attention layer `i` and returns the causal attention
   * of q [B, H, T, d] over every cached position (`keyMask` [B·(past + T)] as `attention` takes it).
   * A decode step (T = 1) reads the cache in place with `raggedDecodeAttention` when each row's visible keys
   * are one run of positions (no padding, left padding, or a finished row's padded tail); otherwise, and in
   * a chunked prefill, attention reads a contiguous copy of the written prefix. Under a gradient tape the keys
   * and values are concatenated instead (differentiable; no in-place writes).
   */
  attend(i: number, q: Tensor, k: Tensor, v: Tensor, keyMask: Uint8Array | null): Tensor {
    const prev = this.layers[i];
    if (prev !== null && prev.kind !== "attention")
      throw new GenerationError(`KVCache: layer ${i} holds "${prev.kind}" state, not attention`);
    const cur = prev as AttentionLayerCache | null;
    const [B, Hkv, T, d] = k.shape;
    const past = cur?.length ?? 0;
    const length = past + T;
    const taped = q.requiresGrad || k.requiresGrad || v.requiresGrad || !!cur?.k.requiresGrad || !!cur?.v.requiresGrad;
    if (taped) {
      const full = cur
        ? { k: concat([narrow(cur.k, 2, 0, past), k], 2), v: concat([narrow(cur.v, 2, 0, past), v], 2) }
        : { k, v };
      this.layers[i] = { kind: "attention", ...full, length };
      // A buffer from an untaped step is garbage now (the concatenation copied it); a taped one may still be read
      // by its tape's backward.
      if (cur && !cur.k.requiresGrad && !cur.v.requiresGrad) {
        cur.k.dispose();
        cur.v.dispose();
      }
      return attention(q, full.k, full.v, { causal: true, keyMask });
    }
    let entry = cur;
    if (entry === null) {
      const capacity = grownCapacity(length, 0);
      entry = {
        kind: "attention",
        k: newKVBuffer(B, Hkv, capacity, d),
        v: newKVBuffer(B, Hkv, capacity, d),
        length: 0,
      };
    } else if (length > entry.k.shape[2]) {
      const capacity = grownCapacity(length, entry.k.shape[2]);
      entry = { ...entry, k: growKVBuffer(entry.k, past, capacity), v: growKVBuffer(entry.v, past, capacity) };
    }
    writeKV(entry.k, past, k, 0, [T * d, d], T);
    writeKV(entry.v, past, v, 0, [T * d, d], T);
    entry.length = length;
    this.layers[i] = entry;
    // The first forward attends to its own keys, exactly as without a cache.
    if (past === 0) return attention(q, k, v, { causal: true, keyMask });
    if (T === 1) {
      const rows = this.raggedRows(entry, keyMask);
      if (rows) return raggedDecodeAttention(q, rows);
    }
    return attention(q, narrow(entry.k, 2, 0, length), narrow(entry.v, 2, 0, length), { causal: true, keyMask });
  }

  /** Each row's cache as raggedDecodeAttention reads it, or null when a row's unmasked keys are not one run. */
  private raggedRows(entry: AttentionLayerCache, keyMask: Uint8Array | null): (RaggedKV | null)[] | null {
    const { k, v, length } = entry;
    const B = k.shape[0];
    const rows: (RaggedKV | null)[] = [];
    for (let b = 0; b < B; b++) {
      let start = 0;
      let end = length;
      if (keyMask) {
        const base = b * length;
        while (start < length && keyMask[base + start] === 0) start++;
        end = start;
        while (end < length && keyMask[base + end] !== 0) end++;
        for (let j = end; j < length; j++) if (keyMask[base + j] !== 0) return null;
      }
      if (end === start) {
        rows.push(null);
        continue;
      }
      const keys = B === 1 ? k : narrow(k, 0, b, b + 1);
      const values = B === 1 ? v : narrow(v, 0, b, b + 1);
      rows.push({ keys, values, length: end, start });
    }
    return rows;
  }

  /** Releases every tensor the cache holds (their memory returns to the backend now, not at collection). */
  dispose(): void {
    for (const [i, entry] of this.layers.entries()) {
      if (entry === null) continue;
      for (const value of Object.values(entry)) if (value instanceof Tensor) value.dispose();
      this.layers[i] = null;
    }
  }

  /** Records the mask of `t` new positions (called once per forward, before the layers run). */
  commit(newMask: Uint8Array[], t: number): void {
    if (newMask.length !== this.batch)
      throw new GenerationError(`KVCache: ${newMask.length} mask rows for batch ${this.batch}`);
    this.maskRows = newMask.map((row) => row.slice());
    this.lengthValue += t;
  }
}

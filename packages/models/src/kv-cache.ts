// Per-layer decoding state. Attention layers keep their keys and values ([B, Hkv, T, D], after
// RoPE); other block types (Gated DeltaNet) keep their own state in the same slot list.
import { Tensor, concat } from "@kiln/tensor";
import { GenerationError } from "./errors.js";

export interface AttentionLayerCache {
  kind: "attention";
  k: Tensor;
  v: Tensor;
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

  /** Appends the new keys/values of attention layer `i` and returns the full ones. */
  appendAttention(i: number, k: Tensor, v: Tensor): { k: Tensor; v: Tensor } {
    const prev = this.layers[i];
    if (prev === null) {
      this.layers[i] = { kind: "attention", k, v };
      return { k, v };
    }
    if (prev.kind !== "attention")
      throw new GenerationError(`KVCache: layer ${i} holds "${prev.kind}" state, not attention`);
    const cur = prev as AttentionLayerCache;
    const full = { k: concat([cur.k, k], 2), v: concat([cur.v, v], 2) };
    this.layers[i] = { kind: "attention", ...full };
    // The previous keys/values are garbage now unless the tape of a differentiable cache still reads them;
    // released here, their memory is reused by the next step instead of waiting for a finalizer.
    if (!full.k.requiresGrad && !full.v.requiresGrad) {
      cur.k.dispose();
      cur.v.dispose();
    }
    return full;
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

// Softmax self-attention of Llama / Qwen2 / Qwen3 (transformers LlamaAttention, Qwen2Attention,
// Qwen3Attention; docs/NUMERICS.md §5.1): projections, optional per-head q/k RMSNorm (Qwen3) before
// rotate-half RoPE, GQA scaled dot-product attention, output projection. Qwen3.5 (Qwen3_5Attention)
// adds an output gate carried in a doubled q_proj: o_proj(attn ⊙ σ(gate)), and rotates only the
// first partial_rotary_factor of each head.
import {
  type RaggedKV,
  type Tensor,
  attention,
  mul,
  narrow,
  permute,
  raggedDecodeAttention,
  raggedPrefillAttention,
  reshape,
  rmsNorm,
  ropeHeads,
  sigmoid,
} from "@kiln/tensor";
import type { DecoderConfig } from "./decoder-config.js";
import { GenerationError } from "./errors.js";
import type { Linear } from "./linear.js";
import type { LayerContext, RaggedBatch } from "./layer-context.js";

export interface SelfAttentionWeights {
  qProj: Linear;
  kProj: Linear;
  vProj: Linear;
  oProj: Linear;
  qNorm: Tensor | null;
  kNorm: Tensor | null;
}

export class SelfAttention {
  readonly qProj: Linear;
  readonly kProj: Linear;
  readonly vProj: Linear;
  readonly oProj: Linear;
  readonly qNorm: Tensor | null;
  readonly kNorm: Tensor | null;

  constructor(
    readonly config: DecoderConfig,
    w: SelfAttentionWeights,
  ) {
    this.qProj = w.qProj;
    this.kProj = w.kProj;
    this.vProj = w.vProj;
    this.oProj = w.oProj;
    this.qNorm = w.qNorm;
    this.kNorm = w.kNorm;
  }

  /** x [B, T, D] → [B, T, D]. */
  forward(x: Tensor, ctx: LayerContext): Tensor {
    const { numHeads: H, numKvHeads: Hkv, headDim: d, rmsNormEps: eps } = this.config;
    const [B, T] = x.shape;
    // [B, T, n·d] → [B, T, n, d] (then the optional per-head norm); with T = 1 this is already the [B, n, 1, d]
    // memory order, so v needs no copy.
    const split = (t: Tensor, n: number, norm: Tensor | null): Tensor => {
      const h = reshape(t, [B, T, n, d]);
      return norm ? rmsNorm(h, norm, { eps, zeroCentered: this.config.zeroCenteredNorm }) : h;
    };
    const rotaryDim = ctx.invFreq.length * 2;
    // q and k: RoPE and the permute to [B, n, T, d] in one pass (ropeHeads).
    let qProjected = this.qProj.forward(x);
    let gate: Tensor | null = null;
    if (this.config.attnOutputGate) {
      // Per head [query (d) | gate (d)], as transformers' view(..., -1, 2d) + chunk.
      const both = reshape(qProjected, [B, T, H, 2 * d]);
      gate = reshape(narrow(both, 3, d, 2 * d), [B, T, H * d]);
      qProjected = narrow(both, 3, 0, d);
    }
    let q = ropeHeads(split(qProjected, H, this.qNorm), ctx.positions, ctx.invFreq, { rotaryDim });
    const k = ropeHeads(split(this.kProj.forward(x), Hkv, this.kNorm), ctx.positions, ctx.invFreq, { rotaryDim });
    const vs = split(this.vProj.forward(x), Hkv, null);
    if (ctx.ragged) {
      const merged = this.raggedAttention(q, k, vs, ctx.ragged, ctx.layerIndex);
      return this.oProj.forward(gate ? mul(merged, sigmoid(gate)) : merged);
    }
    const v = T === 1 ? reshape(vs, [B, Hkv, 1, d]) : permute(vs, [0, 2, 1, 3]);
    q = ctx.cache
      ? ctx.cache.attend(ctx.layerIndex, q, k, v, ctx.keyMask)
      : attention(q, k, v, { causal: true, keyMask: ctx.keyMask });
    const merged = reshape(T === 1 ? q : permute(q, [0, 2, 1, 3]), [B, T, H * d]);
    return this.oProj.forward(gate ? mul(merged, sigmoid(gate)) : merged);
  }

  /**
   * Attention of a scheduler step (docs/ARCHITECTURE.md §Continuous batching): each segment's new keys
   * and values go into its own SequenceKV, and each segment attends to its own cache alone, so a row's
   * result never depends on which other sequences share the step. q [B, H, T, d] and k [B, Hkv, T, d]
   * after RoPE, vs [B, T, Hkv, d]; returns [B, T, H·d] (zeros on padding rows).
   */
  private raggedAttention(q: Tensor, k: Tensor, vs: Tensor, batch: RaggedBatch, layer: number): Tensor {
    const [B, H, T, d] = q.shape;
    const Hkv = k.shape[1];
    for (const s of batch.segments) {
      s.kv.write(
        layer,
        { tensor: k, offset: (s.row * Hkv * T + s.start) * d, headStride: T * d, tokenStride: d },
        { tensor: vs, offset: (s.row * T + s.start) * Hkv * d, headStride: d, tokenStride: Hkv * d },
        s.length,
      );
    }
    if (batch.layout === "rows") {
      if (T !== 1) throw new GenerationError(`ragged attention: a "rows" step has T = 1, got ${T}`);
      // Decode: one kernel call for the whole step reads every sequence's cache in place (no per-sequence
      // gather or call); each row sees its own written prefix, unmasked, so its result is its own alone.
      const caches: (RaggedKV | null)[] = Array.from({ length: B }, () => null);
      for (const s of batch.segments) caches[s.row] = { ...s.kv.layer(layer), length: s.kv.length + 1 };
      return reshape(raggedDecodeAttention(q, caches), [B, 1, H * d]);
    }
    if (B !== 1) throw new GenerationError(`ragged attention: a "packed" step has B = 1, got ${B}`);
    // Prefill chunks: one call for every sequence in the forward; each chunk's queries are the last `length`
    // of its cached positions, causal among themselves.
    const segments = batch.segments.map((s) => ({
      start: s.start,
      length: s.length,
      cache: { ...s.kv.layer(layer), length: s.kv.length + s.length },
    }));
    return reshape(permute(raggedPrefillAttention(q, segments), [0, 2, 1, 3]), [1, T, H * d]);
  }

  namedLinears(prefix: string): [string, Linear][] {
    return [
      [`${prefix}q_proj`, this.qProj],
      [`${prefix}k_proj`, this.kProj],
      [`${prefix}v_proj`, this.vProj],
      [`${prefix}o_proj`, this.oProj],
    ];
  }

  namedNorms(prefix: string): [string, Tensor][] {
    const out: [string, Tensor][] = [];
    if (this.qNorm) out.push([`${prefix}q_norm.weight`, this.qNorm]);
    if (this.kNorm) out.push([`${prefix}k_norm.weight`, this.kNorm]);
    return out;
  }
}

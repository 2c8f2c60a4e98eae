// Softmax self-attention of Llama / Qwen2 / Qwen3 (transformers LlamaAttention, Qwen2Attention,
// Qwen3Attention; docs/NUMERICS.md §5.1): projections, optional per-head q/k RMSNorm (Qwen3) before
// rotate-half RoPE, GQA scaled dot-product attention, output projection. Qwen3.5 (Qwen3_5Attention)
// adds an output gate carried in a doubled q_proj: o_proj(attn ⊙ σ(gate)), and rotates only the
// first partial_rotary_factor of each head.
import { type Tensor, attention, mul, narrow, permute, reshape, rmsNorm, ropeHeads, sigmoid } from "@kiln/tensor";
import type { DecoderConfig } from "./config.js";
import type { Linear } from "./linear.js";
import type { LayerContext } from "./layer-context.js";

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
    let k = ropeHeads(split(this.kProj.forward(x), Hkv, this.kNorm), ctx.positions, ctx.invFreq, { rotaryDim });
    const vs = split(this.vProj.forward(x), Hkv, null);
    let v = T === 1 ? reshape(vs, [B, Hkv, 1, d]) : permute(vs, [0, 2, 1, 3]);
    if (ctx.cache) ({ k, v } = ctx.cache.appendAttention(ctx.layerIndex, k, v));
    q = attention(q, k, v, { causal: true, keyMask: ctx.keyMask });
    const merged = reshape(T === 1 ? q : permute(q, [0, 2, 1, 3]), [B, T, H * d]);
    return this.oProj.forward(gate ? mul(merged, sigmoid(gate)) : merged);
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

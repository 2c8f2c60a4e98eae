// The pre-norm transformer block of Llama / Qwen2 / Qwen3 (docs/NUMERICS.md §5.1):
// h = x + Attn(RMSNorm(x)); out = h + MLP(RMSNorm(h)).
// A Qwen3.5 Gated DeltaNet layer is a sibling DecoderBlock with the same two-norm shape.
import { type Tensor, add, rmsNorm } from "@kiln/tensor";
import { SelfAttention } from "./attention.js";
import type { DecoderConfig } from "./decoder-config.js";
import type { BlockType, DecoderBlock, LayerContext } from "./layer-context.js";
import { Linear, pushLinear } from "./linear.js";
import { SwiGluMlp } from "./mlp.js";

export class AttentionBlock implements DecoderBlock {
  readonly layerType = "full_attention";

  constructor(
    readonly config: DecoderConfig,
    readonly inputLayernorm: Tensor,
    readonly selfAttn: SelfAttention,
    readonly postAttentionLayernorm: Tensor,
    readonly mlp: SwiGluMlp,
  ) {}

  forward(x: Tensor, ctx: LayerContext): Tensor {
    const norm = { eps: this.config.rmsNormEps, zeroCentered: this.config.zeroCenteredNorm };
    const h = add(x, this.selfAttn.forward(rmsNorm(x, this.inputLayernorm, norm), ctx));
    return add(h, this.mlp.forward(rmsNorm(h, this.postAttentionLayernorm, norm)));
  }

  namedLinears(prefix: string): [string, Linear][] {
    return [...this.selfAttn.namedLinears(`${prefix}self_attn.`), ...this.mlp.namedLinears(`${prefix}mlp.`)];
  }

  namedParameters(prefix: string): [string, Tensor][] {
    const out: [string, Tensor][] = [[`${prefix}input_layernorm.weight`, this.inputLayernorm]];
    for (const [name, lin] of this.selfAttn.namedLinears(`${prefix}self_attn.`)) pushLinear(out, name, lin);
    out.push(...this.selfAttn.namedNorms(`${prefix}self_attn.`));
    out.push([`${prefix}post_attention_layernorm.weight`, this.postAttentionLayernorm]);
    for (const [name, lin] of this.mlp.namedLinears(`${prefix}mlp.`)) pushLinear(out, name, lin);
    return out;
  }
}

/** The "full_attention" layer type of the block registry (block-types.ts). */
export const FULL_ATTENTION_BLOCK: BlockType = {
  layerType: "full_attention",
  shapes(c, p) {
    const D = c.hiddenSize;
    const qDim = c.numHeads * c.headDim;
    const kvDim = c.numKvHeads * c.headDim;
    const out: [string, number[]][] = [[`${p}input_layernorm.weight`, [D]]];
    const lin = (name: string, o: number, i: number, bias: boolean) => {
      out.push([`${p}${name}.weight`, [o, i]]);
      if (bias) out.push([`${p}${name}.bias`, [o]]);
    };
    // Qwen3.5 gated attention: each head's query is followed by its output gate in q_proj.
    lin("self_attn.q_proj", c.attnOutputGate ? 2 * qDim : qDim, D, c.qkvBias);
    lin("self_attn.k_proj", kvDim, D, c.qkvBias);
    lin("self_attn.v_proj", kvDim, D, c.qkvBias);
    lin("self_attn.o_proj", D, qDim, c.oBias);
    if (c.qkNorm) out.push([`${p}self_attn.q_norm.weight`, [c.headDim]], [`${p}self_attn.k_norm.weight`, [c.headDim]]);
    out.push([`${p}post_attention_layernorm.weight`, [D]]);
    lin("mlp.gate_proj", c.intermediateSize, D, c.mlpBias);
    lin("mlp.up_proj", c.intermediateSize, D, c.mlpBias);
    lin("mlp.down_proj", D, c.intermediateSize, c.mlpBias);
    return out;
  },
  build(c, p, take, maybe) {
    const lin = (name: string) => new Linear(take(`${p}${name}.weight`), maybe(`${p}${name}.bias`));
    const attn = new SelfAttention(c, {
      qProj: lin("self_attn.q_proj"),
      kProj: lin("self_attn.k_proj"),
      vProj: lin("self_attn.v_proj"),
      oProj: lin("self_attn.o_proj"),
      qNorm: c.qkNorm ? take(`${p}self_attn.q_norm.weight`) : null,
      kNorm: c.qkNorm ? take(`${p}self_attn.k_norm.weight`) : null,
    });
    const mlp = new SwiGluMlp(lin("mlp.gate_proj"), lin("mlp.up_proj"), lin("mlp.down_proj"));
    return new AttentionBlock(
      c,
      take(`${p}input_layernorm.weight`),
      attn,
      take(`${p}post_attention_layernorm.weight`),
      mlp,
    );
  },
};

// The pre-norm transformer block of Llama / Qwen2 / Qwen3 (numerics.md §5):
// h = x + Attn(RMSNorm(x)); out = h + MLP(RMSNorm(h)).
// A Qwen3.5 Gated DeltaNet layer is a sibling DecoderBlock with the same two-norm shape.
import { type Tensor, add, rmsNorm } from "@kiln/tensor";
import type { SelfAttention } from "./attention.js";
import type { DecoderConfig } from "./config.js";
import type { DecoderBlock, LayerContext } from "./layer-context.js";
import type { Linear } from "./linear.js";
import type { SwiGluMlp } from "./mlp.js";

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

export function pushLinear(out: [string, Tensor][], name: string, lin: Linear): void {
  out.push([`${name}.weight`, lin.weight]);
  if (lin.bias) out.push([`${name}.bias`, lin.bias]);
}

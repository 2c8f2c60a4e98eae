// The Qwen3.5 "linear_attention" layer (transformers Qwen3_5DecoderLayer with a Gated DeltaNet
// token mixer): h = x + GatedDeltaNet(RMSNorm(x)); out = h + MLP(RMSNorm(h)), norms zero-centred.
import { type Tensor, add, rmsNorm } from "@kiln/tensor";
import type { DecoderConfig } from "./decoder-config.js";
import { ModelConfigError } from "./errors.js";
import { GatedDeltaNet } from "./gated-deltanet.js";
import type { BlockType, DecoderBlock, LayerContext } from "./layer-context.js";
import { Linear, pushLinear } from "./linear.js";
import { SwiGluMlp } from "./mlp.js";

export class LinearAttentionBlock implements DecoderBlock {
  readonly layerType = "linear_attention";

  constructor(
    readonly config: DecoderConfig,
    readonly inputLayernorm: Tensor,
    readonly linearAttn: GatedDeltaNet,
    readonly postAttentionLayernorm: Tensor,
    readonly mlp: SwiGluMlp,
  ) {}

  forward(x: Tensor, ctx: LayerContext): Tensor {
    const norm = { eps: this.config.rmsNormEps, zeroCentered: this.config.zeroCenteredNorm };
    const h = add(x, this.linearAttn.forward(rmsNorm(x, this.inputLayernorm, norm), ctx));
    return add(h, this.mlp.forward(rmsNorm(h, this.postAttentionLayernorm, norm)));
  }

  namedLinears(prefix: string): [string, Linear][] {
    return [...this.linearAttn.namedLinears(`${prefix}linear_attn.`), ...this.mlp.namedLinears(`${prefix}mlp.`)];
  }

  namedParameters(prefix: string): [string, Tensor][] {
    const out: [string, Tensor][] = [[`${prefix}input_layernorm.weight`, this.inputLayernorm]];
    out.push(...this.linearAttn.namedTensors(`${prefix}linear_attn.`));
    for (const [name, lin] of this.linearAttn.namedLinears(`${prefix}linear_attn.`)) pushLinear(out, name, lin);
    out.push([`${prefix}post_attention_layernorm.weight`, this.postAttentionLayernorm]);
    for (const [name, lin] of this.mlp.namedLinears(`${prefix}mlp.`)) pushLinear(out, name, lin);
    return out;
  }
}

function linearDims(c: DecoderConfig) {
  if (!c.linearAttention)
    throw new ModelConfigError("config.json: a linear_attention layer needs the linear_* fields (Qwen3.5 text config)");
  return c.linearAttention;
}

/** The "linear_attention" layer type of the block registry (block-types.ts). */
export const LINEAR_ATTENTION_BLOCK: BlockType = {
  layerType: "linear_attention",
  shapes(c, p) {
    const D = c.hiddenSize;
    const { numKeyHeads, numValueHeads, keyHeadDim, valueHeadDim, convKernel } = linearDims(c);
    const keyDim = numKeyHeads * keyHeadDim;
    const valueDim = numValueHeads * valueHeadDim;
    const convDim = 2 * keyDim + valueDim;
    const a = `${p}linear_attn.`;
    return [
      [`${p}input_layernorm.weight`, [D]],
      [`${a}conv1d.weight`, [convDim, 1, convKernel]],
      [`${a}dt_bias`, [numValueHeads]],
      [`${a}A_log`, [numValueHeads]],
      [`${a}norm.weight`, [valueHeadDim]],
      [`${a}in_proj_qkv.weight`, [convDim, D]],
      [`${a}in_proj_z.weight`, [valueDim, D]],
      [`${a}in_proj_b.weight`, [numValueHeads, D]],
      [`${a}in_proj_a.weight`, [numValueHeads, D]],
      [`${a}out_proj.weight`, [D, valueDim]],
      [`${p}post_attention_layernorm.weight`, [D]],
      [`${p}mlp.gate_proj.weight`, [c.intermediateSize, D]],
      [`${p}mlp.up_proj.weight`, [c.intermediateSize, D]],
      [`${p}mlp.down_proj.weight`, [D, c.intermediateSize]],
    ];
  },
  build(c, p, take) {
    const lin = (name: string) => new Linear(take(`${p}${name}.weight`));
    const a = `${p}linear_attn.`;
    const mixer = new GatedDeltaNet(c, {
      inProjQkv: lin("linear_attn.in_proj_qkv"),
      inProjZ: lin("linear_attn.in_proj_z"),
      inProjB: lin("linear_attn.in_proj_b"),
      inProjA: lin("linear_attn.in_proj_a"),
      outProj: lin("linear_attn.out_proj"),
      conv1d: take(`${a}conv1d.weight`),
      dtBias: take(`${a}dt_bias`),
      aLog: take(`${a}A_log`),
      norm: take(`${a}norm.weight`),
    });
    const mlp = new SwiGluMlp(lin("mlp.gate_proj"), lin("mlp.up_proj"), lin("mlp.down_proj"));
    return new LinearAttentionBlock(
      c,
      take(`${p}input_layernorm.weight`),
      mixer,
      take(`${p}post_attention_layernorm.weight`),
      mlp,
    );
  },
};

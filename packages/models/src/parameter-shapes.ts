// The HF state-dict keys and shapes a config implies (numerics.md §5 "Weight names/shapes").
import type { DecoderConfig } from "./config.js";

/** name → shape, in module order; `lm_head.weight` only when embeddings are untied. */
export function parameterShapes(c: DecoderConfig): Map<string, number[]> {
  const D = c.hiddenSize;
  const qDim = c.numHeads * c.headDim;
  const kvDim = c.numKvHeads * c.headDim;
  const shapes = new Map<string, number[]>();
  shapes.set("model.embed_tokens.weight", [c.vocabSize, D]);
  for (let l = 0; l < c.numLayers; l++) {
    const p = `model.layers.${l}.`;
    shapes.set(`${p}input_layernorm.weight`, [D]);
    const lin = (name: string, out: number, inp: number, bias: boolean) => {
      shapes.set(`${p}${name}.weight`, [out, inp]);
      if (bias) shapes.set(`${p}${name}.bias`, [out]);
    };
    lin("self_attn.q_proj", qDim, D, c.qkvBias);
    lin("self_attn.k_proj", kvDim, D, c.qkvBias);
    lin("self_attn.v_proj", kvDim, D, c.qkvBias);
    lin("self_attn.o_proj", D, qDim, c.oBias);
    if (c.qkNorm) {
      shapes.set(`${p}self_attn.q_norm.weight`, [c.headDim]);
      shapes.set(`${p}self_attn.k_norm.weight`, [c.headDim]);
    }
    shapes.set(`${p}post_attention_layernorm.weight`, [D]);
    lin("mlp.gate_proj", c.intermediateSize, D, c.mlpBias);
    lin("mlp.up_proj", c.intermediateSize, D, c.mlpBias);
    lin("mlp.down_proj", D, c.intermediateSize, c.mlpBias);
  }
  shapes.set("model.norm.weight", [D]);
  if (!c.tieWordEmbeddings) shapes.set("lm_head.weight", [c.vocabSize, D]);
  return shapes;
}

/** Matrices that may stay bf16 when frozen (linear weights and the embedding); norms and biases stay f32. */
export function isMatrixParameter(name: string, shape: readonly number[]): boolean {
  return shape.length === 2 && name.endsWith(".weight");
}

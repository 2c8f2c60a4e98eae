// The HF state-dict keys and shapes a config implies (docs/NUMERICS.md §5.3).
import { blockType } from "./block-types.js";
import type { DecoderConfig } from "./config.js";

/** name → shape, in module order; `lm_head.weight` only when embeddings are untied. */
export function parameterShapes(c: DecoderConfig): Map<string, number[]> {
  const shapes = new Map<string, number[]>();
  const p = c.weightPrefix;
  shapes.set(`${p}embed_tokens.weight`, [c.vocabSize, c.hiddenSize]);
  c.layerTypes.forEach((type, l) => {
    for (const [name, shape] of blockType(type).shapes(c, `${p}layers.${l}.`)) shapes.set(name, shape);
  });
  shapes.set(`${p}norm.weight`, [c.hiddenSize]);
  if (!c.tieWordEmbeddings) shapes.set("lm_head.weight", [c.vocabSize, c.hiddenSize]);
  return shapes;
}

/** Matrices that may stay bf16 when frozen (linear weights and the embedding); norms and biases stay f32. */
export function isMatrixParameter(name: string, shape: readonly number[]): boolean {
  return shape.length === 2 && name.endsWith(".weight");
}

// Block types by config `layer_types` entry. Dense models use "full_attention" only; the
// Qwen3.5 hybrid adds "linear_attention" (Gated DeltaNet, docs/NUMERICS.md §5.2) by registering a
// BlockType here: its parameter shapes, and how to build it from HF-named tensors. The
// decoder stack, loader, namedLinears/namedParameters and the KV cache (LayerCache kinds)
// need no change for a new block type.
import { FULL_ATTENTION_BLOCK } from "./attention-block.js";
import { ModelConfigError } from "./errors.js";
import type { BlockType } from "./layer-context.js";
import { LINEAR_ATTENTION_BLOCK } from "./linear-attention-block.js";

export type { BlockType } from "./layer-context.js";

const registry = new Map<string, BlockType>([
  [FULL_ATTENTION_BLOCK.layerType, FULL_ATTENTION_BLOCK],
  [LINEAR_ATTENTION_BLOCK.layerType, LINEAR_ATTENTION_BLOCK],
]);

export function registerBlockType(type: BlockType): void {
  registry.set(type.layerType, type);
}

export function blockType(layerType: string): BlockType {
  const t = registry.get(layerType);
  if (!t)
    throw new ModelConfigError(
      `layer type "${layerType}" is not supported; supported: ${[...registry.keys()].join(", ")}`,
    );
  return t;
}

export function hasBlockType(layerType: string): boolean {
  return registry.has(layerType);
}

export function registeredBlockTypes(): string[] {
  return [...registry.keys()];
}

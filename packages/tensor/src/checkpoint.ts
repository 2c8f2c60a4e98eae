// Activation recomputation (gradient checkpointing): run a block without a tape, keep
// only its inputs, and rebuild the block's graph during backward. Trades one extra
// forward of the block for not storing its activations.
import { backwardMany, isGradEnabled, noGrad, withGrad } from "./autograd.js";
import { Tensor } from "./tensor.js";
import { record } from "./autograd.js";

/**
 * y = fn(...inputs) with recomputation. Parameters the block closes over still receive
 * gradients (accumulated into their `.grad` during the recomputed backward).
 */
export function checkpoint(fn: (...inputs: Tensor[]) => Tensor, ...inputs: Tensor[]): Tensor {
  if (!isGradEnabled()) return fn(...inputs);
  const out = noGrad(() => fn(...inputs));
  const result = new Tensor(out.data, out.shape, out.dtype);
  // The block may use trainable parameters even when no input requires grad, so always record.
  result.requiresGrad = true;
  const marker = inputs.length > 0 ? inputs : [];
  const node = record(result, "checkpoint", marker, (g) => {
    const detached = inputs.map((t) => {
      const d = t.detach();
      d.requiresGrad = t.requiresGrad;
      return d;
    });
    const recomputed = withGrad(() => fn(...detached));
    if (recomputed.requiresGrad) backwardMany([recomputed], [g]);
    return detached.map((d) => (d.requiresGrad ? (d.grad ?? new Tensor(new Float32Array(d.size), d.shape)) : null));
  });
  if (node.node === null) {
    // No input requires grad: record() skipped the node, so attach it directly.
    node.node = {
      op: "checkpoint",
      inputs: [],
      backward: (g) => {
        const recomputed = withGrad(() => fn(...inputs.map((t) => t.detach())));
        if (recomputed.requiresGrad) backwardMany([recomputed], [g]);
        return [];
      },
    };
  }
  return node;
}

// Activation recomputation (gradient checkpointing): run a block without a tape, keep
// only its inputs, and rebuild the block's graph during backward. Trades one extra
// forward of the block for not storing its activations.
import { backwardMany, isGradEnabled, noGrad, withGrad } from "./autograd.js";
import { rngSequencePosition, setRngSequencePosition } from "./random.js";
import { Tensor, takeGrad } from "./tensor.js";

/**
 * y = fn(...inputs) with recomputation. Parameters the block closes over still receive
 * gradients (accumulated into their `.grad` during the recomputed backward). Randomness in the
 * block must come from offsets drawn with `nextRngSequence()` (as LoRA dropout does), which is
 * rewound for the recomputation, or be otherwise deterministic.
 */
export function checkpoint(fn: (...inputs: Tensor[]) => Tensor, ...inputs: Tensor[]): Tensor {
  if (!isGradEnabled()) return fn(...inputs);
  const rngStart = rngSequencePosition();
  const out = noGrad(() => fn(...inputs));
  const result = new Tensor(out.storage, out.shape, out.dtype, out.offset);
  // Always on the tape: the block may use trainable parameters even when no input requires grad.
  result.requiresGrad = true;
  result.node = {
    op: "checkpoint",
    inputs,
    backward: (g) => {
      const detached = inputs.map((t) => {
        const d = t.detach();
        d.requiresGrad = t.requiresGrad;
        return d;
      });
      // Replay the shared RNG sequence so dropout inside the block draws the forward's masks.
      const resume = rngSequencePosition();
      setRngSequencePosition(rngStart);
      let recomputed: Tensor;
      try {
        recomputed = withGrad(() => fn(...detached));
      } finally {
        setRngSequencePosition(resume);
      }
      if (recomputed.requiresGrad) backwardMany([recomputed], [g]);
      return detached.map((d) => (d.requiresGrad ? (takeGrad(d) ?? Tensor.zeros(d.shape)) : null));
    },
  };
  return result;
}

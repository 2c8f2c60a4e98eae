// One LoRA branch on one Linear: y_adapter = s · B(A(dropout(x))) (PEFT tuners/lora/layer.py),
// with A [r, in], B [out, r] as nn.Linear weights. Only A and B are trainable.
import { type Tensor, dropout, linear, mul, nextRngSequence } from "@kiln/tensor";
import type { LinearAdapter } from "@kiln/models";
import { loraLinear } from "./lora-linear.js";

export class LoraLayer implements LinearAdapter {
  enabled = true;
  /** Training mode turns dropout on (when p > 0). */
  training = true;
  /** Runtime multiplier on the scaling (PEFT scale_layer / set_scale): s_eff = multiplier · alpha / r. */
  scaleMultiplier = 1;

  constructor(
    readonly name: string,
    readonly module: string,
    /** [r, in] */
    public A: Tensor,
    /** [out, r] */
    public B: Tensor,
    /** alpha / r, or alpha / √r with rsLoRA. */
    public scaling: number,
    readonly dropoutP: number,
    private readonly dropoutSeed: number,
  ) {}

  get rank(): number {
    return this.A.shape[0];
  }

  /** The scale applied to B·A on this forward: multiplier · alpha/r. */
  get effectiveScaling(): number {
    return this.scaling * this.scaleMultiplier;
  }

  /** The adapter's input: x, or dropout(x) while training with p > 0. */
  private adapterInput(x: Tensor): Tensor {
    if (!(this.training && this.dropoutP > 0)) return x;
    // A fresh counter range per call from the shared sequence: masks differ between steps, a run
    // replays exactly, and gradient checkpointing's recomputation redraws the same mask.
    return dropout(x, this.dropoutP, { seed: this.dropoutSeed, offset: nextRngSequence() * x.size });
  }

  /** s · B(A(dropout(x))) alone (what gets added to the base output). */
  forward(x: Tensor): Tensor {
    // Scale the rank-r intermediate, not the [tokens × out] result: same maths, r/out of the work.
    return linear(mul(linear(this.adapterInput(x), this.A), this.effectiveScaling), this.B);
  }

  /** The whole layer, x·Wᵀ + b + s · B(A(dropout(x))), as one fused op (see lora-linear.ts). */
  forwardWithBase(x: Tensor, weight: Tensor, bias: Tensor | null): Tensor {
    return loraLinear(x, weight, bias, this.A, this.B, this.effectiveScaling, this.adapterInput(x));
  }
}

// One LoRA branch on one Linear: y_adapter = s · B(A(dropout(x))) (PEFT tuners/lora/layer.py),
// with A [r, in], B [out, r] as nn.Linear weights. Only A and B are trainable.
import { type Tensor, dropout, linear, mul, nextRngSequence } from "@kiln/tensor";
import type { LinearAdapter } from "@kiln/models";
import { type LoraDropout, loraLinear } from "./lora-linear.js";

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
  ) {
    // PEFT's key names, so optimizer errors say which adapter weight is wrong.
    A.name ??= `${module}.lora_A.${name}.weight`;
    B.name ??= `${module}.lora_B.${name}.weight`;
  }

  get rank(): number {
    return this.A.shape[0];
  }

  /** The scale applied to B·A on this forward: multiplier · alpha/r. */
  get effectiveScaling(): number {
    return this.scaling * this.scaleMultiplier;
  }

  /** This call's dropout draw (none in eval mode or with p = 0). */
  private dropoutDraw(x: Tensor): LoraDropout | undefined {
    if (!(this.training && this.dropoutP > 0)) return undefined;
    // A fresh counter range per call from the shared sequence: masks differ between steps, a run
    // replays exactly, and gradient checkpointing's recomputation redraws the same mask.
    return { p: this.dropoutP, seed: this.dropoutSeed, offset: nextRngSequence() * x.size };
  }

  /** s · B(A(dropout(x))) alone (what gets added to the base output). */
  forward(x: Tensor): Tensor {
    const d = this.dropoutDraw(x);
    const input = d ? dropout(x, d.p, { seed: d.seed, offset: d.offset }) : x;
    // Scale the rank-r intermediate, not the [tokens × out] result: same maths, r/out of the work.
    return linear(mul(linear(input, this.A), this.effectiveScaling), this.B);
  }

  /** The whole layer, x·Wᵀ + b + s · B(A(dropout(x))), as one fused op (see lora-linear.ts). */
  forwardWithBase(x: Tensor, weight: Tensor, bias: Tensor | null): Tensor {
    return loraLinear(x, weight, bias, this.A, this.B, this.effectiveScaling, this.dropoutDraw(x));
  }
}

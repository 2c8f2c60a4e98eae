// SwiGLU feed-forward (transformers LlamaMLP / Qwen3MLP): down(silu(gate(x)) ⊙ up(x)).
import { type Tensor, swiglu } from "@kiln/tensor";
import type { Linear } from "./linear.js";

export class SwiGluMlp {
  constructor(
    readonly gateProj: Linear,
    readonly upProj: Linear,
    readonly downProj: Linear,
  ) {}

  forward(x: Tensor): Tensor {
    return this.downProj.forward(swiglu(this.gateProj.forward(x), this.upProj.forward(x)));
  }

  namedLinears(prefix: string): [string, Linear][] {
    return [
      [`${prefix}gate_proj`, this.gateProj],
      [`${prefix}up_proj`, this.upProj],
      [`${prefix}down_proj`, this.downProj],
    ];
  }
}

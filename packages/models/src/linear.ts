// The linear layer every projection goes through, with a hook for adapters (LoRA) that add
// their output to the frozen base: y = x·Wᵀ + b + Σ enabled adapters(x).
import { type Tensor, add, linear } from "@kiln/tensor";

export interface LinearAdapter {
  readonly name: string;
  enabled: boolean;
  /** added to the base output */
  forward(x: Tensor): Tensor;
}

export class Linear {
  adapters: LinearAdapter[] = [];

  constructor(
    /** [out, in], f32 or bf16 (bf16 = frozen). */
    public weight: Tensor,
    public bias: Tensor | null = null,
  ) {}

  get inFeatures(): number {
    return this.weight.shape[1];
  }

  get outFeatures(): number {
    return this.weight.shape[0];
  }

  forward(x: Tensor): Tensor {
    let y = linear(x, this.weight, this.bias);
    for (const a of this.adapters) if (a.enabled) y = add(y, a.forward(x));
    return y;
  }
}

/** Appends a linear's HF state-dict entries (`name.weight`, `name.bias`). */
export function pushLinear(out: [string, Tensor][], name: string, lin: Linear): void {
  out.push([`${name}.weight`, lin.weight]);
  if (lin.bias) out.push([`${name}.bias`, lin.bias]);
}

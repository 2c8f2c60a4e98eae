// The linear layer every projection goes through, with a hook for adapters (LoRA) that add
// their output to the frozen base: y = x·Wᵀ + b + Σ enabled adapters(x).
import { type Tensor, add, linear } from "@kiln/tensor";

export interface LinearAdapter {
  readonly name: string;
  enabled: boolean;
  /** added to the base output */
  forward(x: Tensor): Tensor;
  /**
   * Optional fused path: the base output plus this adapter's, x·Wᵀ + b + forward(x), as one op. An
   * adapter that can fold its product into the base GEMM (and its input gradient into the base's)
   * saves a [tokens × out] sum per forward and a [tokens × in] one per backward.
   */
  forwardWithBase?(x: Tensor, weight: Tensor, bias: Tensor | null): Tensor;
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
    let y: Tensor | null = null;
    for (const a of this.adapters) {
      if (!a.enabled) continue;
      // The first enabled adapter with a fused path computes the base with it; the rest add on.
      if (y === null && a.forwardWithBase) y = a.forwardWithBase(x, this.weight, this.bias);
      else y = add(y ?? linear(x, this.weight, this.bias), a.forward(x));
    }
    return y ?? linear(x, this.weight, this.bias);
  }
}

/** Appends a linear's HF state-dict entries (`name.weight`, `name.bias`). */
export function pushLinear(out: [string, Tensor][], name: string, lin: Linear): void {
  out.push([`${name}.weight`, lin.weight]);
  if (lin.bias) out.push([`${name}.bias`, lin.bias]);
}

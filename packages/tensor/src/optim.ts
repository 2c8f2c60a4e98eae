// Optimizers, in order of increasing complexity (tinygrad nn/optim.py style).
// Updates run in place on parameter storage, outside the tape.
import { kernel } from "./backend.js";
import type { Tensor } from "./tensor.js";
import { ShapeError } from "./errors.js";

export interface ParamGroup {
  params: Tensor[];
  lr?: number;
  weightDecay?: number;
}

export abstract class Optimizer {
  readonly params: Tensor[];
  lr: number;
  stepCount = 0;

  constructor(params: Iterable<Tensor>, lr: number) {
    this.params = [...params];
    for (const p of this.params) {
      if (p.dtype !== "f32")
        throw new ShapeError(`optimizer: parameter ${p.name ?? p.id} is ${p.dtype}; trainable parameters must be f32`);
    }
    if (!(lr >= 0)) throw new RangeError(`optimizer: learning rate must be ≥ 0, got ${lr}`);
    this.lr = lr;
  }

  zeroGrad(): void {
    for (const p of this.params) p.grad = null;
  }

  step(): void {
    this.stepCount++;
    for (let i = 0; i < this.params.length; i++) {
      const p = this.params[i];
      if (p.grad === null) continue;
      this.update(i, p.data as Float32Array, p.grad.data as Float32Array);
    }
  }

  protected abstract update(index: number, param: Float32Array, grad: Float32Array): void;

  abstract stateDict(): OptimizerState;
  abstract loadStateDict(state: OptimizerState): void;
}

export interface OptimizerState {
  kind: string;
  step: number;
  lr: number;
  buffers: Record<string, Float32Array[]>;
  hyper: Record<string, number>;
}

/** SGD with optional momentum (torch.optim.SGD, dampening 0, no nesterov) and L2 weight decay. */
export class SGD extends Optimizer {
  private velocity: (Float32Array | null)[];
  constructor(
    params: Iterable<Tensor>,
    lr: number,
    readonly momentum = 0,
    readonly weightDecay = 0,
  ) {
    super(params, lr);
    this.velocity = this.params.map(() => null);
  }

  protected update(i: number, p: Float32Array, g: Float32Array): void {
    const { lr, momentum, weightDecay } = this;
    if (momentum === 0) {
      for (let j = 0; j < p.length; j++) p[j] -= lr * (g[j] + weightDecay * p[j]);
      return;
    }
    let v = this.velocity[i];
    const first = v === null;
    if (v === null) v = this.velocity[i] = new Float32Array(p.length);
    for (let j = 0; j < p.length; j++) {
      const d = g[j] + weightDecay * p[j];
      v[j] = first ? d : momentum * v[j] + d;
      p[j] -= lr * v[j];
    }
  }

  stateDict(): OptimizerState {
    return {
      kind: "sgd",
      step: this.stepCount,
      lr: this.lr,
      buffers: { velocity: this.velocity.map((v, i) => v ?? new Float32Array(this.params[i].size)) },
      hyper: { momentum: this.momentum, weightDecay: this.weightDecay },
    };
  }

  loadStateDict(state: OptimizerState): void {
    this.stepCount = state.step;
    this.lr = state.lr;
    this.velocity = state.buffers.velocity.map((v) => Float32Array.from(v));
  }
}

export interface AdamWOptions {
  lr?: number;
  betas?: [number, number];
  eps?: number;
  weightDecay?: number;
}

/**
 * AdamW exactly as torch.optim.AdamW (single-tensor path): decoupled decay p ← p(1 − lr·wd),
 * then p ← p − (lr / bc1) · m / (√v / √bc2 + eps) with bc_i = 1 − β_i^t.
 */
export class AdamW extends Optimizer {
  readonly beta1: number;
  readonly beta2: number;
  readonly eps: number;
  readonly weightDecay: number;
  private m: Float32Array[];
  private v: Float32Array[];

  constructor(params: Iterable<Tensor>, options: AdamWOptions = {}) {
    super(params, options.lr ?? 1e-3);
    [this.beta1, this.beta2] = options.betas ?? [0.9, 0.999];
    this.eps = options.eps ?? 1e-8;
    this.weightDecay = options.weightDecay ?? 1e-2;
    this.m = this.params.map((p) => new Float32Array(p.size));
    this.v = this.params.map((p) => new Float32Array(p.size));
  }

  protected update(i: number, p: Float32Array, g: Float32Array): void {
    const t = this.stepCount;
    // The update runs as a backend kernel (SIMD on wasm); constants are per step.
    kernel("adamwUpdate")(p, g, this.m[i], this.v[i], {
      beta1: this.beta1,
      beta2: this.beta2,
      eps: this.eps,
      stepSize: this.lr / (1 - this.beta1 ** t),
      bc2Sqrt: Math.sqrt(1 - this.beta2 ** t),
      decay: 1 - this.lr * this.weightDecay,
    });
  }

  stateDict(): OptimizerState {
    return {
      kind: "adamw",
      step: this.stepCount,
      lr: this.lr,
      buffers: { exp_avg: this.m, exp_avg_sq: this.v },
      hyper: { beta1: this.beta1, beta2: this.beta2, eps: this.eps, weightDecay: this.weightDecay },
    };
  }

  loadStateDict(state: OptimizerState): void {
    if (state.kind !== "adamw") throw new TypeError(`AdamW.loadStateDict: state is for "${state.kind}"`);
    if (state.buffers.exp_avg.length !== this.params.length) {
      throw new ShapeError(
        `AdamW.loadStateDict: state has ${state.buffers.exp_avg.length} parameters, optimizer has ${this.params.length}`,
      );
    }
    this.stepCount = state.step;
    this.lr = state.lr;
    this.m = state.buffers.exp_avg.map((a) => Float32Array.from(a));
    this.v = state.buffers.exp_avg_sq.map((a) => Float32Array.from(a));
  }
}

/**
 * Global-norm gradient clipping as torch.nn.utils.clip_grad_norm_ (L2): total = ‖(‖g_i‖)‖,
 * every grad scaled by min(1, maxNorm / (total + 1e-6)). Returns the total norm before clipping.
 */
export function clipGradNorm(params: Iterable<Tensor>, maxNorm: number): number {
  const grads: Float32Array[] = [];
  for (const p of params) if (p.grad) grads.push(p.grad.data as Float32Array);
  let sq = 0;
  for (const g of grads) {
    let s = 0;
    for (let j = 0; j < g.length; j++) s += g[j] * g[j];
    // torch computes each tensor's norm in f32 first, then the norm of norms.
    const n = Math.fround(Math.sqrt(s));
    sq += n * n;
  }
  const total = Math.sqrt(sq);
  const coef = Math.min(1, maxNorm / (total + 1e-6));
  if (coef < 1) for (const g of grads) for (let j = 0; j < g.length; j++) g[j] *= coef;
  return total;
}

// Optimizers, in order of increasing complexity (tinygrad nn/optim.py style).
// Updates run in place on parameter storage, outside the tape.
// Optimizer state lives on the parameters' backend as tensors kept out of `tidy`.
import { activeStorage, kernel } from "./backend.js";
import { BackendError, ShapeError, fmtShape } from "./errors.js";
import { Tensor, argOf, keep } from "./tensor.js";

export interface ParamGroup {
  params: Tensor[];
  lr?: number;
  weightDecay?: number;
}

/** "name" [shape] when the parameter is named (models and lora name theirs), else #index in the list. */
function parameterLabel(p: Tensor, index: number): string {
  return `${p.name !== undefined ? `"${p.name}"` : `#${index}`} ${fmtShape(p.shape)}`;
}

let parameterUpdates = 0;

/**
 * How many optimizer steps have run in this process (any optimizer, any parameters): caches of values computed
 * from the weights (the batching scheduler's prefix cache) compare it to know the weights may have changed.
 */
export function parameterUpdateCount(): number {
  return parameterUpdates;
}

export abstract class Optimizer {
  readonly params: Tensor[];
  lr: number;
  stepCount = 0;

  constructor(params: Iterable<Tensor>, lr: number) {
    this.params = [...params];
    this.params.forEach((p, index) => {
      if (p.dtype !== "f32")
        throw new ShapeError(
          `optimizer: parameter ${parameterLabel(p, index)} is ${p.dtype}; trainable parameters must be f32 ` +
            "(keep frozen bf16/f16 weights out of the optimizer, or widen the trainable ones)",
        );
    });
    if (!(lr >= 0)) throw new RangeError(`optimizer: learning rate must be ≥ 0, got ${lr}`);
    this.lr = lr;
  }

  /** Drops the gradients and frees their storage (set-to-none, like PyTorch's zero_grad default). */
  zeroGrad(): void {
    for (const p of this.params) {
      // Leaf gradients outlive the step's tidy scope; without the dispose every step would leave one
      // buffer per parameter behind until the garbage collector noticed (wasm memory grew without bound).
      if (p.grad && !p.grad.isDisposed) p.grad.dispose();
      p.grad = null;
    }
  }

  step(): void {
    this.stepCount++;
    parameterUpdates++;
    const active = activeStorage();
    for (let i = 0; i < this.params.length; i++) {
      const p = this.params[i];
      if (p.grad === null) continue;
      // An update on a device backend writes the backend's own memory: a parameter stored elsewhere would get
      // an uploaded copy updated and then thrown away, silently.
      const own = p.storage.backend;
      if (own !== active && !(own.hostVisible && active.hostVisible))
        throw new BackendError(
          `optimizer: parameter ${parameterLabel(p, i)} lives on backend "${own.name}" but the ` +
            `active backend is "${active.name}"; create parameters while "${active.name}" is active ` +
            "(tensor(), Tensor.fromHost(), parameter()) rather than with new Tensor(hostArray)",
        );
      this.update(i, p, p.grad);
    }
  }

  protected abstract update(index: number, param: Tensor, grad: Tensor): void;

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
  private velocity: (Tensor | null)[];
  constructor(
    params: Iterable<Tensor>,
    lr: number,
    readonly momentum = 0,
    readonly weightDecay = 0,
  ) {
    super(params, lr);
    this.velocity = this.params.map(() => null);
  }

  protected update(i: number, param: Tensor, grad: Tensor): void {
    const { lr, momentum, weightDecay } = this;
    if (!param.storage.backend.hostVisible || !grad.storage.backend.hostVisible) {
      this.updateWithKernels(i, param, grad);
      return;
    }
    const p = param.dataSync() as Float32Array;
    const g = grad.dataSync() as Float32Array;
    if (momentum === 0) {
      for (let j = 0; j < p.length; j++) p[j] -= lr * (g[j] + weightDecay * p[j]);
      return;
    }
    const first = this.velocity[i] === null;
    if (first) this.velocity[i] = keep(Tensor.zeros(param.shape));
    const v = (this.velocity[i] as Tensor).dataSync() as Float32Array;
    for (let j = 0; j < p.length; j++) {
      const d = g[j] + weightDecay * p[j];
      v[j] = first ? d : momentum * v[j] + d;
      p[j] -= lr * v[j];
    }
  }

  /** The same update with backend kernels (device-resident parameters); rounds after each operation. */
  private updateWithKernels(i: number, param: Tensor, grad: Tensor): void {
    const { lr, momentum, weightDecay } = this;
    const n = param.size;
    const flat = { shape: [n], aStrides: [1], bStrides: [1] };
    const p = argOf(param) as Float32Array;
    const d = Tensor.zeros(param.shape);
    const dd = argOf(d) as Float32Array;
    kernel("binaryScalar")("mul", p, weightDecay, dd, n, false);
    kernel("binary")("add", argOf(grad) as Float32Array, dd, dd, flat);
    let step = dd;
    if (momentum !== 0) {
      const first = this.velocity[i] === null;
      if (first) this.velocity[i] = keep(Tensor.zeros(param.shape));
      const v = argOf(this.velocity[i] as Tensor) as Float32Array;
      if (first) kernel("copy")(dd, v, { shape: [n], srcOffset: 0, srcStrides: [1], dstOffset: 0, dstStrides: [1] });
      else {
        kernel("binaryScalar")("mul", v, momentum, v, n, false);
        kernel("binary")("add", v, dd, v, flat);
      }
      step = v;
    }
    kernel("binaryScalar")("mul", step, lr, dd, n, false);
    kernel("binary")("sub", p, dd, p, flat);
    d.dispose();
  }

  stateDict(): OptimizerState {
    return {
      kind: "sgd",
      step: this.stepCount,
      lr: this.lr,
      buffers: {
        velocity: this.velocity.map((v, i) =>
          v ? (v.dataSync() as Float32Array) : new Float32Array(this.params[i].size),
        ),
      },
      hyper: { momentum: this.momentum, weightDecay: this.weightDecay },
    };
  }

  loadStateDict(state: OptimizerState): void {
    this.stepCount = state.step;
    this.lr = state.lr;
    this.velocity = state.buffers.velocity.map((v, i) =>
      keep(Tensor.fromHost(Float32Array.from(v), this.params[i].shape)),
    );
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
  private m: Tensor[];
  private v: Tensor[];

  constructor(params: Iterable<Tensor>, options: AdamWOptions = {}) {
    super(params, options.lr ?? 1e-3);
    [this.beta1, this.beta2] = options.betas ?? [0.9, 0.999];
    this.eps = options.eps ?? 1e-8;
    this.weightDecay = options.weightDecay ?? 1e-2;
    this.m = this.params.map((p) => keep(Tensor.zeros(p.shape)));
    this.v = this.params.map((p) => keep(Tensor.zeros(p.shape)));
  }

  protected update(i: number, p: Tensor, g: Tensor): void {
    const t = this.stepCount;
    const f32 = (x: Tensor) => argOf(x) as Float32Array;
    // The update runs as a backend kernel (SIMD on wasm); constants are per step.
    kernel("adamwUpdate")(f32(p), f32(g), f32(this.m[i]), f32(this.v[i]), {
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
      // Host views of the state (live on js/wasm: they change with later steps).
      buffers: {
        exp_avg: this.m.map((t) => t.dataSync() as Float32Array),
        exp_avg_sq: this.v.map((t) => t.dataSync() as Float32Array),
      },
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
    this.m = state.buffers.exp_avg.map((a, i) => keep(Tensor.fromHost(Float32Array.from(a), this.params[i].shape)));
    this.v = state.buffers.exp_avg_sq.map((a, i) => keep(Tensor.fromHost(Float32Array.from(a), this.params[i].shape)));
  }
}

/**
 * Global-norm gradient clipping as torch.nn.utils.clip_grad_norm_ (L2): total = ‖(‖g_i‖)‖,
 * every grad scaled by min(1, maxNorm / (total + 1e-6)). Returns the total norm before clipping.
 */
export function clipGradNorm(params: Iterable<Tensor>, maxNorm: number): number {
  const grads: Float32Array[] = [];
  // Reads the norm on the host: device-resident gradients throw DataSyncError from dataSync().
  for (const p of params) if (p.grad) grads.push(p.grad.dataSync() as Float32Array);
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

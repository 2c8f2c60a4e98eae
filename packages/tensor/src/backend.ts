// Kernels are registered per backend under a name (tfjs-core style); ops look the
// kernel up on the active backend and fall back to the js reference. Gradients are
// defined once in the ops, so a new backend only adds kernels.
import { jsKernels } from "./backends/js/index.js";
import { BackendError } from "./errors.js";

export interface MatmulShape {
  batch: number;
  m: number;
  n: number;
  k: number;
  /** A stored [batch][k][m] instead of [batch][m][k]. */
  transA?: boolean;
  /** B stored [batch][n][k] instead of [batch][k][n]. */
  transB?: boolean;
  /** Elements between batches of A; 0 broadcasts one A to every batch. Default m*k. */
  batchStrideA?: number;
  batchStrideB?: number;
  /** out += A·B instead of out = A·B. */
  accumulate?: boolean;
}

export interface KlRowsShape {
  rows: number;
  vocab: number;
  /** Both logits are multiplied by this (1/temperature); must be positive. */
  scale: number;
  /** KL(S‖P) instead of KL(P‖S). */
  reverse: boolean;
}

/** x [batch][heads][seq][headDim] (see headsLast); cos/sin [seq][rotaryDim/2], or [batch·seq][rotaryDim/2] when perBatch. */
export interface RopeShape {
  batch: number;
  heads: number;
  seq: number;
  headDim: number;
  /** Leading dims of each head that rotate: even, ≤ headDim; the rest pass through. */
  rotaryDim: number;
  /** One cos/sin row per (batch, position) instead of one per position shared by the batch. */
  perBatch: boolean;
  /**
   * x (ropeForward) and dx (ropeBackward) are [batch][seq][heads][headDim], the layout a projection
   * produces, while out and dOut stay [batch][heads][seq][headDim]: the head permute happens in the
   * same pass. out/dx must then be separate arrays.
   */
  headsLast?: boolean;
}

export interface AttentionShape {
  batch: number;
  heads: number;
  kvHeads: number;
  /** Query length. */
  tq: number;
  /** Key/value length (≥ tq with a KV cache; queries are the last tq positions when causal). */
  tk: number;
  headDim: number;
  scale: number;
  causal: boolean;
}

export interface Kernels {
  matmul(a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape): void;
  matmulBf16B(a: Float32Array, bBits: Uint16Array, out: Float32Array, shape: MatmulShape): void;
  rmsNorm(
    x: Float32Array,
    w: Float32Array,
    out: Float32Array,
    rstd: Float32Array,
    dim: number,
    eps: number,
    zeroCentered: boolean,
  ): void;
  /**
   * RMSNorm backward from the forward's rstd: with x̂ = x·rstd and w' = w (or 1 + w),
   * dx = rstd·(g·w' − x̂·mean(g·w'·x̂)) and, when `dw` is given, dw = Σ_rows g·x̂ (overwritten).
   */
  rmsNormBackward(
    x: Float32Array,
    w: Float32Array,
    rstd: Float32Array,
    g: Float32Array,
    dx: Float32Array,
    dw: Float32Array | null,
    dim: number,
    zeroCentered: boolean,
  ): void;
  crossEntropyForward(
    logits: Float32Array,
    targets: Int32Array,
    loss: Float32Array,
    lse: Float32Array,
    rows: number,
    vocab: number,
    ignoreIndex: number,
  ): void;
  crossEntropyBackward(
    logits: Float32Array,
    targets: Int32Array,
    lse: Float32Array,
    gradLoss: Float32Array,
    dlogits: Float32Array,
    rows: number,
    vocab: number,
    ignoreIndex: number,
  ): void;
  /**
   * probs = softmax(logits)·rowScale[r] (rowScale omitted: 1) and lse = logsumexp(logits) per row
   * of `vocab` values. `probs` may be `logits` itself (in place). Losses keep the probabilities
   * from the forward, already scaled by the gradient they expect, so that their backward needs
   * no exp and usually no pass over the vocabulary.
   */
  softmaxRows(
    logits: Float32Array,
    probs: Float32Array,
    lse: Float32Array,
    rows: number,
    vocab: number,
    rowScale?: Float32Array | null,
  ): void;
  /**
   * Full-vocabulary KL per row between S = softmax(scale·student) and P = softmax(scale·teacher)
   * (teacher row `teacherRows[r]`, or r when null): forward KL(P‖S) or reverse KL(S‖P) into `loss`,
   * the logsumexps of the scaled rows into `lseS`/`lseT`, and, when `grad` is given, the direction
   * of the gradient w.r.t. scale·student per row: S − P (forward), S·(log S − log P − KL) (reverse),
   * times gradRowScale[r] when given.
   */
  klDivergenceRows(
    student: Float32Array,
    teacher: Float32Array,
    teacherRows: Int32Array | null,
    grad: Float32Array | null,
    loss: Float32Array,
    lseS: Float32Array,
    lseT: Float32Array,
    shape: KlRowsShape,
    gradRowScale?: Float32Array | null,
  ): void;
  /**
   * Rotate-half RoPE (transformers apply_rotary_pos_emb) on the first rotaryDim dims of every head row:
   * out[i] = x[i]·cos − x[i+h]·sin, out[i+h] = x[i+h]·cos + x[i]·sin for i < h = rotaryDim/2, the rest
   * copied. `out` may be `x` (in place).
   */
  ropeForward(x: Float32Array, cos: Float32Array, sin: Float32Array, out: Float32Array, shape: RopeShape): void;
  /** Gradient of ropeForward: the rotation by −θ (its transpose) applied to dOut. `dx` may be `dOut`. */
  ropeBackward(dOut: Float32Array, cos: Float32Array, sin: Float32Array, dx: Float32Array, shape: RopeShape): void;
  /** out = silu(gate)·up; σ(gate) saved in `sig` for the backward. */
  swigluForward(gate: Float32Array, up: Float32Array, out: Float32Array, sig: Float32Array): void;
  swigluBackward(
    gate: Float32Array,
    up: Float32Array,
    sig: Float32Array,
    dOut: Float32Array,
    dGate: Float32Array,
    dUp: Float32Array,
  ): void;
  /** One AdamW step in place (torch.optim.AdamW single-tensor semantics, see optim.ts). */
  adamwUpdate(
    param: Float32Array,
    grad: Float32Array,
    expAvg: Float32Array,
    expAvgSq: Float32Array,
    step: AdamWStep,
  ): void;
  /** q [B,H,tq,D], k/v [B,Hkv,tk,D], keyMask [B,tk] (1 keep, 0 pad) or null → out [B,H,tq,D], lse [B,H,tq]. */
  attentionForward(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    keyMask: Uint8Array | null,
    out: Float32Array,
    lse: Float32Array,
    shape: AttentionShape,
  ): void;
  attentionBackward(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    keyMask: Uint8Array | null,
    out: Float32Array,
    lse: Float32Array,
    dOut: Float32Array,
    dq: Float32Array,
    dk: Float32Array,
    dv: Float32Array,
    shape: AttentionShape,
  ): void;
}

/** Per-step AdamW constants: stepSize = lr / (1 − β1^t), bc2Sqrt = √(1 − β2^t), decay = 1 − lr·weight_decay. */
export interface AdamWStep {
  beta1: number;
  beta2: number;
  eps: number;
  stepSize: number;
  bc2Sqrt: number;
  decay: number;
}

export type KernelName = keyof Kernels;
export type BackendName = "js" | "wasm" | "gpujs" | (string & {});

interface BackendRegistry {
  backends: Map<string, Partial<Kernels>>;
  reference: Kernels | null;
  active: BackendName;
  activeKernels: Partial<Kernels>;
}

// One registry per process, not per copy of this module: a program that loads both the ESM and the CJS build
// (or two bundles) must see the backend `initBackend` chose in either. The first copy to load creates it.
const REGISTRY_KEY = Symbol.for("kiln.tensor.registry.v1");
const registry: BackendRegistry =
  ((globalThis as Record<symbol, unknown>)[REGISTRY_KEY] as BackendRegistry) ??
  ((globalThis as Record<symbol, unknown>)[REGISTRY_KEY] = {
    backends: new Map<string, Partial<Kernels>>([["js", jsKernels]]),
    reference: jsKernels,
    active: "js",
    activeKernels: jsKernels,
  } satisfies BackendRegistry);

/** Register (or extend) a backend's kernels. The js backend must define all of them. */
export function registerKernels(backend: BackendName, kernels: Partial<Kernels>): void {
  const existing = registry.backends.get(backend) ?? {};
  const merged = { ...existing, ...kernels };
  registry.backends.set(backend, merged);
  if (backend === "js") registry.reference = merged as Kernels;
  if (backend === registry.active) registry.activeKernels = merged;
}

/** Remove a backend's kernels (after its resources are released); the active backend falls back to js. */
export function unregisterBackend(name: BackendName): void {
  if (name === "js") throw new BackendError("unregisterBackend: the js reference backend cannot be removed");
  registry.backends.delete(name);
  if (registry.active === name) {
    registry.active = "js";
    registry.activeKernels = registry.backends.get("js") ?? jsKernels;
  }
}

export function hasBackend(name: BackendName): boolean {
  return registry.backends.has(name);
}

export function listBackends(): string[] {
  return [...registry.backends.keys()];
}

/** Select the backend ops use from now on. It must be registered (see `initBackend`). */
export function setBackend(name: BackendName): void {
  const kernels = registry.backends.get(name);
  if (!kernels) {
    throw new BackendError(
      `setBackend: backend "${name}" is not registered (registered: ${listBackends().join(", ")}); ` +
        `initialise it first, e.g. await initBackend("${name}")`,
    );
  }
  registry.active = name;
  registry.activeKernels = kernels;
}

export function getBackend(): BackendName {
  return registry.active;
}

/** The active backend's kernel, or the js reference kernel when the backend lacks it. */
export function kernel<K extends KernelName>(name: K): Kernels[K] {
  const impl = registry.activeKernels[name];
  if (impl) return impl as Kernels[K];
  if (!registry.reference) throw new BackendError("kernel: the js reference backend is not registered");
  return registry.reference[name];
}

/** The js reference kernel regardless of the active backend (parity tests). */
export function referenceKernel<K extends KernelName>(name: K): Kernels[K] {
  if (!registry.reference) throw new BackendError("referenceKernel: the js reference backend is not registered");
  return registry.reference[name];
}

/** Run `fn` with `name` as the active backend, restoring the previous one after. */
export function withBackend<T>(name: BackendName, fn: () => T): T {
  const previous = registry.active;
  setBackend(name);
  try {
    return fn();
  } finally {
    setBackend(previous);
  }
}

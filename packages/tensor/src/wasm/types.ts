// Public types of the raw-array WASM kernel API (wired into the `wasm` backend by src/backends).

// The GEMM shape and the AdamW step constants are the backend kernel registry's own types.
import type { AdamWStep, MatmulShape } from "../backend.js";

export type { AdamWStep, MatmulShape };

/**
 * Fused attention layout: q/out/dout/dq [batch][heads][tq][dim], k/v/dk/dv [batch][kvHeads][tk][dim],
 * lse [batch][heads][tq]. Query head h uses kv head floor(h / (heads / kvHeads)) (grouped-query attention).
 */
export interface AttentionShape {
  batch: number;
  heads: number;
  /** Default heads; must divide heads. */
  kvHeads?: number;
  tq: number;
  tk: number;
  dim: number;
  /** Query i sees keys j <= i + tk - tq (queries aligned to the end of the keys, as with a KV cache). */
  causal?: boolean;
  /** Default 1 / sqrt(dim). */
  scale?: number;
}

export interface WasmKernels {
  /** Threads that share a call (the calling thread included). */
  readonly threads: number;
  /** Whether the GEMM micro-kernel uses f32x4.relaxed_madd. */
  readonly relaxedSimd: boolean;
  matmul(a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape): void;
  /** B given as bfloat16 bit patterns (Uint16Array), widened to f32 inside the kernel (frozen bf16 weights). */
  matmulBf16B(a: Float32Array, bBits: Uint16Array, out: Float32Array, shape: MatmulShape): void;
  /** y = x / sqrt(mean(x^2) + eps) * (w or 1+w), rows of length `dim`; also returns per-row rstd for the backward. */
  rmsNorm(
    x: Float32Array,
    w: Float32Array,
    out: Float32Array,
    rstd: Float32Array,
    dim: number,
    eps: number,
    zeroCentered: boolean,
  ): void;
  /** Row-wise log-softmax cross-entropy: loss[i] = logsumexp(logits[i]) - logits[i][target[i]]; lse[i] stored; rows with target == ignoreIndex get loss 0. */
  crossEntropyForward(
    logits: Float32Array,
    targets: Int32Array,
    loss: Float32Array,
    lse: Float32Array,
    rows: number,
    vocab: number,
    ignoreIndex: number,
  ): void;
  /** dlogits[i] = (softmax(logits[i]) - onehot(target[i])) * gradLoss[i] (0 for ignored rows), using the saved lse. */
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
  /** out = softmax(scale·q·kᵀ [+ causal mask])·v without materialising the scores; lse = per-row log-sum-exp of the scaled scores (-inf for a row that sees no key). */
  attentionForward(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    out: Float32Array,
    lse: Float32Array,
    shape: AttentionShape,
  ): void;
  /** Gradients of attentionForward from its saved out and lse: dq, and dk, dv summed over the query heads that share a kv head. */
  attentionBackward(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    out: Float32Array,
    dout: Float32Array,
    lse: Float32Array,
    dq: Float32Array,
    dk: Float32Array,
    dv: Float32Array,
    shape: AttentionShape,
  ): void;
  /** SwiGLU: out = silu(gate)·up elementwise, with σ(gate) saved in `sig` for the backward. */
  swiglu(gate: Float32Array, up: Float32Array, out: Float32Array, sig: Float32Array): void;
  /** SwiGLU backward from the saved σ: dgate = dout·up·σ·(1 + gate·(1 − σ)), dup = dout·gate·σ. */
  swigluBackward(
    gate: Float32Array,
    up: Float32Array,
    sig: Float32Array,
    dout: Float32Array,
    dgate: Float32Array,
    dup: Float32Array,
  ): void;
  /** One AdamW step in place on param / expAvg / expAvgSq (torch.optim.AdamW, single-tensor). */
  adamw(param: Float32Array, grad: Float32Array, expAvg: Float32Array, expAvgSq: Float32Array, step: AdamWStep): void;
  /** Stops the workers; the object must not be used afterwards. */
  dispose(): void;
}

export interface WasmKernelOptions {
  /** Threads per call including the caller. Default min(2, available cores); 1 = no workers. */
  threads?: number;
  /** "auto" (default): relaxed SIMD when the engine validates it now; true: require it; false: plain SIMD. */
  relaxedSimd?: boolean | "auto";
  /** Upper limit of the WebAssembly memory in MiB (default 4096, the wasm32 maximum). */
  maxMemoryMiB?: number;
}

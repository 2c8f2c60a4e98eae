// Public types of the raw-array WASM kernel API (wired into the `wasm` backend by src/backends).

// The GEMM shape and the AdamW step constants are the backend kernel registry's own types.
import type { AdamWStep, Kernels, MatmulShape } from "../backend.js";

import type { WasmHeap } from "./heap.js";

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

/**
 * The wasm module's kernels. GEMM, RMSNorm (forward and backward), cross-entropy, RoPE and the SwiGLU backward have exactly the
 * backend registry's signatures (see `Kernels` in kernel-contract.ts, where they are documented); attention
 * takes the module's own `AttentionShape`.
 */
export interface WasmKernels
  extends Pick<
    Kernels,
    | "matmul"
    | "matmulBf16B"
    | "rmsNorm"
    | "rmsNormBackward"
    | "crossEntropyForward"
    | "crossEntropyBackward"
    | "softmaxRows"
    | "klDivergenceRows"
    | "swigluBackward"
    | "ropeForward"
    | "ropeBackward"
    | "attentionDecodeRagged"
  > {
  /** Threads that share a call (the calling thread included). */
  readonly threads: number;
  /** Whether the GEMM micro-kernel uses f32x4.relaxed_madd. */
  readonly relaxedSimd: boolean;
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
  swiglu: Kernels["swigluForward"];
  /** One AdamW step in place on param / expAvg / expAvgSq (torch.optim.AdamW, single-tensor). */
  adamw: Kernels["adamwUpdate"];
  /**
   * `binary` (kernel-contract.ts) on arrays resident in the module's memory for add/sub/mul/div whose walk is rows
   * of a contiguous output with each operand contiguous or broadcast along the row. False (nothing done)
   * otherwise.
   */
  binaryResident(
    op: string,
    a: Float32Array,
    b: Float32Array,
    out: Float32Array,
    shape: readonly number[],
    aStrides: readonly number[],
    bStrides: readonly number[],
  ): boolean;
  /**
   * `binaryScalar` (kernel-contract.ts) on resident arrays for add/sub/mul/div with an f32-representable scalar
   * (the js kernel's bits); false (nothing done) otherwise.
   */
  binaryScalarResident(
    op: string,
    x: Float32Array,
    s: number,
    out: Float32Array,
    n: number,
    scalarLeft: boolean,
  ): boolean;
  /** `copy` (kernel-contract.ts) on resident arrays of one element type, rank ≤ 4 after merging dims; false otherwise. */
  copyResident(
    x: Float32Array | Int32Array | Uint16Array,
    out: Float32Array | Int32Array | Uint16Array,
    shape: readonly number[],
    srcOffset: number,
    srcStrides: readonly number[],
    dstOffset: number,
    dstStrides: readonly number[],
  ): boolean;
  /** bf16 bits → f32 ("widen") or f32 → bf16 bits, nearest even ("round"), on resident arrays; false otherwise. */
  bf16Resident(
    mode: "widen" | "round",
    src: Float32Array | Uint16Array,
    dst: Float32Array | Uint16Array,
    n: number,
  ): boolean;
  /** Softmax pieces of attention tiles whose products run elsewhere (native BLAS), on resident arrays. */
  readonly attentionTiles: AttentionTiles;
  /** BLAS products on the worker threads (the native backend); null without workers. */
  readonly workerBlas: WorkerBlas | null;
  /** Stops the workers; the object must not be used afterwards. */
  dispose(): void;
  /** The allocator of the kernels' WebAssembly.Memory (resident tensors of the wasm backend live in it). */
  readonly wasmHeap: WasmHeap;
}

export interface WasmKernelOptions {
  /** Threads per call including the caller. Default min(2, available cores); 1 = no workers. */
  threads?: number;
  /** "auto" (default): relaxed SIMD when the engine validates it now; true: require it; false: plain SIMD. */
  relaxedSimd?: boolean | "auto";
  /** Upper limit of the WebAssembly memory in MiB (default 4096, the wasm32 maximum). */
  maxMemoryMiB?: number;
}

/**
 * Row-wise pieces of GEMM-tiled attention on arrays resident in the kernels' memory (pointers are the arrays'
 * byte offsets; `lse` arguments start at the tile's first row). A score tile S is [rows][end]; row r sees keys
 * j < clamp(vis0 + r, 0, end).
 */
/** cblas_sgemm on typed arrays: (order, transA, transB, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc). */
export type TypedSgemm = (
  order: number,
  transA: number,
  transB: number,
  m: number,
  n: number,
  k: number,
  alpha: number,
  a: Float32Array,
  lda: number,
  b: Float32Array,
  ldb: number,
  beta: number,
  c: Float32Array,
  ldc: number,
) => void;

export interface AttentionTiles {
  /** Whether every array is a view of the kernels' memory (then the other functions may take them). */
  owns(...arrays: Float32Array[]): boolean;
  /** A resident scratch of n f32 (contents unspecified); give it back with `release`. */
  scratch(n: number): Float32Array;
  release(a: Float32Array): void;
  zero(a: Float32Array): void;
  /** S ← softmax(scale·S) over the visible keys, 0 past them; lse[r] = log Σ exp (−inf for a row with none). */
  softmax(S: Float32Array, rows: number, end: number, scale: number, vis0: number, lse: Float32Array): void;
  /** S ← exp(scale·S − lse[r]) over the visible keys, 0 past them. */
  probs(S: Float32Array, rows: number, end: number, scale: number, vis0: number, lse: Float32Array): void;
  /** dP ← P ⊙ (dP − Σ_c dOut[r][c]·out[r][c])·scale; dOut/out rows of d. */
  dscores(
    P: Float32Array,
    dP: Float32Array,
    dOut: Float32Array,
    out: Float32Array,
    rows: number,
    end: number,
    d: number,
    scale: number,
  ): void;
  /**
   * Runs groups of a tiled attention (`attentionGroupsJob`'s arguments) on the calling thread, its products on
   * `sgemm` (cblas_sgemm as koffi binds it, row-major, on one library thread).
   */
  groups(args: readonly number[], sgemm: TypedSgemm): void;
  /**
   * `softmax`, `probs` and `dscores` started on a worker thread where the kernels have one, returning the wait
   * for it; the caller goes on meanwhile (with BLAS products: the two overlap). Without workers they run at
   * once and the wait does nothing. One job at a time: starting another, or any kernel that splits across the
   * workers, waits for the previous one first.
   */
  start: {
    softmax(S: Float32Array, rows: number, end: number, scale: number, vis0: number, lse: Float32Array): () => void;
    probs(S: Float32Array, rows: number, end: number, scale: number, vis0: number, lse: Float32Array): () => void;
    dscores(
      P: Float32Array,
      dP: Float32Array,
      dOut: Float32Array,
      out: Float32Array,
      rows: number,
      end: number,
      d: number,
      scale: number,
    ): () => void;
  };
}

/**
 * cblas_sgemm on the worker threads, for the native backend: each thread runs its own single-threaded product
 * (a part of one, split by the caller) on arrays resident in the kernels' memory, which every thread sees at
 * the same addresses. Node only (the workers load the library through koffi).
 */
export interface WorkerBlas {
  /** Worker threads (the caller not counted). */
  readonly workers: number;
  /**
   * Loads koffi (from the module path given) and the BLAS library (a path or soname: the one the caller loaded,
   * so the process keeps one copy) on every worker. Returns null when all did, else why not.
   */
  load(koffiPath: string, library: string): string | null;
  /**
   * After `load`: oneDNN (a path or soname) and the OpenMP runtime it links, each worker's OpenMP team set to one
   * thread. Returns null when all loaded, else why not.
   */
  loadOneDnn(library: string, openmp: string): string | null;
  /** Whether every array is a view of the kernels' memory. */
  owns(...arrays: ArrayBufferView[]): boolean;
  /** Whether a job from `attentionTiles.start` is still running on the first worker (it is then not free). */
  busy(): boolean;
  /**
   * Starts C = op(A)·op(B) + beta·C (row-major, alpha 1) on worker `index`, with A, B, C at element offsets into
   * resident arrays; returns the wait for it, which throws if the call failed. One job per worker at a time.
   */
  sgemm(
    index: number,
    transA: boolean,
    transB: boolean,
    m: number,
    n: number,
    k: number,
    a: Float32Array,
    aOffset: number,
    lda: number,
    b: Float32Array,
    bOffset: number,
    ldb: number,
    beta: number,
    c: Float32Array,
    cOffset: number,
    ldc: number,
  ): () => void;
  /**
   * Starts groups of a tiled attention (`attentionGroupsJob`'s arguments, see wasm/attention-groups.ts) on worker
   * `index`, its products on that worker's BLAS; returns the wait for it, which throws if the job failed.
   */
  attentionGroups(index: number, args: readonly number[]): () => void;
  /** As `sgemm` with bf16 A and B (oneDNN's dnnl_gemm_bf16bf16f32, after `loadOneDnn`). */
  gemmBf16(
    index: number,
    transA: boolean,
    transB: boolean,
    m: number,
    n: number,
    k: number,
    a: Uint16Array,
    aOffset: number,
    lda: number,
    b: Uint16Array,
    bOffset: number,
    ldb: number,
    beta: number,
    c: Float32Array,
    cOffset: number,
    ldc: number,
  ): () => void;
  /**
   * Microseconds the threads poll before sleeping between jobs (see ThreadPool.setSpin); 0 = sleep at once, and
   * a worker polling now stops (before a call that runs on a library's own threads, which need the cores).
   */
  setSpin(micros: number): void;
  /** The poll time set last. */
  readonly spinMicros: number;
}

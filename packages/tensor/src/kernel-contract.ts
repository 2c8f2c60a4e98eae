// The kernel contract (docs/ARCHITECTURE.md §Kernels): the `Kernels` interface every backend implements and
// the shapes its kernels take. Types only, so kernels can name them without loading the registry (backend.ts).
//
// Every kernel works on CONTIGUOUS arrays given as kernel arguments (what the owning backend's `view` returns;
// typed arrays on host-visible backends). Sizes are passed explicitly, so a device backend never needs the
// array length. Unless a kernel says otherwise, outputs are fully overwritten, outputs never alias inputs,
// and f32 math follows IEEE single precision with the formulas given here (js computes elementwise
// functions in double and rounds once on store; device backends may differ by a few ulp).
import type { DType, StorageArray } from "./dtype.js";

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

/**
 * Decode attention over ragged per-sequence caches (attentionDecodeRagged): `batch` sequences, one query row each.
 * Sequence b's keys and values are its own arrays [kvHeads][capacities[b]][headDim], of which the first
 * lengths[b] positions are read (0 ≤ lengths[b] ≤ capacities[b]). Only those are touched, so an array may end
 * after the last head's lengths[b] positions ((kvHeads − 1)·capacities[b]·headDim + lengths[b]·headDim elements):
 * a view that starts inside a buffer (a left-padded row's first real position) is valid.
 */
export interface RaggedDecodeShape {
  batch: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  scale: number;
  lengths: readonly number[];
  capacities: readonly number[];
}

export interface Kernels<T extends KernelArrays = HostArrays> {
  matmul(a: T["f32"], b: T["f32"], out: T["f32"], shape: MatmulShape): void;
  matmulBf16B(a: T["f32"], bBits: T["u16"], out: T["f32"], shape: MatmulShape): void;
  rmsNorm(
    x: T["f32"],
    w: T["f32"],
    out: T["f32"],
    rstd: T["f32"],
    dim: number,
    eps: number,
    zeroCentered: boolean,
  ): void;
  /**
   * RMSNorm backward from the forward's rstd: with x̂ = x·rstd and w' = w (or 1 + w),
   * dx = rstd·(g·w' − x̂·mean(g·w'·x̂)) and, when `dw` is given, dw = Σ_rows g·x̂ (overwritten).
   */
  rmsNormBackward(
    x: T["f32"],
    w: T["f32"],
    rstd: T["f32"],
    g: T["f32"],
    dx: T["f32"],
    dw: T["f32"] | null,
    dim: number,
    zeroCentered: boolean,
  ): void;
  crossEntropyForward(
    logits: T["f32"],
    targets: T["i32"],
    loss: T["f32"],
    lse: T["f32"],
    rows: number,
    vocab: number,
    ignoreIndex: number,
  ): void;
  crossEntropyBackward(
    logits: T["f32"],
    targets: T["i32"],
    lse: T["f32"],
    gradLoss: T["f32"],
    dlogits: T["f32"],
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
    logits: T["f32"],
    probs: T["f32"],
    lse: T["f32"],
    rows: number,
    vocab: number,
    rowScale?: T["f32"] | null,
  ): void;
  /**
   * Full-vocabulary KL per row between S = softmax(scale·student) and P = softmax(scale·teacher)
   * (teacher row `teacherRows[r]`, or r when null): forward KL(P‖S) or reverse KL(S‖P) into `loss`,
   * the logsumexps of the scaled rows into `lseS`/`lseT`, and, when `grad` is given, the direction
   * of the gradient w.r.t. scale·student per row: S − P (forward), S·(log S − log P − KL) (reverse),
   * times gradRowScale[r] when given.
   */
  klDivergenceRows(
    student: T["f32"],
    teacher: T["f32"],
    teacherRows: T["i32"] | null,
    grad: T["f32"] | null,
    loss: T["f32"],
    lseS: T["f32"],
    lseT: T["f32"],
    shape: KlRowsShape,
    gradRowScale?: T["f32"] | null,
  ): void;
  /**
   * Rotate-half RoPE (transformers apply_rotary_pos_emb) on the first rotaryDim dims of every head row:
   * out[i] = x[i]·cos − x[i+h]·sin, out[i+h] = x[i+h]·cos + x[i]·sin for i < h = rotaryDim/2, the rest
   * copied. `out` may be `x` (in place).
   */
  ropeForward(x: T["f32"], cos: Float32Array, sin: Float32Array, out: T["f32"], shape: RopeShape): void;
  /** Gradient of ropeForward: the rotation by −θ (its transpose) applied to dOut. `dx` may be `dOut`. */
  ropeBackward(dOut: T["f32"], cos: Float32Array, sin: Float32Array, dx: T["f32"], shape: RopeShape): void;
  /** out = silu(gate)·up; σ(gate) saved in `sig` for the backward. */
  swigluForward(gate: T["f32"], up: T["f32"], out: T["f32"], sig: T["f32"]): void;
  swigluBackward(gate: T["f32"], up: T["f32"], sig: T["f32"], dOut: T["f32"], dGate: T["f32"], dUp: T["f32"]): void;
  /** One AdamW step in place (torch.optim.AdamW single-tensor semantics, see optim.ts). */
  adamwUpdate(param: T["f32"], grad: T["f32"], expAvg: T["f32"], expAvgSq: T["f32"], step: AdamWStep): void;
  /** q [B,H,tq,D], k/v [B,Hkv,tk,D], keyMask [B,tk] (1 keep, 0 pad) or null → out [B,H,tq,D], lse [B,H,tq]. */
  attentionForward(
    q: T["f32"],
    k: T["f32"],
    v: T["f32"],
    keyMask: Uint8Array | null,
    out: T["f32"],
    lse: T["f32"],
    shape: AttentionShape,
  ): void;
  attentionBackward(
    q: T["f32"],
    k: T["f32"],
    v: T["f32"],
    keyMask: Uint8Array | null,
    out: T["f32"],
    lse: T["f32"],
    dOut: T["f32"],
    dq: T["f32"],
    dk: T["f32"],
    dv: T["f32"],
    shape: AttentionShape,
  ): void;

  /**
   * q/out [batch][heads][1][headDim], keys[b]/values[b] per RaggedDecodeShape, lse [batch][heads]: what
   * attentionForward computes for each sequence alone (tq = 1 over its lengths[b] keys), read in place from
   * each sequence's own buffers. A row's result must not depend on the other rows or on its buffer's capacity
   * (the batching scheduler's determinism rests on it); a sequence of length 0 gets 0 and lse −∞.
   */
  attentionDecodeRagged(
    q: T["f32"],
    keys: readonly T["f32"][],
    values: readonly T["f32"][],
    out: T["f32"],
    lse: T["f32"],
    shape: RaggedDecodeShape,
  ): void;

  // ---- generic kernels: everything an op used to loop over on the host ----

  /** out[i] = f(x[i]) for i < n, f per `UnaryOp` (see its doc). `out` may be `x` (in place). */
  unary(op: UnaryOp, x: T["f32"], out: T["f32"], n: number): void;
  /**
   * dx[i] = g[i] · f'(x[i]) for i < n, with y = f(x) from the forward (formulas per `UnaryOp`; some use y:
   * exp → y, sqrt → 0.5/y, rsqrt → −0.5·y³, tanh → 1 − y², sigmoid → y·(1 − y)).
   */
  unaryBackward(op: UnaryOp, x: T["f32"], y: T["f32"], g: T["f32"], dx: T["f32"], n: number): void;
  /**
   * out[i] = a[ia] ∘ b[ib] over the row-major index i of `shape.shape`, where ia = Σ_d idx_d·aStrides[d] and
   * likewise ib (stride 0 on broadcast dims; a contiguous operand has the row-major strides of `shape`).
   * `out` may be `a` or `b` when that operand is contiguous with the output's shape (in-place update).
   * Ops per `BinaryOp`.
   */
  binary(op: BinaryOp, a: T["f32"], b: T["f32"], out: T["f32"], shape: BinaryShape): void;
  /** out[i] = x[i] ∘ s (or s ∘ x[i] when `scalarLeft`) for i < n. `out` may be `x`. */
  binaryScalar(op: BinaryOp, x: T["f32"], s: number, out: T["f32"], n: number, scalarLeft: boolean): void;
  /** out[i] = cond[i] ≠ 0 ? a[i] : b[i] for i < n (all f32, same length; broadcast by the op with `copy`). */
  where(cond: T["f32"], a: T["f32"], b: T["f32"], out: T["f32"], n: number): void;
  /** out[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i] (NaN passes through); lo/hi may be ±Infinity. */
  clamp(x: T["f32"], out: T["f32"], n: number, lo: number, hi: number): void;
  /**
   * x viewed as [outer][axisLen][inner] → out [outer][inner]: sum, max or min over the middle axis.
   * sum accumulates in f32 in index order j = 0..axisLen−1 (out starts at 0); max/min start at ∓Infinity and
   * propagate NaN (a NaN element makes the result NaN). axisLen 0 gives 0 / −Infinity / +Infinity.
   */
  reduce(op: ReduceOp, x: T["f32"], out: T["f32"], outer: number, axisLen: number, inner: number): void;
  /** x [outer][axisLen][inner] → out (i32) [outer][inner]: index of the max (first on ties; the first NaN wins). */
  argmax(x: T["f32"], out: T["i32"], outer: number, axisLen: number, inner: number): void;
  /**
   * Row-wise over `rows` rows of `n`: mode "softmax": out = exp(x − max)/Σ exp(x − max); mode "logSoftmax":
   * out = x − (max + log Σ exp(x − max)).
   */
  softmax(mode: SoftmaxMode, x: T["f32"], out: T["f32"], rows: number, n: number): void;
  /**
   * Gradient from the forward's output y and the upstream g, per row: "softmax": dx = y·(g − Σ g·y);
   * "logSoftmax": dx = g − exp(y)·Σ g.
   */
  softmaxBackward(mode: SoftmaxMode, y: T["f32"], g: T["f32"], dx: T["f32"], rows: number, n: number): void;
  /**
   * Strided copy of any dtype (x and out have the same element type): for every row-major index (i_0..i_r−1)
   * of `shape.shape`, out[dstOffset + Σ i_d·dstStrides[d]] = x[srcOffset + Σ i_d·srcStrides[d]]. Covers
   * permute (permuted source strides), narrow/slice (source offset), broadcastTo (stride 0) and concat
   * (destination offset and strides of the larger output). Elements of `out` not addressed are left as they are.
   */
  copy(x: T["any"], out: T["any"], shape: CopyShape): void;
  /**
   * Embedding rows: out[i·rowLen + j] = widen(table[ids[i]·rowLen + j]) for i < count, j < rowLen, table of
   * dtype `shape.dtype` (f32, or bf16/f16 bits widened to f32). Indices are checked by the op (0 ≤ id < tableRows).
   */
  gatherRows(table: T["any"], ids: T["i32"], out: T["f32"], shape: GatherRowsShape): void;
  /** out[ids[i]·rowLen + j] += src[i·rowLen + j] in order i = 0..count−1 (repeated ids accumulate). */
  scatterAddRows(src: T["f32"], ids: T["i32"], out: T["f32"], count: number, rowLen: number): void;
  /**
   * torch.gather along an axis: x [outer][n][inner], index (i32) and out [outer][k][inner]:
   * out[(o·k + j)·inner + i] = x[(o·n + index[(o·k + j)·inner + i])·inner + i]. Indices checked by the op.
   */
  gatherAxis(x: T["f32"], index: T["i32"], out: T["f32"], outer: number, n: number, k: number, inner: number): void;
  /** The gradient of gatherAxis: dx[(o·n + index[p])·inner + i] += g[p] for every p = (o·k + j)·inner + i, in order. */
  scatterAddAxis(g: T["f32"], index: T["i32"], dx: T["f32"], outer: number, n: number, k: number, inner: number): void;
  /**
   * Convert n elements from dtype `from` to `to` (dtype.ts semantics: bf16/f16 round to nearest even from f32,
   * widen exactly; i32 → float rounds to f32; float → i32 truncates toward zero like torch .to(int32)).
   */
  cast(x: T["any"], out: T["any"], n: number, from: DType, to: DType): void;
  /** out[i] = value + i·step for i < n, stored in `out`'s dtype (f32 or i32 — i32 truncates; for bf16/f16 the op casts). */
  fill(out: T["any"], n: number, value: number, step: number, dtype: DType): void;
}

/** Element types of a backend's kernel arguments: typed arrays on host-visible backends. */
export interface KernelArrays {
  f32: unknown;
  i32: unknown;
  u16: unknown;
  /** An argument of any dtype (copy, cast, fill, gatherRows' table). */
  any: unknown;
}

export interface HostArrays extends KernelArrays {
  f32: Float32Array;
  i32: Int32Array;
  u16: Uint16Array;
  any: StorageArray;
}

/**
 * Elementwise functions (the js reference computes in double, rounds to f32 on store):
 * neg −x; exp; log; sqrt; rsqrt 1/√x; tanh; sigmoid 1/(1+e^−x); silu x/(1+e^−x); gelu 0.5x(1+erf(x/√2));
 * geluTanh 0.5x(1+tanh(√(2/π)(x+0.044715x³))); relu x>0?x:0 (derivative 0 at 0); softplus x>20 ? x :
 * log1p(e^x) (torch beta=1, threshold=20); abs (derivative sign(x), 0 at 0); sin; cos.
 */
export type UnaryOp =
  | "neg"
  | "exp"
  | "log"
  | "sqrt"
  | "rsqrt"
  | "tanh"
  | "sigmoid"
  | "silu"
  | "gelu"
  | "geluTanh"
  | "relu"
  | "softplus"
  | "abs"
  | "sin"
  | "cos";

/**
 * a ∘ b: add, sub, mul, div, pow (a ** b; pow with the scalar 2 is a·a), maximum (a ≥ b ? a : b; with a
 * scalar right operand a > s ? a : s), minimum (a ≤ b ? a : b; scalar: a < s ? a : s), and comparisons
 * eq ne lt le gt ge giving 1 or 0 (as f32).
 */
export type BinaryOp =
  | "add"
  | "sub"
  | "mul"
  | "div"
  | "pow"
  | "maximum"
  | "minimum"
  | "eq"
  | "ne"
  | "lt"
  | "le"
  | "gt"
  | "ge";

export type ReduceOp = "sum" | "max" | "min";
export type SoftmaxMode = "softmax" | "logSoftmax";

export interface BinaryShape {
  /** The output shape (row-major, contiguous). */
  shape: readonly number[];
  /** Element strides of a and b per output dim (0 where broadcast). */
  aStrides: readonly number[];
  bStrides: readonly number[];
}

export interface CopyShape {
  shape: readonly number[];
  srcOffset: number;
  srcStrides: readonly number[];
  dstOffset: number;
  dstStrides: readonly number[];
}

export interface GatherRowsShape {
  count: number;
  rowLen: number;
  tableRows: number;
  /** The table's dtype (f32, bf16 or f16). */
  dtype: DType;
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

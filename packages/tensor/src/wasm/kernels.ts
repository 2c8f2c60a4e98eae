// createWasmKernels: instantiates the embedded SIMD module on one WebAssembly.Memory (shared when
// threads > 1), copies inputs in, splits output rows among the caller and the workers, copies results out.
import type { KlRowsShape, RaggedDecodeShape, RopeShape } from "../backend.js";
import { BackendError, IndexError, ShapeError } from "../errors.js";
import { decodeBase64 } from "./base64.js";
import { relaxedSimdSupported, sharedMemorySupported, wasmSimdSupported } from "./features.js";
import { CallFrame, INITIAL_DATA_BYTES, SCALAR_SLOT, WORK_COUNTER, WasmHeap, alignUp, pagesFor } from "./heap.js";
import {
  ATTN_QB,
  GEMM_FLAG_ACCUMULATE,
  GEMM_FLAG_BF16_B,
  GEMM_FLAG_TRANS_A,
  GEMM_FLAG_TRANS_B,
  GEMM_MR,
  GEMM_SCRATCH_BYTES,
  WASM_MAX_PAGES,
  WASM_RELAXED_LOCAL,
  WASM_RELAXED_SHARED,
  WASM_SIMD_LOCAL,
  WASM_SIMD_SHARED,
} from "./kernels.generated.js";
import { ThreadPool } from "./thread-pool.js";
import type {
  AdamWStep,
  AttentionShape,
  AttentionTiles,
  MatmulShape,
  WasmKernelOptions,
  WasmKernels,
  WorkerBlas,
} from "./types.js";
import { attentionGroupsJob, sgemmOnMemory } from "./attention-groups.js";
import type { JsWorkerOp, WorkerOp } from "./worker-source.js";

/** Below this many flops a matmul runs on the calling thread only (a worker round trip costs ~10–50 µs). */
const GEMM_PARALLEL_FLOPS = 1 << 22;
/**
 * Skinny GEMMs (the rank-r adapter products of LoRA: one of m, n, k at most 16) split worse than
 * their flops suggest. Back to back (bench/gemm-split.ts, split vs unsplit on one 2-thread instance)
 * the k = 16 products lost 0–13% split at 4–11 MFLOP and the n = 16 ones gained; inside a LoRA step,
 * where the worker finds the operands in the other core's cache, splitting the n = 16 ones too cost
 * ~13 ms per step (57 vs 44 ms for all rank-16 GEMMs). So they need this many flops (2048 rows of 256).
 */
const GEMM_PARALLEL_FLOPS_SKINNY = 1 << 24;
const GEMM_SKINNY_DIM = 16;
/**
 * Every chunk of the tiled GEMM packs its own copy of B, so a part needs enough rows to pay for it:
 * m = 16 (the rank-r weight gradient dA = duᵀ·x) split into 8-row parts ran 12–23% slower on a loaded
 * machine (and at best 11–23% faster on an idle one).
 */
const GEMM_MIN_ROWS_PER_THREAD = 32;
/** Below this many elements a row kernel runs on the calling thread only. */
const ROWS_PARALLEL_ELEMENTS = 1 << 16;
/**
 * Kernels that only stream their data (a few flops per element: RMSNorm forward and backward) gain
 * nothing from a second thread until the copies into and out of the heap are amortised: measured with
 * bench/rows-split.ts, 512×256 split ran 15% slower, 512×1024 12–26% faster.
 */
const STREAM_PARALLEL_ELEMENTS = 1 << 18;
/** RoPE is lighter still: in place on 512×1024 values split was 20% slower. */
const ROPE_PARALLEL_ELEMENTS = 1 << 20;

/**
 * Streaming kernels on resident arrays (elementwise binary ops, strided copies, bf16 conversion; RMSNorm and
 * RoPE when every operand is resident) split across threads from this many elements: with nothing to copy
 * into the heap first, a worker round trip (~10–30 µs) pays for itself from about this size (the 512×256
 * activations of the reference decoder: 131 K elements).
 */
const RESIDENT_STREAM_PARALLEL_ELEMENTS = 1 << 16;

type Exports = Record<Exclude<WorkerOp, "" | JsWorkerOp>, (...args: number[]) => void> &
  Record<"zero_fill", (...args: number[]) => void>;

/** Op codes of the module's binary2d (scripts/wat/elementwise.mjs BINARY_OPS). */
const BINARY2D_OPS: Record<string, number> = { add: 0, sub: 1, mul: 2, div: 3 };

/**
 * Dims of a strided elementwise walk with adjacent dims merged where every operand steps through them
 * as one (stride[d] = stride[d+1]·n[d+1]) and size-1 dims dropped. Null when a stride is negative.
 */
function mergeDims(shape: readonly number[], strides: readonly (readonly number[])[]): [number[], number[][]] | null {
  const n: number[] = [];
  const st: number[][] = strides.map(() => []);
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1) continue;
    for (const s of strides) if (s[d] < 0) return null;
    const last = n.length - 1;
    if (last >= 0 && strides.every((s, i) => st[i][last] === s[d] * shape[d])) {
      n[last] *= shape[d];
      for (let i = 0; i < strides.length; i++) st[i][last] = strides[i][d];
    } else {
      n.push(shape[d]);
      for (let i = 0; i < strides.length; i++) st[i].push(strides[i][d]);
    }
  }
  return [n, st];
}

/** The largest element index a strided walk touches (offset included). */
function lastIndex(offset: number, n: readonly number[], st: readonly number[]): number {
  let i = offset;
  for (let d = 0; d < n.length; d++) i += (n[d] - 1) * st[d];
  return i;
}

async function defaultThreads(): Promise<number> {
  let cores = 1;
  const nav = (globalThis as { navigator?: { hardwareConcurrency?: number } }).navigator;
  const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
  if (typeof proc?.versions?.node === "string") {
    const os = await import("node:os");
    cores = typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length;
  } else if (nav?.hardwareConcurrency) {
    cores = nav.hardwareConcurrency;
  }
  return Math.max(1, Math.min(2, cores));
}

function checkCount(op: string, name: string, v: number): void {
  if (!Number.isInteger(v) || v < 0 || v > 0x7fffffff)
    throw new ShapeError(`${op}: ${name} must be a non-negative integer, got ${v}`);
}

/** Elements a ragged-decode sequence's key (or value) array must hold: every head's first n positions. */
function raggedSpan(kvHeads: number, capacity: number, n: number, dim: number): number {
  return (kvHeads - 1) * capacity * dim + n * dim;
}

function checkLength(op: string, name: string, arr: ArrayLike<number>, need: number): void {
  if (arr.length < need) throw new ShapeError(`${op}: ${name} has ${arr.length} elements, needs at least ${need}`);
}

class Kernels implements WasmKernels {
  private disposed = false;
  /** The wait for a job started with startOnWorker and not yet joined. */
  private pending: (() => void) | null = null;
  /** Benchmark probe only (bench/gemm-split.ts, bench/rows-split.ts): "never" keeps every call on the calling thread. */
  split: "auto" | "never" = "auto";

  constructor(
    readonly threads: number,
    readonly relaxedSimd: boolean,
    private readonly exports: Exports,
    private readonly heap: WasmHeap,
    private readonly pool: ThreadPool | null,
  ) {}

  /** Runs `op(...argsFor(t))` on threads t = 0 (the caller) .. parts-1 (workers t-1) and waits for all. */
  private runOnThreads(op: WorkerOp, parts: number, argsFor: (t: number) => number[]): void {
    if (parts > 1) this.settle();
    for (let t = 1; t < parts; t++) this.pool!.start(t - 1, op, argsFor(t));
    let error: unknown = null;
    try {
      this.exports[op as Exclude<WorkerOp, "" | JsWorkerOp>](...argsFor(0));
    } catch (err) {
      error = err;
    }
    // Always join every worker before returning: they write into the shared memory.
    for (let t = 1; t < parts; t++) {
      try {
        this.pool!.join(t - 1);
      } catch (err) {
        error ??= err;
      }
    }
    if (error) throw error;
  }

  /**
   * Starts `op(...args)` on the first worker and returns the function that waits for it; without workers it
   * runs here and now and the returned function does nothing. Until that wait, the caller may run anything
   * that does not use the workers (BLAS calls): the two overlap. Every call that splits across the workers
   * waits for a pending job first.
   */
  private startOnWorker(op: WorkerOp, args: number[]): () => void {
    if (!this.pool || this.split === "never") {
      this.exports[op as Exclude<WorkerOp, "" | JsWorkerOp>](...args);
      return () => {};
    }
    this.settle();
    this.pool.start(0, op, args);
    let joined = false;
    const join = () => {
      if (joined) return;
      joined = true;
      this.pending = null;
      this.pool!.join(0);
    };
    this.pending = join;
    return join;
  }

  /** Waits for a job started by startOnWorker, if any. */
  private settle(): void {
    this.pending?.();
  }

  /** Static split of rows [0, rows) into at most `parts` ranges (sizes rounded up to `align`). */
  private splitRows(
    op: WorkerOp,
    rows: number,
    parts: number,
    align: number,
    args: (r0: number, r1: number, t: number) => number[],
  ) {
    const per = Math.ceil(rows / parts / align) * align;
    const ranges: [number, number][] = [];
    for (let start = 0; start < rows; start += per) ranges.push([start, Math.min(rows, start + per)]);
    this.runOnThreads(op, ranges.length, (t) => args(ranges[t][0], ranges[t][1], t));
  }

  private partsFor(work: number, threshold: number, rows: number, align: number): number {
    if (!this.pool || this.split === "never" || work < threshold) return 1;
    return Math.max(1, Math.min(this.threads, Math.ceil(rows / align)));
  }

  /** Threads for a tiled GEMM over `rows` output rows (see GEMM_PARALLEL_FLOPS_SKINNY, GEMM_MIN_ROWS_PER_THREAD). */
  private gemmParts(rows: number, m: number, n: number, k: number, flops: number): number {
    if (!this.pool || this.split === "never") return 1;
    if (flops < (Math.min(m, n, k) <= GEMM_SKINNY_DIM ? GEMM_PARALLEL_FLOPS_SKINNY : GEMM_PARALLEL_FLOPS)) return 1;
    return Math.max(1, Math.min(this.threads, Math.floor(rows / GEMM_MIN_ROWS_PER_THREAD)));
  }

  /** Runs `fn` with a CallFrame: foreign outputs are copied back and temporaries freed after it. */
  private frame<T>(fn: (f: CallFrame) => T): T {
    const f = new CallFrame(this.heap);
    try {
      const result = fn(f);
      f.done();
      return result;
    } catch (err) {
      f.discard();
      throw err;
    }
  }

  /**
   * `binary` on resident arrays for add/sub/mul/div when, after merging dims, the walk is rows of a
   * contiguous output with each operand contiguous or broadcast along the row (the shapes of residual adds,
   * bias and scale broadcasts, gradient sums). Returns false (nothing done) otherwise: the caller falls back.
   */
  binaryResident(
    op: string,
    a: Float32Array,
    b: Float32Array,
    out: Float32Array,
    shape: readonly number[],
    aStrides: readonly number[],
    bStrides: readonly number[],
  ): boolean {
    const code = BINARY2D_OPS[op];
    if (code === undefined || this.disposed) return false;
    const heap = this.heap;
    if (!heap.owns(a) || !heap.owns(b) || !heap.owns(out)) return false;
    let size = 1;
    for (const d of shape) size *= d;
    if (size === 0) return true;
    const merged = mergeDims(shape, [aStrides, bStrides]);
    if (!merged || merged[0].length > 2) return false;
    const [n, [sa, sb]] = merged;
    while (n.length < 2) {
      n.unshift(1);
      sa.unshift(0);
      sb.unshift(0);
    }
    if (sa[1] > 1 || sb[1] > 1) return false;
    if (out.length < size || lastIndex(0, n, sa) >= a.length || lastIndex(0, n, sb) >= b.length)
      throw new ShapeError(`binary ${op}: an operand is shorter than its strides over [${shape.join(", ")}] reach`);
    this.binary2d(code, a.byteOffset, b.byteOffset, out.byteOffset, n[0], n[1], sa, sb);
    return true;
  }

  /**
   * `binaryScalar` on resident arrays for add/sub/mul/div with a scalar that is an f32 value (then the module's
   * f32 arithmetic gives the js kernel's bits: a double result of two f32 operands rounds to the same f32).
   * Returns false (nothing done) otherwise.
   */
  binaryScalarResident(
    op: string,
    x: Float32Array,
    s: number,
    out: Float32Array,
    n: number,
    scalarLeft: boolean,
  ): boolean {
    const code = BINARY2D_OPS[op];
    if (code === undefined || this.disposed || Math.fround(s) !== s) return false;
    if (!this.heap.owns(x) || !this.heap.owns(out)) return false;
    checkLength(`binaryScalar ${op}`, "x", x, n);
    checkLength(`binaryScalar ${op}`, "out", out, n);
    if (n === 0) return true;
    this.heap.f32()[SCALAR_SLOT >>> 2] = s;
    if (scalarLeft) this.binary2d(code, SCALAR_SLOT, x.byteOffset, out.byteOffset, 1, n, [0, 0], [0, 1]);
    else this.binary2d(code, x.byteOffset, SCALAR_SLOT, out.byteOffset, 1, n, [0, 1], [0, 0]);
    return true;
  }

  /** binary2d over rows [0, rows) of `inner` elements, split across threads (rows, or the columns of one row). */
  private binary2d(
    code: number,
    a: number,
    b: number,
    out: number,
    rows: number,
    inner: number,
    sa: readonly number[],
    sb: readonly number[],
  ): void {
    const size = rows * inner;
    const parts = this.partsFor(size, RESIDENT_STREAM_PARALLEL_ELEMENTS, size, 1);
    if (parts > 1 && rows === 1) {
      // One long row (same-shape operands merge into one): split its columns, each part a row of its own.
      const per = alignUp(Math.ceil(inner / parts), 16);
      const ranges: [number, number][] = [];
      for (let c0 = 0; c0 < inner; c0 += per) ranges.push([c0, Math.min(inner, c0 + per)]);
      this.runOnThreads("binary2d", ranges.length, (t) => {
        const [c0, c1] = ranges[t];
        return [code, a + c0 * sa[1] * 4, b + c0 * sb[1] * 4, out + c0 * 4, 1, c1 - c0, 0, sa[1], 0, sb[1], 0, 1];
      });
    } else {
      this.splitRows("binary2d", rows, Math.min(parts, rows), 1, (r0, r1) => [
        code,
        a,
        b,
        out,
        rows,
        inner,
        sa[0],
        sa[1],
        sb[0],
        sb[1],
        r0,
        r1,
      ]);
    }
  }

  /**
   * The `copy` kernel on resident arrays of one element type, for walks of rank ≤ 4 after merging dims
   * (contiguous runs with memory.copy). Returns false otherwise (nothing done).
   */
  copyResident(
    x: Float32Array | Int32Array | Uint16Array,
    out: Float32Array | Int32Array | Uint16Array,
    shape: readonly number[],
    srcOffset: number,
    srcStrides: readonly number[],
    dstOffset: number,
    dstStrides: readonly number[],
  ): boolean {
    if (this.disposed) return false;
    const heap = this.heap;
    const es = x.BYTES_PER_ELEMENT;
    if (out.BYTES_PER_ELEMENT !== es || !heap.owns(x) || !heap.owns(out)) return false;
    let size = 1;
    for (const d of shape) size *= d;
    if (size === 0) return true;
    const merged = mergeDims(shape, [srcStrides, dstStrides]);
    if (!merged || merged[0].length > 4) return false;
    const [n, [ss, ds]] = merged;
    while (n.length < 4) {
      n.unshift(1);
      ss.unshift(0);
      ds.unshift(0);
    }
    if (
      lastIndex(srcOffset, n, ss) >= x.length ||
      lastIndex(dstOffset, n, ds) >= out.length ||
      srcOffset < 0 ||
      dstOffset < 0
    )
      throw new ShapeError(`copy: the strides over [${shape.join(", ")}] reach past the source or destination`);
    // Threads take ranges of the outermost dim longer than 1 (the run itself for one contiguous copy).
    const d = Math.max(
      0,
      n.findIndex((len) => len > 1),
    );
    const parts = this.partsFor(size, RESIDENT_STREAM_PARALLEL_ELEMENTS, n[d], d === 3 ? 16 : 1);
    const src = x.byteOffset + srcOffset * es;
    const dst = out.byteOffset + dstOffset * es;
    this.splitRows("copy4d", n[d], parts, d === 3 ? 16 : 1, (i0, i1) => {
      const len = n.slice();
      len[d] = i1 - i0;
      return [
        src + i0 * ss[d] * es,
        dst + i0 * ds[d] * es,
        es,
        ...len,
        ss[0] * es,
        ss[1] * es,
        ss[2] * es,
        ss[3] * es,
        ds[0] * es,
        ds[1] * es,
        ds[2] * es,
        ds[3] * es,
      ];
    });
    return true;
  }

  /**
   * bf16 bits → f32 (`"widen"`) or f32 → bf16 bits rounded to nearest even (`"round"`, NaN kept quiet) for
   * n elements of resident arrays. Returns false (nothing done) when either is not resident.
   */
  bf16Resident(
    mode: "widen" | "round",
    src: Float32Array | Uint16Array,
    dst: Float32Array | Uint16Array,
    n: number,
  ): boolean {
    if (this.disposed || !this.heap.owns(src) || !this.heap.owns(dst)) return false;
    checkLength("bf16 conversion", "source", src, n);
    checkLength("bf16 conversion", "destination", dst, n);
    if (n === 0) return true;
    const parts = this.partsFor(n, RESIDENT_STREAM_PARALLEL_ELEMENTS, n, 8);
    this.splitRows(mode === "widen" ? "bf16_widen" : "bf16_round", n, parts, 8, (i0, i1) => [
      src.byteOffset,
      dst.byteOffset,
      i0,
      i1,
    ]);
    return true;
  }

  /**
   * The softmax pieces of attention for products that run elsewhere (the native backend's BLAS), on resident
   * arrays (see scripts/wat/attention-tiles.mjs and backends/attention-gemm.ts).
   */
  readonly attentionTiles: AttentionTiles = {
    owns: (...arrays) => !this.disposed && arrays.every((a) => this.heap.owns(a)),
    scratch: (n) => {
      // alloc before buffer(): an alloc that grows the memory leaves an earlier buffer() at the old length.
      const offset = this.heap.alloc(n * 4, false);
      return new Float32Array(this.heap.buffer(), offset, n);
    },
    release: (a) => this.heap.release(a.byteOffset, a.length * 4),
    zero: (a) => this.heap.zero(a.byteOffset, a.length * 4),
    softmax: (S, rows, end, scale, vis0, lse) =>
      this.exports.attn_tile_softmax(S.byteOffset, rows, end, scale, vis0, lse.byteOffset),
    probs: (S, rows, end, scale, vis0, lse) =>
      this.exports.attn_tile_probs(S.byteOffset, rows, end, scale, vis0, lse.byteOffset),
    dscores: (P, dP, dOut, out, rows, end, d, scale) =>
      this.exports.attn_tile_dscores(P.byteOffset, dP.byteOffset, dOut.byteOffset, out.byteOffset, rows, end, d, scale),
    groups: (args, sgemm) => {
      this.live("attentionGroups");
      const memory = this.heap.buffer();
      attentionGroupsJob(args, memory, (...a) => sgemmOnMemory(memory, sgemm, ...a), this.exports);
    },
    start: {
      softmax: (S, rows, end, scale, vis0, lse) =>
        this.startOnWorker("attn_tile_softmax", [S.byteOffset, rows, end, scale, vis0, lse.byteOffset]),
      probs: (S, rows, end, scale, vis0, lse) =>
        this.startOnWorker("attn_tile_probs", [S.byteOffset, rows, end, scale, vis0, lse.byteOffset]),
      dscores: (P, dP, dOut, out, rows, end, d, scale) =>
        this.startOnWorker("attn_tile_dscores", [
          P.byteOffset,
          dP.byteOffset,
          dOut.byteOffset,
          out.byteOffset,
          rows,
          end,
          d,
          scale,
        ]),
    },
  };

  private workerBlasApi: WorkerBlas | null | undefined;

  get workerBlas(): WorkerBlas | null {
    if (this.workerBlasApi === undefined) this.workerBlasApi = this.pool ? this.makeWorkerBlas(this.pool) : null;
    return this.workerBlasApi;
  }

  private makeWorkerBlas(pool: ThreadPool): WorkerBlas {
    return {
      workers: pool.size,
      load: (koffiPath, library) => this.loadOnWorkers(pool, "blas_load", koffiPath, library),
      loadOneDnn: (library, openmp) => this.loadOnWorkers(pool, "onednn_load", library, openmp),
      owns: (...arrays) => !this.disposed && arrays.every((a) => this.heap.owns(a)),
      busy: () => this.pending !== null,
      sgemm: (index, transA, transB, m, n, k, a, aOff, lda, b, bOff, ldb, beta, c, cOff, ldc) => {
        this.live("sgemm");
        const args = [transA ? 112 : 111, transB ? 112 : 111, m, n, k, a.byteOffset + aOff * 4, lda];
        pool.start(index, "sgemm", [...args, b.byteOffset + bOff * 4, ldb, beta, c.byteOffset + cOff * 4, ldc]);
        return this.joinLibraryCall(pool, index, `cblas_sgemm ${m}×${n}×${k}`);
      },
      gemmBf16: (index, transA, transB, m, n, k, a, aOff, lda, b, bOff, ldb, beta, c, cOff, ldc) => {
        this.live("gemmBf16");
        // oneDNN takes 'N' / 'T'.
        const args = [transA ? 84 : 78, transB ? 84 : 78, m, n, k, a.byteOffset + aOff * 2, lda];
        pool.start(index, "gemm_bf16", [...args, b.byteOffset + bOff * 2, ldb, beta, c.byteOffset + cOff * 4, ldc]);
        return this.joinLibraryCall(pool, index, `dnnl_gemm_bf16bf16f32 ${m}×${n}×${k}`);
      },
      attentionGroups: (index, args) => {
        this.live("attentionGroups");
        pool.start(index, "attn_groups", args);
        return this.joinLibraryCall(pool, index, "attention groups");
      },
      setSpin: (micros) => pool.setSpin(micros),
      get spinMicros() {
        return pool.spin;
      },
    };
  }

  private joinLibraryCall(pool: ThreadPool, index: number, what: string): () => void {
    return () => {
      try {
        pool.join(index);
      } catch {
        throw new BackendError(`native backend: ${what} failed on worker ${index}`);
      }
    };
  }

  /** Runs a worker's load op on two strings (written into the memory as UTF-8) on every worker. */
  private loadOnWorkers(
    pool: ThreadPool,
    op: "blas_load" | "onednn_load",
    first: string,
    second: string,
  ): string | null {
    const encoder = new TextEncoder();
    const firstBytes = encoder.encode(first);
    const secondBytes = encoder.encode(second);
    const bytes = Math.max(firstBytes.length + secondBytes.length, 1);
    const at = this.heap.alloc(bytes, false);
    try {
      const mem = new Uint8Array(this.heap.buffer(), at, bytes);
      mem.set(firstBytes, 0);
      mem.set(secondBytes, firstBytes.length);
      for (let w = 0; w < pool.size; w++) {
        this.settle();
        pool.start(w, op, [at, firstBytes.length, at + firstBytes.length, secondBytes.length]);
        try {
          pool.join(w);
        } catch {
          return `worker ${w} could not load ${first} or ${second}`;
        }
      }
      return null;
    } finally {
      this.heap.release(at, bytes);
    }
  }

  /** The heap these kernels run on (the wasm backend allocates resident tensors from it). */
  get wasmHeap(): WasmHeap {
    return this.heap;
  }

  private live(op: string): void {
    if (this.disposed) throw new BackendError(`wasm kernels: ${op} called after dispose()`);
  }

  matmul(a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape): void {
    this.gemm("matmul", a, b, false, out, shape);
  }

  matmulBf16B(a: Float32Array, bBits: Uint16Array, out: Float32Array, shape: MatmulShape): void {
    this.gemm("matmulBf16B", a, bBits, true, out, shape);
  }

  private gemm(
    op: string,
    a: Float32Array,
    b: Float32Array | Uint16Array,
    bf16: boolean,
    out: Float32Array,
    shape: MatmulShape,
  ): void {
    this.live(op);
    const { batch, m, n, k } = shape;
    for (const [name, v] of [
      ["batch", batch],
      ["m", m],
      ["n", n],
      ["k", k],
    ] as const)
      checkCount(op, name, v);
    const strideA = shape.batchStrideA ?? m * k;
    const strideB = shape.batchStrideB ?? k * n;
    checkCount(op, "batchStrideA", strideA);
    checkCount(op, "batchStrideB", strideB);
    const outLen = batch * m * n;
    const aLen = batch > 0 && m * k > 0 ? strideA * (batch - 1) + m * k : 0;
    const bLen = batch > 0 && k * n > 0 ? strideB * (batch - 1) + k * n : 0;
    checkLength(op, "A", a, aLen);
    checkLength(op, "B", b, bLen);
    checkLength(op, "out", out, outLen);
    if (outLen === 0) return;
    if (k === 0) {
      if (!shape.accumulate) out.fill(0, 0, outLen);
      return;
    }
    this.frame((f) => this.gemmStaged(f, a, b, bf16, out, shape, aLen, bLen, outLen, strideA, strideB));
  }

  private gemmStaged(
    f: CallFrame,
    a: Float32Array,
    b: Float32Array | Uint16Array,
    bf16: boolean,
    out: Float32Array,
    shape: MatmulShape,
    aLen: number,
    bLen: number,
    outLen: number,
    strideA: number,
    strideB: number,
  ): void {
    const { batch, m, n, k } = shape;
    const pa = f.stage(a, aLen, "in");
    const pb = f.stage(b, bLen, "in");
    const pc = f.stage(out, outLen, shape.accumulate ? "inout" : "out");
    const flags =
      (shape.transA ? GEMM_FLAG_TRANS_A : 0) |
      (shape.transB ? GEMM_FLAG_TRANS_B : 0) |
      (bf16 ? GEMM_FLAG_BF16_B : 0) |
      (shape.accumulate ? GEMM_FLAG_ACCUMULATE : 0);
    const rows = batch * m;
    if (m < GEMM_MR && k * 4 <= GEMM_SCRATCH_BYTES) {
      // Few output rows per matrix: a register tile would be mostly padding and packing B would cost as
      // much as using it, so stream B (scripts/wat/gemv.mjs). Threads split rows, or columns when the
      // rows are too few.
      const parts = this.pool && this.split === "auto" && 2 * outLen * k >= GEMM_PARALLEL_FLOPS ? this.threads : 1;
      const base = [pa, pb, pc, m, n, k, flags, strideA, strideB];
      if (rows >= parts) {
        this.splitRows("gemv", rows, parts, 1, (r0, r1, t) => [...base, r0, r1, 0, n, this.heap.scratch(t)]);
      } else {
        const per = alignUp(Math.ceil(n / parts), 16);
        const ranges: [number, number][] = [];
        for (let c0 = 0; c0 < n; c0 += per) ranges.push([c0, Math.min(n, c0 + per)]);
        this.runOnThreads("gemv", ranges.length, (t) => [...base, 0, rows, ...ranges[t], this.heap.scratch(t)]);
      }
    } else {
      this.gemmTiled(pa, pb, pc, m, n, k, flags, strideA, strideB, rows, outLen);
    }
  }

  private gemmTiled(
    pa: number,
    pb: number,
    pc: number,
    m: number,
    n: number,
    k: number,
    flags: number,
    strideA: number,
    strideB: number,
    rows: number,
    outLen: number,
  ): void {
    const parts = this.gemmParts(rows, m, n, k, 2 * outLen * k);
    if (parts === 1) {
      this.exports.gemm(pa, pb, pc, m, n, k, flags, strideA, strideB, 0, rows, this.heap.scratch(0), 0, 0);
    } else {
      // Dynamic split (see gemmEntry in scripts/wat/gemm.mjs): ~3 chunks per thread, but at least 64 rows
      // each, because every chunk re-packs its B blocks.
      const chunk = alignUp(Math.max(Math.ceil(rows / (3 * parts)), Math.min(64, Math.ceil(rows / parts))), GEMM_MR);
      this.heap.i32()[WORK_COUNTER >>> 2] = 0;
      this.runOnThreads("gemm", parts, (t) => [
        pa,
        pb,
        pc,
        m,
        n,
        k,
        flags,
        strideA,
        strideB,
        0,
        rows,
        this.heap.scratch(t),
        WORK_COUNTER,
        chunk,
      ]);
    }
  }

  rmsNorm(
    x: Float32Array,
    w: Float32Array,
    out: Float32Array,
    rstd: Float32Array,
    dim: number,
    eps: number,
    zeroCentered: boolean,
  ): void {
    const op = "rmsNorm";
    this.live(op);
    checkCount(op, "dim", dim);
    if (dim === 0) throw new ShapeError(`${op}: dim must be positive, got 0`);
    if (x.length % dim !== 0) throw new ShapeError(`${op}: x has ${x.length} elements, not a multiple of dim=${dim}`);
    if (!(eps >= 0)) throw new ShapeError(`${op}: eps must be >= 0, got ${eps}`);
    const rows = x.length / dim;
    checkLength(op, "w", w, dim);
    checkLength(op, "out", out, x.length);
    checkLength(op, "rstd", rstd, rows);
    if (rows === 0) return;
    this.frame((f) => {
      const px = f.stage(x, x.length, "in");
      const pw = f.stage(w, dim, "in");
      const po = f.stage(out, x.length, "out");
      const pr = f.stage(rstd, rows, "out");
      const resident = this.heap.owns(x) && this.heap.owns(out);
      const parts = this.partsFor(
        x.length,
        resident ? RESIDENT_STREAM_PARALLEL_ELEMENTS : STREAM_PARALLEL_ELEMENTS,
        rows,
        1,
      );
      this.splitRows("rmsnorm", rows, parts, 1, (r0, r1) => [px, pw, po, pr, dim, eps, zeroCentered ? 1 : 0, r0, r1]);
    });
  }

  rmsNormBackward(
    x: Float32Array,
    w: Float32Array,
    rstd: Float32Array,
    g: Float32Array,
    dx: Float32Array,
    dw: Float32Array | null,
    dim: number,
    zeroCentered: boolean,
  ): void {
    const op = "rmsNormBackward";
    this.live(op);
    checkCount(op, "dim", dim);
    if (dim === 0) throw new ShapeError(`${op}: dim must be positive, got 0`);
    if (x.length % dim !== 0) throw new ShapeError(`${op}: x has ${x.length} elements, not a multiple of dim=${dim}`);
    const rows = x.length / dim;
    const n = x.length;
    checkLength(op, "w", w, dim);
    checkLength(op, "rstd", rstd, rows);
    checkLength(op, "g", g, n);
    checkLength(op, "dx", dx, n);
    if (dw) checkLength(op, "dw", dw, dim);
    const parts = this.partsFor(n, STREAM_PARALLEL_ELEMENTS, rows, 1);
    // dw is a sum over rows: every thread adds into its own partial row, summed here after.
    this.frame((f) => {
      const px = f.stage(x, n, "in");
      const pw = f.stage(w, dim, "in");
      const pr = f.stage(rstd, rows, "in");
      const pg = f.stage(g, n, "in");
      const pd = f.stage(dx, n, "out");
      const pdw = f.scratch(parts * dim * 4);
      if (dw) this.heap.f32().fill(0, pdw >>> 2, (pdw >>> 2) + parts * dim);
      const zc = zeroCentered ? 1 : 0;
      const has = dw ? 1 : 0;
      this.splitRows("rmsnorm_bwd", rows, parts, 1, (r0, r1, t) => [
        px,
        pw,
        pr,
        pg,
        pd,
        pdw + t * dim * 4,
        dim,
        zc,
        has,
        r0,
        r1,
      ]);
      if (dw) {
        const view = this.heap.f32();
        dw.set(view.subarray(pdw >>> 2, (pdw >>> 2) + dim));
        for (let t = 1; t < parts; t++) {
          const o = (pdw >>> 2) + t * dim;
          for (let i = 0; i < dim; i++) dw[i] += view[o + i];
        }
      }
    });
  }

  /**
   * An elementwise kernel over n elements: copies `inputs` into the heap, runs `op(...pointers, i0, i1,
   * ...scalars)` split across threads in 4-aligned ranges, and copies the `outputs` back out. `outputs`
   * name indices of `arrays` (arrays both read and written, like optimizer state, appear once).
   */
  private elementwise(
    op: "swiglu_fwd" | "swiglu_bwd" | "adamw",
    label: string,
    arrays: { name: string; data: Float32Array; read: boolean; write: boolean }[],
    scalars: number[] = [],
  ): void {
    this.live(label);
    const n = arrays[0].data.length;
    for (const a of arrays) checkLength(label, a.name, a.data, n);
    if (n === 0) return;
    this.frame((f) => {
      const ptrs = arrays.map((a) => f.stage(a.data, n, a.read ? (a.write ? "inout" : "in") : "out"));
      const parts = this.partsFor(n, ROWS_PARALLEL_ELEMENTS, n, 4);
      this.splitRows(op, n, parts, 4, (i0, i1) => [...ptrs, i0, i1, ...scalars]);
    });
  }

  swiglu(gate: Float32Array, up: Float32Array, out: Float32Array, sig: Float32Array): void {
    this.elementwise("swiglu_fwd", "swiglu", [
      { name: "gate", data: gate, read: true, write: false },
      { name: "up", data: up, read: true, write: false },
      { name: "out", data: out, read: false, write: true },
      { name: "sig", data: sig, read: false, write: true },
    ]);
  }

  swigluBackward(
    gate: Float32Array,
    up: Float32Array,
    sig: Float32Array,
    dout: Float32Array,
    dgate: Float32Array,
    dup: Float32Array,
  ): void {
    this.elementwise("swiglu_bwd", "swigluBackward", [
      { name: "gate", data: gate, read: true, write: false },
      { name: "up", data: up, read: true, write: false },
      { name: "sig", data: sig, read: true, write: false },
      { name: "dout", data: dout, read: true, write: false },
      { name: "dgate", data: dgate, read: false, write: true },
      { name: "dup", data: dup, read: false, write: true },
    ]);
  }

  adamw(param: Float32Array, grad: Float32Array, expAvg: Float32Array, expAvgSq: Float32Array, h: AdamWStep): void {
    this.elementwise(
      "adamw",
      "adamw",
      [
        { name: "param", data: param, read: true, write: true },
        { name: "grad", data: grad, read: true, write: false },
        { name: "expAvg", data: expAvg, read: true, write: true },
        { name: "expAvgSq", data: expAvgSq, read: true, write: true },
      ],
      [h.beta1, h.beta2, h.eps, h.stepSize, h.bc2Sqrt, h.decay],
    );
  }

  ropeForward(x: Float32Array, cos: Float32Array, sin: Float32Array, out: Float32Array, shape: RopeShape): void {
    this.rope("ropeForward", x, cos, sin, out, shape, 1);
  }

  ropeBackward(dOut: Float32Array, cos: Float32Array, sin: Float32Array, dx: Float32Array, shape: RopeShape): void {
    this.rope("ropeBackward", dOut, cos, sin, dx, shape, -1);
  }

  /**
   * Rotates a heap copy of x in place (dims past rotaryDim stay as copied) and copies it out; with
   * headsLast it writes a second heap buffer in the other layout.
   */
  private rope(
    op: string,
    x: Float32Array,
    cos: Float32Array,
    sin: Float32Array,
    out: Float32Array,
    shape: RopeShape,
    sign: 1 | -1,
  ): void {
    this.live(op);
    const { batch, heads, seq, headDim, rotaryDim, perBatch } = shape;
    const headsLast = shape.headsLast === true;
    for (const [name, v] of [
      ["batch", batch],
      ["heads", heads],
      ["seq", seq],
      ["headDim", headDim],
      ["rotaryDim", rotaryDim],
    ] as const)
      checkCount(op, name, v);
    if (rotaryDim % 2 !== 0 || rotaryDim > headDim)
      throw new ShapeError(`${op}: rotaryDim must be even and at most headDim=${headDim}, got ${rotaryDim}`);
    const n = batch * heads * seq * headDim;
    const half = rotaryDim / 2;
    const tableLen = (perBatch ? batch * seq : seq) * half;
    checkLength(op, "x", x, n);
    checkLength(op, "out", out, n);
    checkLength(op, "cos", cos, tableLen);
    checkLength(op, "sin", sin, tableLen);
    if (headsLast && out === x) throw new ShapeError(`${op}: with headsLast the output must not be the input array`);
    if (n === 0) return;
    if (half === 0 && !headsLast) {
      if (out !== x) out.set(x.subarray(0, n));
      return;
    }
    this.frame((f) => {
      // Without headsLast the module rotates in place: x is first copied into out (unless they are one array).
      let px: number;
      let dst: number;
      if (headsLast) {
        px = f.stage(x, n, "in");
        dst = f.stage(out, n, "out");
      } else {
        dst = f.stage(out, n, "out");
        px = dst;
        const heapF32 = this.heap.f32();
        if (this.heap.owns(x)) {
          if (x.byteOffset !== dst) heapF32.copyWithin(dst >>> 2, x.byteOffset >>> 2, (x.byteOffset >>> 2) + n);
        } else heapF32.set(x.subarray(0, n), dst >>> 2);
      }
      const pc = f.stage(cos, tableLen, "in");
      const ps = f.stage(sin, tableLen, "in");
      const units = batch * heads;
      const resident = this.heap.owns(x) && this.heap.owns(out);
      const parts = this.partsFor(n, resident ? RESIDENT_STREAM_PARALLEL_ELEMENTS : ROPE_PARALLEL_ELEMENTS, units, 1);
      // The forward reads the [B][T][H][D] side, the backward writes it.
      const srcBthd = headsLast && sign === 1 ? 1 : 0;
      const dstBthd = headsLast && sign === -1 ? 1 : 0;
      const flag = perBatch ? 1 : 0;
      this.splitRows("rope", units, parts, 1, (u0, u1) => [
        px,
        dst,
        srcBthd,
        dstBthd,
        pc,
        ps,
        heads,
        seq,
        headDim,
        half,
        flag,
        sign,
        u0,
        u1,
      ]);
    });
  }

  private checkTargets(op: string, targets: Int32Array, rows: number, vocab: number, ignoreIndex: number): void {
    checkLength(op, "targets", targets, rows);
    for (let i = 0; i < rows; i++) {
      const t = targets[i];
      if (t !== ignoreIndex && (t < 0 || t >= vocab))
        throw new IndexError(
          `${op}: targets[${i}] = ${t} is outside [0, ${vocab}) and is not ignoreIndex ${ignoreIndex}`,
        );
    }
  }

  crossEntropyForward(
    logits: Float32Array,
    targets: Int32Array,
    loss: Float32Array,
    lse: Float32Array,
    rows: number,
    vocab: number,
    ignoreIndex: number,
  ): void {
    const op = "crossEntropyForward";
    this.live(op);
    checkCount(op, "rows", rows);
    checkCount(op, "vocab", vocab);
    if (vocab === 0) throw new ShapeError(`${op}: vocab must be positive, got 0`);
    checkLength(op, "logits", logits, rows * vocab);
    checkLength(op, "loss", loss, rows);
    checkLength(op, "lse", lse, rows);
    this.checkTargets(op, targets, rows, vocab, ignoreIndex);
    if (rows === 0) return;
    this.frame((f) => {
      const pl = f.stage(logits, rows * vocab, "in");
      const pt = f.stage(targets, rows, "in");
      const ploss = f.stage(loss, rows, "out");
      const plse = f.stage(lse, rows, "out");
      const parts = this.partsFor(rows * vocab, ROWS_PARALLEL_ELEMENTS, rows, 1);
      this.splitRows("ce_fwd", rows, parts, 1, (r0, r1) => [pl, pt, ploss, plse, vocab, ignoreIndex, r0, r1]);
    });
  }

  crossEntropyBackward(
    logits: Float32Array,
    targets: Int32Array,
    lse: Float32Array,
    gradLoss: Float32Array,
    dlogits: Float32Array,
    rows: number,
    vocab: number,
    ignoreIndex: number,
  ): void {
    const op = "crossEntropyBackward";
    this.live(op);
    checkCount(op, "rows", rows);
    checkCount(op, "vocab", vocab);
    if (vocab === 0) throw new ShapeError(`${op}: vocab must be positive, got 0`);
    checkLength(op, "logits", logits, rows * vocab);
    checkLength(op, "lse", lse, rows);
    checkLength(op, "gradLoss", gradLoss, rows);
    checkLength(op, "dlogits", dlogits, rows * vocab);
    this.checkTargets(op, targets, rows, vocab, ignoreIndex);
    if (rows === 0) return;
    this.frame((f) => {
      const pl = f.stage(logits, rows * vocab, "in");
      const pt = f.stage(targets, rows, "in");
      const plse = f.stage(lse, rows, "in");
      const pg = f.stage(gradLoss, rows, "in");
      const pd = f.stage(dlogits, rows * vocab, "out");
      const parts = this.partsFor(rows * vocab, ROWS_PARALLEL_ELEMENTS, rows, 1);
      this.splitRows("ce_bwd", rows, parts, 1, (r0, r1) => [pl, pt, plse, pg, pd, vocab, ignoreIndex, r0, r1]);
    });
  }

  softmaxRows(
    logits: Float32Array,
    probs: Float32Array,
    lse: Float32Array,
    rows: number,
    vocab: number,
    rowScale?: Float32Array | null,
  ): void {
    const op = "softmaxRows";
    this.live(op);
    checkCount(op, "rows", rows);
    checkCount(op, "vocab", vocab);
    if (vocab === 0) throw new ShapeError(`${op}: vocab must be positive, got 0`);
    checkLength(op, "logits", logits, rows * vocab);
    checkLength(op, "probs", probs, rows * vocab);
    checkLength(op, "lse", lse, rows);
    if (rowScale) checkLength(op, "rowScale", rowScale, rows);
    if (rows === 0) return;
    // The kernel works in place on the heap copy, so `probs` may be `logits` itself.
    const n = rows * vocab;
    this.frame((f) => {
      // The module works in place: logits are first copied into probs (unless they are one array).
      const px = f.stage(probs, n, logits === probs ? "inout" : "out");
      if (logits !== probs) {
        const heapF32 = this.heap.f32();
        if (this.heap.owns(logits)) {
          if (logits.byteOffset !== px)
            heapF32.copyWithin(px >>> 2, logits.byteOffset >>> 2, (logits.byteOffset >>> 2) + n);
        } else heapF32.set(logits.subarray(0, n), px >>> 2);
      }
      const plse = f.stage(lse, rows, "out");
      const pscale = rowScale ? f.stage(rowScale, rows, "in") : f.scratch(rows * 4);
      const parts = this.partsFor(n, ROWS_PARALLEL_ELEMENTS, rows, 1);
      const has = rowScale ? 1 : 0;
      this.splitRows("softmax_rows", rows, parts, 1, (r0, r1) => [px, plse, pscale, has, vocab, r0, r1]);
    });
  }

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
  ): void {
    const op = "klDivergenceRows";
    this.live(op);
    const { rows, vocab, scale, reverse } = shape;
    checkCount(op, "rows", rows);
    checkCount(op, "vocab", vocab);
    if (vocab === 0) throw new ShapeError(`${op}: vocab must be positive, got 0`);
    if (!(scale > 0) || !Number.isFinite(scale))
      throw new ShapeError(`${op}: scale must be positive and finite, got ${scale}`);
    checkLength(op, "student", student, rows * vocab);
    checkLength(op, "loss", loss, rows);
    checkLength(op, "lseS", lseS, rows);
    checkLength(op, "lseT", lseT, rows);
    if (grad) checkLength(op, "grad", grad, rows * vocab);
    if (gradRowScale) checkLength(op, "gradRowScale", gradRowScale, rows);
    const teacherCount = Math.floor(teacher.length / vocab);
    if (teacherRows) {
      checkLength(op, "teacherRows", teacherRows, rows);
      for (let r = 0; r < rows; r++)
        if (!(teacherRows[r] >= 0 && teacherRows[r] < teacherCount))
          throw new IndexError(`${op}: teacherRows[${r}] = ${teacherRows[r]} is outside [0, ${teacherCount})`);
    } else checkLength(op, "teacher", teacher, rows * vocab);
    if (rows === 0) return;
    const n = rows * vocab;
    this.frame((f) => {
      const ps = f.stage(student, n, "in");
      let pt: number;
      if (teacherRows) {
        pt = f.scratch(n * 4);
        const f32 = this.heap.f32();
        for (let r = 0; r < rows; r++)
          f32.set(teacher.subarray(teacherRows[r] * vocab, (teacherRows[r] + 1) * vocab), (pt >>> 2) + r * vocab);
      } else pt = f.stage(teacher, n, "in");
      const po = grad ? f.stage(grad, n, "out") : f.scratch(n * 4);
      const pl = f.stage(loss, rows, "out");
      const pls = f.stage(lseS, rows, "out");
      const plt = f.stage(lseT, rows, "out");
      const pg = gradRowScale ? f.stage(gradRowScale, rows, "in") : f.scratch(rows * 4);
      const parts = this.partsFor(n, ROWS_PARALLEL_ELEMENTS, rows, 1);
      const name = reverse ? "kl_rev_rows" : "kl_fwd_rows";
      const has = gradRowScale ? 1 : 0;
      this.splitRows(name, rows, parts, 1, (r0, r1) => [
        ps,
        pt,
        po,
        pl,
        pls,
        plt,
        vocab,
        scale,
        grad ? 1 : 0,
        pg,
        has,
        r0,
        r1,
      ]);
    });
  }

  /** The arguments attn_fwd and attn_bwd take after their array pointers: shape, thread t's scratch and score block, unit range. */
  private attentionArgs(
    shape: AttentionShape,
    kvHeads: number,
    scale: number,
    t: number,
    block: number,
    u0: number,
    u1: number,
  ): number[] {
    const { heads, tq, tk, dim } = shape;
    return [heads, kvHeads, tq, tk, dim, shape.causal ? 1 : 0, scale, this.heap.scratch(t), block, u0, u1];
  }

  private checkAttention(op: string, shape: AttentionShape) {
    const { batch, heads, tq, tk, dim } = shape;
    const kvHeads = shape.kvHeads ?? heads;
    for (const [name, v] of [
      ["batch", batch],
      ["heads", heads],
      ["kvHeads", kvHeads],
      ["tq", tq],
      ["tk", tk],
      ["dim", dim],
    ] as const)
      checkCount(op, name, v);
    if (heads === 0 || kvHeads === 0 || dim === 0)
      throw new ShapeError(`${op}: heads, kvHeads and dim must be positive, got ${heads}, ${kvHeads}, ${dim}`);
    if (heads % kvHeads !== 0) throw new ShapeError(`${op}: kvHeads=${kvHeads} must divide heads=${heads}`);
    const scale = shape.scale ?? 1 / Math.sqrt(dim);
    if (!Number.isFinite(scale)) throw new ShapeError(`${op}: scale must be finite, got ${scale}`);
    return {
      kvHeads,
      scale,
      qLen: batch * heads * tq * dim,
      kvLen: batch * kvHeads * tk * dim,
      rows: batch * heads * tq,
    };
  }

  attentionForward(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    out: Float32Array,
    lse: Float32Array,
    shape: AttentionShape,
  ): void {
    const op = "attentionForward";
    this.live(op);
    const { kvHeads, scale, qLen, kvLen, rows } = this.checkAttention(op, shape);
    checkLength(op, "q", q, qLen);
    checkLength(op, "k", k, kvLen);
    checkLength(op, "v", v, kvLen);
    checkLength(op, "out", out, qLen);
    checkLength(op, "lse", lse, rows);
    if (rows === 0) return;
    // per thread: one [ATTN_QB][tk] score block
    const blockBytes = ATTN_QB * shape.tk * 4;
    this.frame((f) => {
      const pq = f.stage(q, qLen, "in");
      const pk = f.stage(k, kvLen, "in");
      const pv = f.stage(v, kvLen, "in");
      const po = f.stage(out, qLen, "out");
      const pl = f.stage(lse, rows, "out");
      const ps = f.scratch(blockBytes * this.threads);
      const { batch, heads, tk, dim } = shape;
      const units = batch * heads;
      const parts = this.partsFor(rows * tk * dim, ROWS_PARALLEL_ELEMENTS, units, 1);
      this.splitRows("attn_fwd", units, parts, 1, (u0, u1, t) => [
        pq,
        pk,
        pv,
        po,
        pl,
        ...this.attentionArgs(shape, kvHeads, scale, t, ps + t * blockBytes, u0, u1),
      ]);
    });
  }

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
  ): void {
    const op = "attentionBackward";
    this.live(op);
    const { kvHeads, scale, qLen, kvLen, rows } = this.checkAttention(op, shape);
    checkLength(op, "q", q, qLen);
    checkLength(op, "k", k, kvLen);
    checkLength(op, "v", v, kvLen);
    checkLength(op, "out", out, qLen);
    checkLength(op, "dout", dout, qLen);
    checkLength(op, "lse", lse, rows);
    checkLength(op, "dq", dq, qLen);
    checkLength(op, "dk", dk, kvLen);
    checkLength(op, "dv", dv, kvLen);
    if (qLen === 0 && kvLen === 0) return;
    // per thread: [ATTN_QB][tk] blocks for P and dP
    const blockBytes = 2 * ATTN_QB * shape.tk * 4;
    this.frame((f) => {
      const pq = f.stage(q, qLen, "in");
      const pk = f.stage(k, kvLen, "in");
      const pv = f.stage(v, kvLen, "in");
      const po = f.stage(out, qLen, "in");
      const pdo = f.stage(dout, qLen, "in");
      const pl = f.stage(lse, rows, "in");
      const pdq = f.stage(dq, qLen, "out");
      const pdk = f.stage(dk, kvLen, "out");
      const pdv = f.stage(dv, kvLen, "out");
      const ps = f.scratch(blockBytes * this.threads);
      const { batch, tk, dim } = shape;
      const units = batch * kvHeads;
      const parts = this.partsFor(rows * tk * dim, ROWS_PARALLEL_ELEMENTS, units, 1);
      this.splitRows("attn_bwd", units, parts, 1, (u0, u1, t) => [
        pq,
        pk,
        pv,
        po,
        pdo,
        pl,
        pdq,
        pdk,
        pdv,
        ...this.attentionArgs(shape, kvHeads, scale, t, ps + t * blockBytes, u0, u1),
      ]);
    });
  }

  attentionDecodeRagged(
    q: Float32Array,
    keys: readonly Float32Array[],
    values: readonly Float32Array[],
    out: Float32Array,
    lse: Float32Array,
    shape: RaggedDecodeShape,
  ): void {
    const op = "attentionDecodeRagged";
    this.live(op);
    const { batch, heads, kvHeads, headDim: dim, scale, lengths, capacities } = shape;
    for (const [name, v] of [
      ["batch", batch],
      ["heads", heads],
      ["kvHeads", kvHeads],
      ["headDim", dim],
    ] as const)
      checkCount(op, name, v);
    if (heads === 0 || kvHeads === 0 || heads % kvHeads !== 0)
      throw new ShapeError(`${op}: kvHeads=${kvHeads} must divide heads=${heads} (both positive)`);
    if (keys.length < batch || values.length < batch || lengths.length < batch || capacities.length < batch)
      throw new ShapeError(`${op}: keys, values, lengths and capacities need one entry per sequence (${batch})`);
    const rows = batch * heads;
    checkLength(op, "q", q, rows * dim);
    checkLength(op, "out", out, rows * dim);
    checkLength(op, "lse", lse, rows);
    let maxLen = 1;
    let work = 0;
    for (let b = 0; b < batch; b++) {
      const n = lengths[b];
      const cap = capacities[b];
      checkCount(op, "lengths[b]", n);
      checkCount(op, "capacities[b]", cap);
      if (n > cap) throw new ShapeError(`${op}: sequence ${b} has length ${n} > capacity ${cap}`);
      if (n > 0) {
        checkLength(op, `keys[${b}]`, keys[b], raggedSpan(kvHeads, cap, n, dim));
        checkLength(op, `values[${b}]`, values[b], raggedSpan(kvHeads, cap, n, dim));
      }
      maxLen = Math.max(maxLen, n);
      work += n * heads * dim;
    }
    if (rows === 0) return;
    this.frame((f) => {
      const pq = f.stage(q, rows * dim, "in");
      const po = f.stage(out, rows * dim, "out");
      const pl = f.stage(lse, rows, "out");
      // Four i32 tables: key and value buffer addresses, lengths, capacities.
      const tables = f.scratch(4 * batch * 4);
      const tk = tables;
      const tv = tables + batch * 4;
      const tn = tables + 2 * batch * 4;
      const tc = tables + 3 * batch * 4;
      const addresses: number[] = [];
      for (let b = 0; b < batch; b++) {
        const n = lengths[b];
        const len = raggedSpan(kvHeads, capacities[b], n, dim);
        addresses.push(n > 0 ? f.stage(keys[b], len, "in") : 0, n > 0 ? f.stage(values[b], len, "in") : 0);
      }
      // After every stage: an allocation that grows the memory detaches earlier views.
      const i32 = this.heap.i32();
      for (let b = 0; b < batch; b++) {
        i32[(tk >>> 2) + b] = addresses[2 * b];
        i32[(tv >>> 2) + b] = addresses[2 * b + 1];
        i32[(tn >>> 2) + b] = lengths[b];
        i32[(tc >>> 2) + b] = capacities[b];
      }
      const blockBytes = maxLen * 4;
      const ps = f.scratch(blockBytes * this.threads);
      const parts = this.partsFor(work, ROWS_PARALLEL_ELEMENTS, rows, 1);
      this.splitRows("attn_decode_ragged", rows, parts, 1, (u0, u1, t) => [
        pq,
        tk,
        tv,
        tn,
        tc,
        po,
        pl,
        heads,
        kvHeads,
        dim,
        scale,
        ps + t * blockBytes,
        u0,
        u1,
      ]);
    });
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.pool?.dispose();
  }
}

/**
 * A shared memory reserves its whole maximum up front; where the address space is tight (32-bit or
 * mobile browsers) that can fail, so the maximum is halved until it fits (down to the initial size).
 */
function createMemory(initial: number, maximum: number, shared: boolean): WebAssembly.Memory {
  for (let max = maximum; ; max = Math.max(initial, max >> 1)) {
    try {
      return new WebAssembly.Memory({ initial, maximum: max, shared });
    } catch (err) {
      if (max === initial)
        throw new BackendError(`wasm kernels: cannot create a ${initial * 64} KiB WebAssembly memory: ${String(err)}`);
    }
  }
}

/** Creates the WASM SIMD kernels (compiles the embedded module, starts `threads - 1` workers). */
export async function createWasmKernels(options: WasmKernelOptions = {}): Promise<WasmKernels> {
  if (!wasmSimdSupported())
    throw new BackendError("wasm kernels: this engine does not support WebAssembly SIMD (v128)");
  const requested = options.threads;
  if (requested !== undefined && (!Number.isInteger(requested) || requested < 1 || requested > 64))
    throw new BackendError(`wasm kernels: threads must be an integer in [1, 64], got ${requested}`);
  const shared = sharedMemorySupported();
  let threads = requested ?? (await defaultThreads());
  if (threads > 1 && !shared) {
    if (requested !== undefined)
      throw new BackendError(
        `wasm kernels: threads=${requested} needs shared WebAssembly memory (SharedArrayBuffer; in browsers a cross-origin isolated page)`,
      );
    threads = 1;
  }
  const relaxedOpt = options.relaxedSimd ?? "auto";
  const relaxedAvailable = relaxedSimdSupported();
  if (relaxedOpt === true && !relaxedAvailable)
    throw new BackendError(
      "wasm kernels: relaxedSimd=true but this engine does not validate relaxed SIMD (in Node 20 call enableRelaxedSimd() first)",
    );
  const relaxed = relaxedOpt === true || (relaxedOpt === "auto" && relaxedAvailable);
  // A shared memory wherever the engine has one, also for one thread: its views stay valid when it grows,
  // which lets the wasm backend keep tensors resident in it (see backends/wasm.ts).
  const useShared = shared;
  const source = relaxed
    ? useShared
      ? WASM_RELAXED_SHARED
      : WASM_RELAXED_LOCAL
    : useShared
      ? WASM_SIMD_SHARED
      : WASM_SIMD_LOCAL;
  const module = await WebAssembly.compile(decodeBase64(source));
  const maxMiB = options.maxMemoryMiB ?? 4096;
  if (!(maxMiB >= 64 && maxMiB <= 4096))
    throw new BackendError(`wasm kernels: maxMemoryMiB must be in [64, 4096], got ${maxMiB}`);
  const maximum = Math.min(WASM_MAX_PAGES, pagesFor(maxMiB * 2 ** 20));
  const dataStart = new WasmHeap(new WebAssembly.Memory({ initial: 1, maximum: 1 }), GEMM_SCRATCH_BYTES, threads)
    .dataStart;
  const initial = Math.min(maximum, pagesFor(dataStart + INITIAL_DATA_BYTES));
  const memory = createMemory(initial, maximum, useShared);
  const instance = await WebAssembly.instantiate(module, { env: { memory, log: Math.log } });
  const pool = threads > 1 ? await ThreadPool.create(threads - 1, module, memory) : null;
  const exports = instance.exports as unknown as Exports;
  const heap = new WasmHeap(memory, GEMM_SCRATCH_BYTES, threads);
  heap.zeroFill = exports.zero_fill;
  return new Kernels(threads, relaxed, exports, heap, pool);
}

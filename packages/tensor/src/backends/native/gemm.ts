// GEMMs of the backend contract (batched, transposed, strided, accumulating) as cblas_sgemm calls
// on the caller's arrays: no copies for f32. Frozen bf16/f16 weights are widened to f32 in slices of
// op(B)'s columns into one reused scratch, so the extra memory is bounded (not a second copy of the
// model) and each slice is still a large GEMM; or, when asked, multiplied by oneDNN's bf16 GEMM.
import type { MatmulShape } from "../../backend.js";
import { ShapeError } from "../../errors.js";
import type { WorkerBlas } from "../../wasm/types.js";
import { type BlasLibrary, CBLAS_NO_TRANS, CBLAS_ROW_MAJOR, CBLAS_TRANS, type OneDnnLibrary } from "./blas.js";

/** How a bf16 B is multiplied: widened to f32 (exact f32 compute), or by oneDNN with A rounded to bf16. */
export type Bf16Gemm = "widen" | "onednn";

type Bf16Kernel = (a: Float32Array, bBits: Uint16Array, out: Float32Array, shape: MatmulShape) => void;
type F32Kernel = (a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape) => void;

/**
 * Below this many rows of A per B an f32 product runs as one cblas_sgemv per row (or, where the library has no
 * sgemv, on `skinnyF32`, wasm's GEMV): sgemm packs all of B before multiplying, which for a matrix-vector
 * product (decode) reads the weights twice.
 */
export const SKINNY_F32_ROWS = 4;

/**
 * Below this many rows of A a bf16 product goes to `skinnyBf16` (wasm's GEMM reads bf16 directly): widening
 * touches every weight once per call, which costs about as much as 2·m multiply-adds per weight at m ≈ 16, so
 * for decode (m = 1) widening would dominate.
 */
export const SKINNY_BF16_ROWS = 16;

/**
 * bf16 ↔ f32 conversion in another engine's memory (the wasm module's SIMD kernels on its heap). `widen` and
 * `round` return false, having done nothing, when an array is not in that memory; the JS loops run then.
 */
export interface Bf16Converter {
  /** out[i] = bits[i] << 16 for i < n. */
  widen(bits: Uint16Array, out: Float32Array, n: number): boolean;
  /** out[i] = bf16 bits of x[i], round to nearest even (NaN kept quiet), for i < n. */
  round(x: Float32Array, out: Uint16Array, n: number): boolean;
  /** Arrays of n elements in that memory (contents unspecified), given back with `free`. */
  f32(n: number): Float32Array;
  u16(n: number): Uint16Array;
  free(a: Float32Array | Uint16Array): void;
}

/**
 * Products below this many flops run on one BLAS thread even when the backend has more: OpenBLAS's second
 * thread costs more to start than it saves there. Measured with bench/blas-threads.ts (OpenBLAS 0.3.21,
 * SkylakeX, quiet machine, real-time priority): the attention tiles 128×128×64 and 128×64×128 (2 MFLOP) took
 * 0.83–0.88× one thread's speed on two; 256×256×512 (67 MFLOP) gained 1.34×, 512×256×256 1.61×.
 */
export const BLAS_PARALLEL_FLOPS = 1 << 24;
/**
 * Products with a dimension at most this (the rank-r products of LoRA) run on one library thread whatever their
 * size: under OpenBLAS's own two threads 512×256×16 ran at 0.72× and 512×688×16 at 0.84× one thread's speed.
 * The workers split them by rows only (WORKER_SPLIT_FLOPS_SKINNY).
 */
export const BLAS_SKINNY_K = 16;

/**
 * With worker threads that run BLAS (`NativeGemmOptions.worker`), products from this many flops whose dimensions
 * all exceed BLAS_SKINNY_K are split between the caller and the workers, each part a single-threaded sgemm,
 * instead of OpenBLAS splitting them across its own threads. Back to back (bench/worker-split.ts, real-time
 * priority) splitting paid from 2 MFLOP (128×128×64: 1.35×) and for the rank-16 products (1.4–1.6×); inside the
 * steps (bench/step-profile.ts) those lost (the attention tiles' 128×64×128: 46 instead of 36 µs, LoRA's
 * 16×256×512: 0.43 instead of ~0.2 ms: the worker reads operands the caller just wrote, from the other core's
 * cache), so the threshold is OpenBLAS's own (BLAS_PARALLEL_FLOPS).
 */
export const WORKER_SPLIT_FLOPS = 1 << 24;
/**
 * Skinny products (a dimension ≤ BLAS_SKINNY_K) split between the caller and the workers by rows from this many
 * flops, when each part gets at least two register blocks of rows and the library's skinny products keep their
 * bits split so (`probeSkinnyRowSplit`). Row parts share no output row, unlike the column split that lost inside
 * the steps. On two Zen 3 cores (OpenBLAS core Zen), back to back (bench/worker-split.ts) 512×16×256 ran 1.27×,
 * 256×16×512 1.28×, 512×256×16 1.23×, 512×688×16 1.77× faster split; the LoRA step on two threads, this on and
 * off in alternate steps of one process (three processes): 124.9 → 116.2, 107.1 → 97.4, 130.1 → 112.6 ms (the
 * products with 16 rows, LoRA's weight gradients duᵀ·x, stay whole).
 */
export const WORKER_SPLIT_FLOPS_SKINNY = 1 << 22;
/**
 * Where the parts of a split oneDNN product start: whole register blocks of its bf16 GEMM (tested bit for bit; sgemm
 * products use the alignment probed for the library, `probeSplitAlignment`).
 */
const ONEDNN_SPLIT_ALIGNMENT: SplitAlignment = { rows: 16, cols: 16 };
/** Alignments `probeSplitAlignment` tries, smallest first. */
const SPLIT_ALIGN_CANDIDATES = [16, 24, 32, 48, 64, 96, 128];

/** Where the parts of a split sgemm may start: multiples of `rows` rows or `cols` columns (null: never). */
export interface SplitAlignment {
  rows: number | null;
  cols: number | null;
}

/**
 * Fixed, varied probe inputs, made in a plain loop: with `Float32Array.from` and a callback per transpose, the skinny
 * probe took 256–332 ms beside a running test suite, 11–30 ms like this.
 */
function probeInput(length: number, phase: number): Float32Array {
  const x = new Float32Array(length);
  for (let i = 0; i < length; i++) x[i] = Math.sin(i * 1.37 + phase) * 2;
  return x;
}

/**
 * Whether op(A)·op(B) (m × n × k, row-major; `a` and `b` hold at least m·k and k·n values) run as one sgemm per
 * part — rows [cuts[i], cuts[i+1]) of C, or its columns — gives the whole product's bits.
 */
function partsReproduce(
  sgemm: BlasLibrary["sgemm"],
  [m, n, k]: readonly [number, number, number],
  [ta, tb]: readonly [number, number],
  [a, b]: readonly [Float32Array, Float32Array],
  cuts: readonly number[],
  byRows: boolean,
): boolean {
  // BLAS reads raw memory: a short input would be read past its end, not reported.
  if (a.length < m * k || b.length < k * n) throw new ShapeError(`split probe: inputs too short for ${m}×${n}×${k}`);
  const lda = ta === CBLAS_TRANS ? m : k;
  const ldb = tb === CBLAS_TRANS ? k : n;
  const whole = new Float32Array(m * n);
  sgemm(CBLAS_ROW_MAJOR, ta, tb, m, n, k, 1, a, lda, b, ldb, 0, whole, n);
  const parts = new Float32Array(m * n);
  for (let p = 0; p + 1 < cuts.length; p++) {
    const [p0, p1] = [cuts[p], cuts[p + 1]];
    if (byRows) {
      const aPart = a.subarray(ta === CBLAS_TRANS ? p0 : p0 * lda);
      sgemm(CBLAS_ROW_MAJOR, ta, tb, p1 - p0, n, k, 1, aPart, lda, b, ldb, 0, parts.subarray(p0 * n), n);
    } else {
      const bPart = b.subarray(tb === CBLAS_TRANS ? p0 * ldb : p0);
      sgemm(CBLAS_ROW_MAJOR, ta, tb, m, p1 - p0, k, 1, a, lda, bPart, ldb, 0, parts.subarray(p0), n);
    }
  }
  for (let i = 0; i < whole.length; i++) if (!Object.is(whole[i], parts[i])) return false;
  return true;
}

/**
 * The smallest alignments at which a product run as parts, each its own sgemm, gives the unsplit product's bits
 * (a whole number of the kernel's register blocks, so every element of C is summed by the same code in the same
 * order), by rows and by columns. Measured on the loaded library rather than looked up by core name: OpenBLAS's
 * AVX-512 sgemm (cores SkylakeX, Cooperlake) splits at 16 rows or columns; its AVX2 one (Haswell, which the Zen
 * cores also use) at 24 rows and at no column tried — there a 16-row split of 512×256×256 changed 4,388 elements.
 */
export function probeSplitAlignment(sgemm: BlasLibrary["sgemm"]): SplitAlignment {
  // Products the size the workers split (WORKER_SPLIT_FLOPS and up): small ones may take another kernel.
  const wide = 256;
  const reproduces = (align: number, byRows: boolean) => {
    const size = 8 * align + 5;
    const cuts = [0, align, 3 * align, size];
    const shape: [number, number, number] = byRows ? [size, wide, wide] : [wide, size, wide];
    const [m, n, k] = shape;
    const inputs: [Float32Array, Float32Array] = [probeInput(m * k, 0), probeInput(k * n, 0.5)];
    return [false, true].every((trans) => {
      const ta = byRows && trans ? CBLAS_TRANS : CBLAS_NO_TRANS;
      const tb = !byRows && trans ? CBLAS_TRANS : CBLAS_NO_TRANS;
      return partsReproduce(sgemm, shape, [ta, tb], inputs, cuts, byRows);
    });
  };
  return {
    rows: SPLIT_ALIGN_CANDIDATES.find((align) => reproduces(align, true)) ?? null,
    cols: SPLIT_ALIGN_CANDIDATES.find((align) => reproduces(align, false)) ?? null,
  };
}

/**
 * Whether skinny products (k or n = 16, LoRA's rank-r shapes) cut into row parts at `alignRows` give the whole
 * product's bits on this library: a skinny product may take another kernel than the wide ones the alignment was
 * probed on (OpenBLAS has small-matrix kernels on some cores).
 */
export function probeSkinnyRowSplit(sgemm: BlasLibrary["sgemm"], alignRows: number): boolean {
  const m = 8 * alignRows + 5;
  const cuts = [0, alignRows, 3 * alignRows, 5 * alignRows, m];
  const transposes = [CBLAS_NO_TRANS, CBLAS_TRANS].flatMap((ta) => [CBLAS_NO_TRANS, CBLAS_TRANS].map((tb) => [ta, tb]));
  return [
    [16, 256],
    [256, 16],
    [16, 688],
    [688, 16],
  ].every(([n, k]) => {
    const inputs: [Float32Array, Float32Array] = [probeInput(m * k, n), probeInput(k * n, k)];
    return transposes.every(([ta, tb]) => partsReproduce(sgemm, [m, n, k], [ta, tb], inputs, cuts, true));
  });
}

export interface NativeGemmOptions {
  /**
   * The BLAS thread count the backend set (default 1). With more than one, small and skinny products are run
   * on one thread (see BLAS_PARALLEL_FLOPS): the library's count is switched around those calls.
   */
  threads?: number;
  /** Converts bf16 weights and activations with SIMD where the arrays allow (see Bf16Converter). */
  converter?: Bf16Converter | null;
  /** f32 elements of the widening scratch (default 4 Mi = 16 MiB); B slices are sized to fit it. */
  scratchElements?: number;
  /** bf16 products with fewer than SKINNY_BF16_ROWS rows per B (decode steps) run here instead of widening. */
  skinnyBf16?: Bf16Kernel | null;
  /** f32 products with fewer than SKINNY_F32_ROWS rows per B run here. */
  skinnyF32?: F32Kernel | null;
  bf16Gemm?: Bf16Gemm;
  onednn?: OneDnnLibrary | null;
  /**
   * Worker threads that call the same BLAS (the wasm backend's, see WorkerBlas). With `threads` > 1, products of
   * arrays they can see are split by rows (or columns) into one part per thread, each on one BLAS thread.
   */
  worker?: WorkerBlas | null;
  /**
   * The workers loaded oneDNN too (WorkerBlas.loadOneDnn) and `onednn` runs on one OpenMP thread: its bf16
   * products are split the same way.
   */
  onednnOnWorkers?: boolean;
}

interface Resolved {
  batch: number;
  m: number;
  n: number;
  k: number;
  transA: boolean;
  transB: boolean;
  strideA: number;
  strideB: number;
  beta: number;
}

const N_CODE = 78; // 'N'
const T_CODE = 84; // 'T'

function checkDim(op: string, name: string, v: unknown): number {
  if (typeof v !== "number" || !Number.isInteger(v) || v < 0)
    throw new ShapeError(`${op}: ${name} must be a non-negative integer, got ${String(v)}`);
  return v;
}

function resolve(op: string, shape: MatmulShape, aLen: number, bLen: number, outLen: number): Resolved {
  const batch = checkDim(op, "batch", shape.batch);
  const m = checkDim(op, "m", shape.m);
  const n = checkDim(op, "n", shape.n);
  const k = checkDim(op, "k", shape.k);
  const strideA = checkDim(op, "batchStrideA", shape.batchStrideA ?? m * k);
  const strideB = checkDim(op, "batchStrideB", shape.batchStrideB ?? k * n);
  // BLAS reads and writes raw memory: every extent is checked here, since an overrun is not an exception there.
  const need = (stride: number, size: number) => (batch === 0 || size === 0 ? 0 : (batch - 1) * stride + size);
  const needA = need(strideA, m * k);
  const needB = need(strideB, k * n);
  const needOut = batch * m * n;
  if (aLen < needA) throw new ShapeError(`${op}: a has ${aLen} elements, the shape needs ${needA}`);
  if (bLen < needB) throw new ShapeError(`${op}: b has ${bLen} elements, the shape needs ${needB}`);
  if (outLen < needOut) throw new ShapeError(`${op}: out has ${outLen} elements, the shape needs ${needOut}`);
  return {
    batch,
    m,
    n,
    k,
    transA: shape.transA ?? false,
    transB: shape.transB ?? false,
    strideA,
    strideB,
    beta: shape.accumulate ? 1 : 0,
  };
}

/** A view starting at `offset` (koffi passes a typed array's own window, so offsets are subarrays). */
function at<T extends Float32Array | Uint16Array>(x: T, offset: number): T {
  return (offset === 0 ? x : x.subarray(offset)) as T;
}

/** One part of a split product: its shape and where its A, B and C start (elements). */
interface ProductPart {
  m: number;
  n: number;
  aAt: number;
  bAt: number;
  cAt: number;
}

/** Whether a (rows × cols) product is cut by rows (else by columns): rows where there are enough. */
function splitsByRows(alignment: SplitAlignment, rows: number, cols: number): boolean {
  return alignment.cols === null || (alignment.rows !== null && (rows >= 4 * alignment.rows || rows >= cols));
}

/**
 * Cuts [0, total) into at most `parts` parts, each cut at the multiple of `align` nearest its even share: 256 rows
 * at 24 split 120 + 136, not 144 + 112 (the step waits for the largest part). Returns the boundaries.
 */
function evenCuts(total: number, align: number, parts: number): number[] {
  const count = Math.min(parts, Math.ceil(total / align));
  const cuts = [0];
  for (let t = 1; t < count; t++) {
    const cut = Math.round((t * total) / count / align) * align;
    if (cut > cuts[cuts.length - 1] && cut < total) cuts.push(cut);
  }
  cuts.push(total);
  return cuts;
}

/**
 * Runs a (rows × cols) product as one part per thread: the largest part runs here, the others start on workers
 * 0.. (`onWorker` returns the wait), then every started part is waited for, also after an error (they write into C).
 * Rows are split where there are enough: column parts of a C with short k ran at half speed (512×688×16: both
 * threads store into every row of C). Parts start at multiples of `alignment`'s rows (columns).
 */
function splitProduct(
  workers: number,
  alignment: SplitAlignment,
  s: { transA: boolean; transB: boolean },
  g: { rows: number; cols: number; lda: number; ldb: number; ldc: number; aOff: number; bOff: number; cOff: number },
  onWorker: (index: number, p: ProductPart) => () => void,
  here: (p: ProductPart) => void,
): void {
  const byRows = splitsByRows(alignment, g.rows, g.cols);
  const total = byRows ? g.rows : g.cols;
  // Without an alignment for that direction: one part, here.
  const cuts = evenCuts(total, (byRows ? alignment.rows : alignment.cols) ?? total, workers + 1);
  const part = (t: number): ProductPart => {
    const [p0, p1] = [cuts[t], cuts[t + 1]];
    return byRows
      ? { m: p1 - p0, n: g.cols, aAt: g.aOff + (s.transA ? p0 : p0 * g.lda), bAt: g.bOff, cAt: g.cOff + p0 * g.ldc }
      : { m: g.rows, n: p1 - p0, aAt: g.aOff, bAt: g.bOff + (s.transB ? p0 * g.ldb : p0), cAt: g.cOff + p0 };
  };
  // The largest part runs here: a worker starts its part a few µs after the call.
  let mine = 0;
  for (let t = 1; t + 1 < cuts.length; t++) if (cuts[t + 1] - cuts[t] > cuts[mine + 1] - cuts[mine]) mine = t;
  const waits: (() => void)[] = [];
  let error: unknown = null;
  try {
    let w = 0;
    for (let t = 0; t + 1 < cuts.length; t++) if (t !== mine) waits.push(onWorker(w++, part(t)));
    here(part(mine));
  } catch (err) {
    error = err;
  }
  for (const wait of waits) {
    try {
      wait();
    } catch (err) {
      error ??= err;
    }
  }
  if (error) throw error;
}

let f16Table: Float32Array | null = null;
/** All 65536 f16 values as f32: widening is then one indexed load per element. */
function f16ToF32Table(): Float32Array {
  if (f16Table) return f16Table;
  const table = new Float32Array(65536);
  for (let h = 0; h < 65536; h++) {
    const sign = h & 0x8000 ? -1 : 1;
    const e = (h >> 10) & 0x1f;
    const f = h & 0x3ff;
    table[h] =
      e === 0
        ? sign * f * 2 ** -24
        : e === 31
          ? f
            ? Number.NaN
            : sign * Number.POSITIVE_INFINITY
          : sign * (1 + f / 1024) * 2 ** (e - 15);
  }
  f16Table = table;
  return table;
}

export class NativeGemm {
  private scratch: Float32Array = new Float32Array(0);
  private scratchBits: Uint32Array = new Uint32Array(0);
  private aBf16: Uint16Array = new Uint16Array(0);
  private readonly scratchElements: number;
  readonly bf16Gemm: Bf16Gemm;
  /** The library's thread count now (switched per call between `threads` and 1). */
  private blasThreads: number;
  readonly threads: number;
  /** The workers products are split across (null: OpenBLAS's own threads do it). */
  private readonly worker: WorkerBlas | null;
  /** The same workers where they also loaded oneDNN (then its bf16 products split too, each on one thread). */
  private readonly onednnWorker: WorkerBlas | null;
  /** Where the parts of a split sgemm start, probed on the library; null without workers. */
  readonly splitAlignment: SplitAlignment | null;
  /** Rows-only cuts for skinny products (see WORKER_SPLIT_FLOPS_SKINNY), where the library's probe allows them. */
  private readonly skinnyAlignment: SplitAlignment | null;

  constructor(
    readonly blas: BlasLibrary,
    private readonly options: NativeGemmOptions = {},
  ) {
    this.scratchElements = Math.max(options.scratchElements ?? 4 * 2 ** 20, 1);
    this.bf16Gemm = options.bf16Gemm ?? "widen";
    this.threads = Math.max(1, options.threads ?? 1);
    this.blasThreads = this.threads;
    const worker = this.threads > 1 && options.worker && options.worker.workers > 0 ? options.worker : null;
    if (worker) {
      // The probe compares single-threaded calls, what each part of a split runs.
      blas.setThreads(1);
      this.splitAlignment = probeSplitAlignment(blas.sgemm);
      const rows = this.splitAlignment.rows;
      this.skinnyAlignment = rows !== null && probeSkinnyRowSplit(blas.sgemm, rows) ? { rows, cols: null } : null;
      blas.setThreads(this.blasThreads);
    } else {
      this.splitAlignment = null;
      this.skinnyAlignment = null;
    }
    this.worker = this.splitAlignment?.rows || this.splitAlignment?.cols ? worker : null;
    this.onednnWorker = worker && options.onednnOnWorkers && options.onednn ? worker : null;
    if (this.bf16Gemm === "onednn" && !options.onednn)
      throw new ShapeError('NativeGemm: bf16Gemm "onednn" needs a loaded oneDNN library');
  }

  /** Whether skinny products split by rows (see WORKER_SPLIT_FLOPS_SKINNY), probed on the library. */
  get skinnyRowSplit(): boolean {
    return this.skinnyAlignment !== null;
  }

  /** out[b] (+)= op(A[b])·op(B[b]) in f32 (see MatmulShape). */
  matmul(a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape): void {
    const s = resolve("matmul", shape, a.length, b.length, out.length);
    if (this.trivial(s, out)) return;
    if ((s.strideB === 0 ? s.batch * s.m : s.m) < SKINNY_F32_ROWS) {
      const sgemv = this.blas.sgemv;
      if (sgemv) {
        this.gemvRows(sgemv, s, a, b, out);
        return;
      }
      if (this.options.skinnyF32) {
        this.options.skinnyF32(a, b, out, shape);
        return;
      }
    }
    const { m, n, k } = s;
    // Batches that share B with consecutive, untransposed A rows are one tall GEMM (batch·m rows).
    if (s.batch > 1 && s.strideB === 0 && !s.transA && s.strideA === m * k) {
      this.sgemm(s, a, 0, b, 0, s.transB ? k : n, out, 0, s.batch * m, n);
      return;
    }
    for (let i = 0; i < s.batch; i++)
      this.sgemm(s, a, i * s.strideA, b, i * s.strideB, s.transB ? k : n, out, i * m * n, m, n);
  }

  /** As matmul with B given as bf16 bits (frozen weights). */
  matmulBf16B(a: Float32Array, bBits: Uint16Array, out: Float32Array, shape: MatmulShape): void {
    const s = resolve("matmulBf16B", shape, a.length, bBits.length, out.length);
    if (this.trivial(s, out)) return;
    const rowsPerB = s.strideB === 0 ? s.batch * s.m : s.m;
    if (this.bf16Gemm === "widen" && this.options.skinnyBf16 && rowsPerB < SKINNY_BF16_ROWS) {
      this.options.skinnyBf16(a, bBits, out, shape);
      return;
    }
    if (this.bf16Gemm === "onednn") this.onednnBf16(s, a, bBits, out);
    else this.widened(s, a, bBits, out, false);
  }

  /** As matmul with B given as IEEE half bits. */
  matmulF16B(a: Float32Array, bBits: Uint16Array, out: Float32Array, shape: MatmulShape): void {
    const s = resolve("matmulF16B", shape, a.length, bBits.length, out.length);
    if (this.trivial(s, out)) return;
    this.widened(s, a, bBits, out, true);
  }

  /** Empty products: nothing to do, or out = 0 when k = 0 (BLAS may skip scaling C then). */
  private trivial(s: Resolved, out: Float32Array): boolean {
    if (s.batch === 0 || s.m === 0 || s.n === 0) return true;
    if (s.k === 0) {
      if (s.beta === 0) out.fill(0, 0, s.batch * s.m * s.n);
      return true;
    }
    return false;
  }

  private sgemm(
    s: Resolved,
    a: Float32Array,
    aOff: number,
    b: Float32Array,
    bOff: number,
    ldb: number,
    out: Float32Array,
    cOff: number,
    rows: number,
    cols: number,
  ): void {
    if (this.worker && !this.worker.busy()) {
      const alignment = this.splitFor(rows, cols, s.k);
      if (alignment && this.worker.owns(a, b, out)) {
        this.splitSgemm(this.worker, alignment, s, a, aOff, b, bOff, ldb, out, cOff, rows, cols);
        return;
      }
    }
    this.useThreads(rows, cols, s.k);
    const rest = this.blasThreads > 1 ? this.restWorkers() : null;
    this.blas.sgemm(
      CBLAS_ROW_MAJOR,
      s.transA ? CBLAS_TRANS : CBLAS_NO_TRANS,
      s.transB ? CBLAS_TRANS : CBLAS_NO_TRANS,
      rows,
      cols,
      s.k,
      1,
      at(a, aOff),
      s.transA ? s.m : s.k,
      at(b, bOff),
      ldb,
      s.beta,
      at(out, cOff),
      s.n,
    );
    rest?.();
  }

  /**
   * C's rows (or, for a short and wide C, its columns) in one part per thread: the workers run theirs while this
   * thread runs the first, each a single-threaded sgemm on its own core. Every element of C is the same sum in
   * the same order as unsplit (the parts start at whole register blocks; tested bit for bit).
   */
  private splitSgemm(
    worker: WorkerBlas,
    alignment: SplitAlignment,
    s: Resolved,
    a: Float32Array,
    aOff: number,
    b: Float32Array,
    bOff: number,
    ldb: number,
    out: Float32Array,
    cOff: number,
    rows: number,
    cols: number,
  ): void {
    this.setBlasThreads(1);
    const lda = s.transA ? s.m : s.k;
    const ta = s.transA ? CBLAS_TRANS : CBLAS_NO_TRANS;
    const tb = s.transB ? CBLAS_TRANS : CBLAS_NO_TRANS;
    splitProduct(
      worker.workers,
      alignment,
      s,
      { rows, cols, lda, ldb, ldc: s.n, aOff, bOff, cOff },
      (t, p) =>
        worker.sgemm(t, s.transA, s.transB, p.m, p.n, s.k, a, p.aAt, lda, b, p.bAt, ldb, s.beta, out, p.cAt, s.n),
      (p) =>
        this.blas.sgemm(
          CBLAS_ROW_MAJOR,
          ta,
          tb,
          p.m,
          p.n,
          s.k,
          1,
          at(a, p.aAt),
          lda,
          at(b, p.bAt),
          ldb,
          s.beta,
          at(out, p.cAt),
          s.n,
        ),
    );
  }

  /** cblas_sgemm on one library thread, for callers that run their own products beside the workers'. */
  oneThreadSgemm(): BlasLibrary["sgemm"] {
    this.setBlasThreads(1);
    return this.blas.sgemm;
  }

  /** Whether a (rows × cols × k) product is split across the workers (see WORKER_SPLIT_FLOPS). */
  private worthSplitting(rows: number, cols: number, k: number): boolean {
    return Math.min(rows, cols, k) > BLAS_SKINNY_K && 2 * rows * cols * k >= WORKER_SPLIT_FLOPS;
  }

  /**
   * Where a (rows × cols × k) sgemm on the workers may be cut: the probed alignment for a wide product worth
   * splitting, rows only for a skinny one with rows enough (WORKER_SPLIT_FLOPS_SKINNY), null to run it whole.
   */
  private splitFor(rows: number, cols: number, k: number): SplitAlignment | null {
    const alignment = this.splitAlignment;
    if (!alignment) return null;
    if (this.worthSplitting(rows, cols, k)) return alignment;
    const rowsOnly = this.skinnyAlignment;
    if (!rowsOnly?.rows || Math.min(cols, k) > BLAS_SKINNY_K || rows <= BLAS_SKINNY_K) return null;
    const enough = rows >= 4 * rowsOnly.rows && 2 * rows * cols * k >= WORKER_SPLIT_FLOPS_SKINNY;
    return enough ? rowsOnly : null;
  }

  /**
   * Stops the workers' polling for a call that runs on a library's own threads (OpenBLAS's on arrays the workers
   * cannot see, oneDNN's OpenMP team): a polling worker would take a core from them. Returns the restore.
   */
  private restWorkers(): (() => void) | null {
    const worker = this.worker;
    if (!worker || worker.spinMicros === 0) return null;
    const spin = worker.spinMicros;
    worker.setSpin(0);
    return () => worker.setSpin(spin);
  }

  /**
   * Each row of op(A) times op(B) as one cblas_sgemv on one library thread: a decode step's products read each
   * weight once, unpacked, with the library's widest vectors (wasm's GEMV is 128-bit).
   */
  private gemvRows(
    sgemv: NonNullable<BlasLibrary["sgemv"]>,
    s: Resolved,
    a: Float32Array,
    b: Float32Array,
    out: Float32Array,
  ): void {
    const { m, n, k } = s;
    this.setBlasThreads(1);
    for (let i = 0; i < s.batch; i++) {
      const bi = at(b, i * s.strideB);
      for (let r = 0; r < m; r++) {
        // With beta = 0, BLAS does not read y ("need not be set on input"): a pooled output's stale bits stay out.
        const cAt = (i * m + r) * n;
        const x = at(a, i * s.strideA + (s.transA ? r : r * k));
        const incx = s.transA ? m : 1;
        const y = at(out, cAt);
        if (s.transB) sgemv(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, n, k, 1, bi, k, x, incx, s.beta, y, 1);
        else sgemv(CBLAS_ROW_MAJOR, CBLAS_TRANS, k, n, 1, bi, n, x, incx, s.beta, y, 1);
      }
    }
  }

  /** One BLAS thread for a small or skinny product, all of them otherwise (a library call only on a change). */
  private useThreads(m: number, n: number, k: number): void {
    if (this.threads === 1) return;
    this.setBlasThreads(k <= BLAS_SKINNY_K || 2 * m * n * k < BLAS_PARALLEL_FLOPS ? 1 : this.threads);
  }

  private setBlasThreads(want: number): void {
    if (want !== this.blasThreads) {
      this.blas.setThreads(want);
      this.blasThreads = want;
    }
  }

  private ensureScratch(elements: number): Float32Array {
    if (this.scratch.length < elements) {
      const conv = this.options.converter;
      if (conv) {
        if (this.scratch.length > 0) conv.free(this.scratch);
        this.scratch = conv.f32(elements);
      } else this.scratch = new Float32Array(elements);
      this.scratchBits = new Uint32Array(this.scratch.buffer, this.scratch.byteOffset, this.scratch.length);
    }
    return this.scratch;
  }

  /**
   * Columns [c0, c1) of op(B) widened into the scratch as a matrix with leading dimension ldb:
   * rows c0..c1 of a stored-transposed B (contiguous), or a k × (c1 − c0) block of a plain one.
   */
  private widenSlice(bits: Uint16Array, off: number, s: Resolved, c0: number, c1: number, f16: boolean): number {
    const w = c1 - c0;
    const { k, n } = s;
    this.ensureScratch(w * k);
    const dst = this.scratch;
    const dstBits = this.scratchBits;
    const table = f16 ? f16ToF32Table() : null;
    const conv = table ? null : this.options.converter;
    if (s.transB) {
      const src = off + c0 * k;
      const len = w * k;
      if (conv?.widen(bits.subarray(src, src + len), dst, len)) return k;
      if (table) for (let i = 0; i < len; i++) dst[i] = table[bits[src + i]];
      else for (let i = 0; i < len; i++) dstBits[i] = bits[src + i] << 16;
      return k;
    }
    // A slice of every column is the whole k × n block, contiguous: one conversion call instead of one per row
    // (a row per call cost ~2 µs each, 11,933 calls and ~45 ms per LoRA step with the JS around them).
    if (w === n && conv?.widen(bits.subarray(off, off + k * n), dst, k * n)) return w;
    for (let r = 0; r < k; r++) {
      const src = off + r * n + c0;
      const d = r * w;
      if (conv?.widen(bits.subarray(src, src + w), dst.subarray(d, d + w), w)) continue;
      if (table) for (let j = 0; j < w; j++) dst[d + j] = table[bits[src + j]];
      else for (let j = 0; j < w; j++) dstBits[d + j] = bits[src + j] << 16;
    }
    return w;
  }

  private widened(s: Resolved, a: Float32Array, bits: Uint16Array, out: Float32Array, f16: boolean): void {
    const { m, n, k } = s;
    const slice = Math.max(1, Math.min(n, Math.floor(this.scratchElements / k)));
    const tall = s.batch > 1 && s.strideB === 0 && !s.transA && s.strideA === m * k;
    const batchesPerB = s.strideB === 0 ? s.batch : 1;
    for (let bi = 0; bi < s.batch; bi += batchesPerB) {
      for (let c0 = 0; c0 < n; c0 += slice) {
        const c1 = Math.min(n, c0 + slice);
        const ldb = this.widenSlice(bits, bi * s.strideB, s, c0, c1, f16);
        const view = this.scratch;
        if (tall) {
          this.sgemm(s, a, 0, view, 0, ldb, out, c0, s.batch * m, c1 - c0);
          continue;
        }
        for (let i = bi; i < bi + batchesPerB; i++)
          this.sgemm(s, a, i * s.strideA, view, 0, ldb, out, i * m * n + c0, m, c1 - c0);
      }
    }
  }

  /** A rounded to bf16 (nearest-even, as torch's .to(bfloat16)), then oneDNN's bf16·bf16→f32 GEMM. */
  private onednnBf16(s: Resolved, a: Float32Array, bits: Uint16Array, out: Float32Array): void {
    const onednn = this.options.onednn as OneDnnLibrary;
    const { m, n, k } = s;
    const aSize = s.strideA === 0 ? m * k : (s.batch - 1) * s.strideA + m * k;
    const conv = this.options.converter;
    if (this.aBf16.length < aSize) {
      if (conv) {
        if (this.aBf16.length > 0) conv.free(this.aBf16);
        this.aBf16 = conv.u16(aSize);
      } else this.aBf16 = new Uint16Array(aSize);
    }
    const aBits = this.aBf16;
    if (!conv?.round(a.subarray(0, aSize), aBits, aSize)) {
      const a32 = new Uint32Array(a.buffer, a.byteOffset, aSize);
      for (let i = 0; i < aSize; i++) {
        const u = a32[i];
        // NaN keeps a quiet NaN; everything else rounds to nearest even on the dropped 16 bits.
        aBits[i] = (u & 0x7fffffff) > 0x7f800000 ? (u >>> 16) | 0x40 : (u + 0x7fff + ((u >>> 16) & 1)) >>> 16;
      }
    }
    const ta = s.transA ? T_CODE : N_CODE;
    const tb = s.transB ? T_CODE : N_CODE;
    const tall = s.batch > 1 && s.strideB === 0 && !s.transA && s.strideA === m * k;
    const calls = tall ? 1 : s.batch;
    const rows = tall ? s.batch * m : m;
    const lda = s.transA ? m : k;
    const ldb = s.transB ? k : n;
    const call = (p: ProductPart) => {
      const status = onednn.gemmBf16(
        ta,
        tb,
        p.m,
        p.n,
        k,
        1,
        at(aBits, p.aAt),
        lda,
        at(bits, p.bAt),
        ldb,
        s.beta,
        at(out, p.cAt),
        n,
      );
      if (status !== 0) throw new ShapeError(`matmulBf16B: dnnl_gemm_bf16bf16f32 failed with status ${status}`);
    };
    const worker = this.onednnWorker;
    const split = worker !== null && this.worthSplitting(rows, n, k) && !worker.busy() && worker.owns(aBits, bits, out);
    // oneDNN's own OpenMP threads (where the workers do not split its products) need both cores.
    const rest = this.threads > 1 && !this.onednnWorker ? this.restWorkers() : null;
    try {
      for (let i = 0; i < calls; i++) {
        const g = { rows, cols: n, lda, ldb, ldc: n, aOff: i * s.strideA, bOff: i * s.strideB, cOff: i * m * n };
        if (split)
          splitProduct(
            worker.workers,
            ONEDNN_SPLIT_ALIGNMENT,
            s,
            g,
            (t, p) =>
              worker.gemmBf16(
                t,
                s.transA,
                s.transB,
                p.m,
                p.n,
                k,
                aBits,
                p.aAt,
                lda,
                bits,
                p.bAt,
                ldb,
                s.beta,
                out,
                p.cAt,
                n,
              ),
            call,
          );
        else call({ m: rows, n, aAt: g.aOff, bAt: g.bOff, cAt: g.cOff });
      }
    } finally {
      rest?.();
    }
  }
}

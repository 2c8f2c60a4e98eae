// The native backend: the wasm backend (its kernels and its memory) with the GEMMs sent to the
// machine's CBLAS through an FFI. One process mixes both: BLAS reads and writes the same
// Float32Arrays (plain or wasm-heap views) that the wasm kernels use, by pointer.
import {
  type HostArrays,
  type Kernels,
  backendKernels,
  hasBackend,
  referenceKernel,
  registerBackend,
  storageOf,
  unregisterBackend,
} from "../../backend.js";
import { BackendError } from "../../errors.js";
import type { StorageBackend } from "../../storage.js";
import type { BaseBackendOptions } from "../../backend-options.js";
import { type AttentionGroupThreads, makeGemmAttention, makeTiledAttention } from "../attention-gemm.js";
import { initWasmBackend, wasmKernels } from "../wasm.js";
import {
  type BlasLibrary,
  NativeBackendUnavailableError,
  type OneDnnLibrary,
  koffiModulePath,
  loadBlas,
  loadOneDnn,
} from "./blas.js";
import { type Bf16Converter, type Bf16Gemm, NativeGemm, type SplitAlignment } from "./gemm.js";

export { NativeBackendUnavailableError } from "./blas.js";
export { type Bf16Gemm, NativeGemm, probeSkinnyRowSplit, probeSplitAlignment, type SplitAlignment } from "./gemm.js";
export { loadBlas, loadOneDnn, type BlasLibrary, type LoadBlasOptions, type OneDnnLibrary } from "./blas.js";

export interface NativeBackendOptions {
  /** CBLAS to load instead of searching (a path or soname); the KILN_BLAS environment variable does the same. */
  blasLibrary?: string;
  /**
   * Load OpenBLAS as if OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE were unset (they are restored right
   * after). Those variables pin OpenBLAS to an older kernel, e.g. Haswell on an AVX-512 CPU: about
   * half the GEMM speed. Default false: the environment is respected and the core is reported.
   */
  ignoreOpenblasEnv?: boolean;
  /**
   * bf16 weights: "widen" (default) converts slices of B to f32 and runs sgemm, so results equal
   * the f32 product of the stored values; "onednn" rounds A to bf16 as well and runs oneDNN's
   * bf16 GEMM (PyTorch's bf16 CPU path: about twice the speed on CPUs with AVX512-BF16 or AMX).
   */
  bf16Gemm?: Bf16Gemm;
  /** f32 elements of the reusable scratch bf16/f16 weights are widened into (default 4 Mi = 16 MiB). */
  widenScratchElements?: number;
  /**
   * With more than one thread, how a product uses them: "workers" (default where the wasm workers can load the
   * BLAS) splits it by rows between this thread and the workers, each part on one BLAS thread; "library" lets
   * the BLAS split it across its own threads.
   */
  gemmSplit?: GemmSplit;
  /**
   * Microseconds the threads poll for the next job before sleeping, with gemmSplit "workers" (default
   * WORKER_SPIN_MICROS, 200; 0 = sleep at once).
   */
  workerSpinMicros?: number;
}

export type GemmSplit = "workers" | "library";

/** " (at 16 rows / 16 columns; skinny ones by rows)" for the summary line. */
function alignmentNote(a: SplitAlignment | null, skinnyRows: boolean): string {
  if (!a) return "";
  const part = (n: number | null, what: string) => (n === null ? `never by ${what}` : `${n} ${what}`);
  return ` (at ${part(a.rows, "rows")} / ${part(a.cols, "columns")}; skinny ones ${skinnyRows ? "by rows" : "whole"})`;
}

/**
 * Poll time of the threads between jobs with gemmSplit "workers": a sleeping thread takes tens of µs or more to
 * run again. Longer is not better everywhere (tensor README, "Products split by the workers"): niced beside a
 * colleague's job, 5 ms took the decoder step on two threads from 471–581 to 196–246 ms but the LoRA step from
 * 481–577 to 944–1,134 ms (a polling thread takes the core the caller or V8's helper threads need); at
 * real-time priority under load 200 µs and 2 ms were alike.
 */
export const WORKER_SPIN_MICROS = 200;

export interface NativeBackendInfo {
  vendor: string;
  library: string;
  /** OpenBLAS's kernel name, e.g. "SkylakeX" / "Cooperlake"; null where the library does not report one. */
  core: string | null;
  config: string | null;
  threads: number;
  threadsApplied: boolean;
  bf16Gemm: Bf16Gemm;
  /** How products use more than one thread ("library" also where the workers could not load the BLAS). */
  gemmSplit: GemmSplit;
  /** With gemmSplit "workers": where split products' parts start (probed on the library; see NativeGemm). */
  splitAlignment: SplitAlignment | null;
  /** With gemmSplit "workers": whether skinny (rank-r) products split by rows too (probed; see NativeGemm). */
  skinnyRowSplit: boolean;
  onednn: string | null;
  /** Environment variables that pin OpenBLAS's kernel, as they were when the library loaded. */
  pinnedBy: string[];
  /** One line for logs: library, core, threads, bf16 path. */
  summary: string;
}

/** Query rows from which unmasked attention runs its products on BLAS (below: the fused wasm kernel). */
const BLAS_ATTENTION_ROWS = 16;

let gemm: NativeGemm | null = null;
let info: NativeBackendInfo | null = null;
/** The wasm workers this backend made poll between jobs (they stop when it is disposed). */
let pollingWorkers: { setSpin(micros: number): void } | null = null;

/** What the native backend runs on (after `initBackend("native")`), or null. */
export function nativeBackendInfo(): NativeBackendInfo | null {
  return info;
}

/** The live native GEMMs (e.g. matmulF16B), or null before `initBackend("native")`. */
export function nativeGemm(): NativeGemm | null {
  return gemm;
}

/**
 * Unregister the native backend (its kernels and memory stay with the wasm backend). Dispose native
 * before wasm: native's tensors live in wasm's memory.
 */
export function disposeNativeBackend(): void {
  pollingWorkers?.setSpin(0);
  pollingWorkers = null;
  gemm = null;
  info = null;
  unregisterBackend("native");
}

/** The wasm backend's default, so both halves of the backend use the same cores. */
async function defaultThreads(): Promise<number> {
  const os = await import("node:os");
  const cores = typeof os.availableParallelism === "function" ? os.availableParallelism() : os.cpus().length;
  return Math.max(1, Math.min(2, cores));
}

/**
 * `inner` under another backend name: the same heap, pools and counters, so a tensor made on native
 * is resident in wasm's memory and either backend's kernels use it in place (BLAS gets a pointer into
 * the WebAssembly.Memory through the FFI), with no copy when switching between the two.
 */
function sharedStorage(inner: StorageBackend, name: string): StorageBackend {
  const alias: StorageBackend = {
    name,
    get hostVisible() {
      return inner.hostVisible;
    },
    get epoch() {
      return inner.epoch;
    },
    get adoptsUploads() {
      return inner.adoptsUploads;
    },
    get releaseOnGc() {
      return inner.releaseOnGc;
    },
    alloc: (dtype, size) => inner.alloc(dtype, size),
    upload: (host, dtype) => inner.upload(host, dtype),
    view: (native, dtype, offset, length) => inner.view(native, dtype, offset, length),
    read: (native, dtype, offset, length) => inner.read(native, dtype, offset, length),
    release: (native) => inner.release(native),
    memory: () => inner.memory(),
  };
  const allocEmpty = inner.allocEmpty?.bind(inner);
  if (allocEmpty) alias.allocEmpty = allocEmpty;
  const readSync = inner.readSync?.bind(inner);
  if (readSync) alias.readSync = readSync;
  // Op outputs made outside tidy() go where the garbage collector sees them, as on wasm: without
  // this they were heap blocks freed only by finalizers, and a chunked-head backward at V = 151,936
  // filled the 4 GiB WebAssembly memory before V8 felt any pressure to collect.
  const allocTransient = inner.allocTransient?.bind(inner);
  if (allocTransient) alias.allocTransient = allocTransient;
  const trimPool = inner.trimPool?.bind(inner);
  if (trimPool) alias.trimPool = trimPool;
  return alias;
}

/** Load the BLAS, make sure the wasm backend is up, register "native" = wasm kernels + BLAS GEMMs. */
export async function initNativeBackend(options: BaseBackendOptions & NativeBackendOptions): Promise<void> {
  const wantSplit = options.gemmSplit ?? "workers";
  if (wantSplit !== "workers" && wantSplit !== "library")
    throw new BackendError(`native backend: gemmSplit must be "workers" or "library", got ${String(wantSplit)}`);
  const spin = options.workerSpinMicros ?? WORKER_SPIN_MICROS;
  if (!(Number.isFinite(spin) && spin >= 0 && spin <= 1e6))
    throw new BackendError(`native backend: workerSpinMicros must be a number in [0, 1e6], got ${String(spin)}`);
  const pinning = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"]
    .filter((v) => process.env[v] !== undefined)
    .map((v) => `${v}=${process.env[v]}`);
  const pinnedBy = options.ignoreOpenblasEnv ? [] : pinning;
  const blas: BlasLibrary = await loadBlas({
    library: options.blasLibrary,
    ignoreOpenblasEnv: options.ignoreOpenblasEnv,
  });
  const threads = options.threads ?? (await defaultThreads());
  const threadsApplied = blas.setThreads(threads);
  const bf16Gemm = options.bf16Gemm ?? "widen";
  let onednn: OneDnnLibrary | null = null;
  if (bf16Gemm === "onednn") {
    const loaded = await loadOneDnn();
    if (typeof loaded === "string") {
      throw new NativeBackendUnavailableError(`native backend: bf16Gemm "onednn" unavailable: ${loaded}`);
    }
    onednn = loaded;
    onednn.setThreads(threads);
  }
  if (!hasBackend("wasm")) await initWasmBackend(options);

  // Everything but the GEMMs is the wasm backend's own kernels; what wasm lacks is not registered,
  // so it falls back to js exactly as on wasm. The storage is wasm's too (see sharedStorage).
  const kernels = { ...backendKernels("wasm") } as Partial<Kernels>;
  const wasm = wasmKernels();
  const heap = wasm?.wasmHeap;
  // bf16 widening (B) and rounding (A, for oneDNN) with the module's SIMD kernels, into scratch in its memory.
  const converter: Bf16Converter | null =
    wasm && heap?.shared
      ? {
          widen: (bits, out, n) => wasm.bf16Resident("widen", bits, out, n),
          round: (x, out, n) => wasm.bf16Resident("round", x, out, n),
          // alloc before buffer(): an alloc that grows the memory leaves an earlier buffer() at the old length.
          f32: (n) => {
            const offset = heap.alloc(n * 4, false);
            return new Float32Array(heap.buffer(), offset, n);
          },
          u16: (n) => {
            const offset = heap.alloc(n * 2, false);
            return new Uint16Array(heap.buffer(), offset, n);
          },
          free: (a) => heap.release(a.byteOffset, a.byteLength),
        }
      : null;
  let gemmSplit: GemmSplit = "library";
  const workerBlas = wasm?.workerBlas ?? null;
  if (threadsApplied && threads > 1 && wantSplit === "workers" && workerBlas && heap?.shared) {
    const koffiPath = await koffiModulePath();
    if (koffiPath && workerBlas.load(koffiPath, blas.path) === null) {
      gemmSplit = "workers";
      workerBlas.setSpin(spin);
      pollingWorkers = workerBlas;
    }
  }
  // oneDNN's products split the same way where the workers load it; its own OpenMP team is then one thread.
  let onednnOnWorkers = false;
  if (gemmSplit === "workers" && onednn?.openmp && workerBlas?.loadOneDnn(onednn.path, onednn.openmp) === null) {
    onednnOnWorkers = onednn.setThreads(1);
  }
  const next = new NativeGemm(blas, {
    worker: gemmSplit === "workers" ? workerBlas : null,
    onednnOnWorkers,
    threads: threadsApplied ? threads : 1,
    converter,
    bf16Gemm,
    onednn,
    scratchElements: options.widenScratchElements,
    skinnyBf16: kernels.matmulBf16B ?? null,
    skinnyF32: kernels.matmul ?? null,
  });
  const matmul: Kernels["matmul"] = (a, b, out, shape) => next.matmul(a, b, out, shape);
  const tiled = makeGemmAttention(matmul);
  const forward = (kernels.attentionForward ?? referenceKernel("attentionForward")) as Kernels["attentionForward"];
  const backward = (kernels.attentionBackward ?? referenceKernel("attentionBackward")) as Kernels["attentionBackward"];
  // Prefill and training: products on BLAS, softmax/exp/dS in the wasm module, on resident memory. Decode
  // (a few query rows) keeps the fused wasm kernel: its products are GEMVs, where BLAS has nothing to gain.
  // With workers that load the BLAS, (batch, kv head) groups of tiles also run side by side, one group per thread.
  const groupWorkers = gemmSplit === "workers" ? workerBlas : null;
  const groupThreads: AttentionGroupThreads | null = groupWorkers
    ? {
        workers: groupWorkers.workers,
        free: () => !groupWorkers.busy(),
        start: (index, args) => groupWorkers.attentionGroups(index, args),
        sgemm: () => next.oneThreadSgemm(),
      }
    : null;
  const blasAttention = wasm ? makeTiledAttention(matmul, wasm.attentionTiles, undefined, groupThreads) : null;
  registerBackend<HostArrays>(sharedStorage(storageOf("wasm"), "native"), {
    ...kernels,
    matmul,
    matmulBf16B: (a, b, out, shape) => next.matmulBf16B(a, b, out, shape),
    // Padded batches run the GEMM-tiled attention: its score and value products go to BLAS.
    attentionForward: (q, k, v, mask, out, lse, s) => {
      if (mask) tiled.attentionForward(q, k, v, mask, out, lse, s);
      else if (!(s.tq >= BLAS_ATTENTION_ROWS && blasAttention?.forward(q, k, v, out, lse, s)))
        forward(q, k, v, mask, out, lse, s);
    },
    attentionBackward: (q, k, v, mask, out, lse, dOut, dq, dk, dv, s) => {
      if (mask) tiled.attentionBackward(q, k, v, mask, out, lse, dOut, dq, dk, dv, s);
      else if (!(s.tq >= BLAS_ATTENTION_ROWS && blasAttention?.backward(q, k, v, out, lse, dOut, dq, dk, dv, s)))
        backward(q, k, v, mask, out, lse, dOut, dq, dk, dv, s);
    },
  });
  gemm = next;
  info = {
    vendor: blas.vendor,
    library: blas.path,
    core: blas.core,
    config: blas.config,
    threads,
    threadsApplied,
    bf16Gemm,
    gemmSplit,
    splitAlignment: next.splitAlignment,
    skinnyRowSplit: next.skinnyRowSplit,
    onednn: onednn?.path ?? null,
    pinnedBy,
    summary:
      `${blas.vendor} (${blas.path}${blas.core ? `, core ${blas.core}` : ""}${pinnedBy.length ? ` pinned by ${pinnedBy.join(" ")}` : ""}` +
      `${options.ignoreOpenblasEnv && pinning.length ? `, ${pinning.join(" ")} ignored` : ""}), ` +
      `${threads} thread${threads === 1 ? "" : "s"}${threadsApplied ? "" : " (library default)"}` +
      `${threads > 1 ? `, products split by ${gemmSplit === "workers" ? `the workers${alignmentNote(next.splitAlignment, next.skinnyRowSplit)}` : "the library"}` : ""}, bf16 ${bf16Gemm}`,
  };
}

// Finds the machine's CBLAS at run time and binds the few entry points the native backend uses,
// through koffi (an FFI with prebuilt binaries; an optional dependency). Nothing here is imported
// unless `initBackend("native")` runs, so browsers and machines without a BLAS never load it.
import { BackendError } from "../../errors.js";
import type { TypedSgemm } from "../../wasm/types.js";
import { GEMM_BF16_SIGNATURE, SGEMM_SIGNATURE, SGEMV_SIGNATURE } from "../../wasm/worker-source.js";

/** The native backend cannot run here (no FFI, no BLAS, or a BLAS without cblas_sgemm). */
export class NativeBackendUnavailableError extends BackendError {}

export const CBLAS_ROW_MAJOR = 101;
export const CBLAS_NO_TRANS = 111;
export const CBLAS_TRANS = 112;

/** cblas_sgemm as koffi binds it (one home for the signature's type: the workers' attention jobs call it too). */
type Sgemm = TypedSgemm;

type Sgemv = (
  order: number,
  trans: number,
  m: number,
  n: number,
  alpha: number,
  a: Float32Array,
  lda: number,
  x: Float32Array,
  incx: number,
  beta: number,
  y: Float32Array,
  incy: number,
) => void;

/** bf16 × bf16 → f32 GEMM (oneDNN's dnnl_gemm_bf16bf16f32, row-major); returns a dnnl status (0 = ok). */
type GemmBf16 = (
  transA: number,
  transB: number,
  m: number,
  n: number,
  k: number,
  alpha: number,
  a: Uint16Array,
  lda: number,
  b: Uint16Array,
  ldb: number,
  beta: number,
  c: Float32Array,
  ldc: number,
) => number;

export interface BlasLibrary {
  /** Family: openblas, mkl, blis, accelerate or cblas (an unknown CBLAS). */
  readonly vendor: string;
  /** What was loaded (a path or a soname). */
  readonly path: string;
  /** OpenBLAS's kernel (openblas_get_corename), e.g. "SkylakeX"; null where the library does not say. */
  readonly core: string | null;
  /** OpenBLAS's build configuration (openblas_get_config); null elsewhere. */
  readonly config: string | null;
  readonly sgemm: Sgemm;
  /** cblas_sgemv, where the library exports it (every CBLAS does; a partial one may not). */
  readonly sgemv?: Sgemv | null;
  /** Sets the library's thread count; false where it has no such call (Accelerate, plain CBLAS). */
  setThreads(threads: number): boolean;
}

export interface OneDnnLibrary {
  readonly path: string;
  readonly gemmBf16: GemmBf16;
  /** OpenMP thread count for oneDNN's calls (omp_set_num_threads of the OpenMP runtime it links). */
  setThreads(threads: number): boolean;
  /** That OpenMP runtime (a soname), or null where none was found. */
  readonly openmp: string | null;
}

// koffi's surface as used here (its own types are loose; the package is optional).
interface KoffiLib {
  func(definition: string): (...args: unknown[]) => unknown;
}
interface Koffi {
  load(path: string): KoffiLib;
}

interface Candidate {
  path: string;
  vendor: string;
}

function candidates(): Candidate[] {
  if (process.platform === "darwin")
    return [
      { path: "/System/Library/Frameworks/Accelerate.framework/Accelerate", vendor: "accelerate" },
      { path: "libopenblas.dylib", vendor: "openblas" },
      { path: "/opt/homebrew/opt/openblas/lib/libopenblas.dylib", vendor: "openblas" },
      { path: "/usr/local/opt/openblas/lib/libopenblas.dylib", vendor: "openblas" },
    ];
  if (process.platform === "win32")
    return [
      { path: "libopenblas.dll", vendor: "openblas" },
      { path: "mkl_rt.2.dll", vendor: "mkl" },
    ];
  return [
    { path: "libopenblas.so.0", vendor: "openblas" },
    { path: "libopenblas.so", vendor: "openblas" },
    { path: "libmkl_rt.so.2", vendor: "mkl" },
    { path: "libmkl_rt.so", vendor: "mkl" },
    { path: "libblis.so.4", vendor: "blis" },
    { path: "libcblas.so.3", vendor: "cblas" },
    // Debian's alternatives link: OpenBLAS or ATLAS when installed, else the slow reference BLAS.
    { path: "libblas.so.3", vendor: "cblas" },
  ];
}

function vendorOf(path: string): string {
  const p = path.toLowerCase();
  if (p.includes("openblas")) return "openblas";
  if (p.includes("mkl")) return "mkl";
  if (p.includes("blis")) return "blis";
  if (p.includes("accelerate")) return "accelerate";
  return "cblas";
}

async function loadKoffi(): Promise<Koffi> {
  try {
    const mod = (await import("koffi")) as unknown as { default?: Koffi } & Koffi;
    return mod.default ?? mod;
  } catch (err) {
    throw new NativeBackendUnavailableError(
      `native backend unavailable: the optional dependency koffi (FFI) did not load (${firstLine(err)})`,
    );
  }
}

/**
 * Where koffi's module is, for worker threads to load it (they resolve modules from the working directory, not
 * from this package); null where it cannot be resolved.
 */
export async function koffiModulePath(): Promise<string | null> {
  try {
    const { createRequire } = await import("node:module");
    return createRequire(import.meta.url).resolve("koffi");
  } catch {
    return null;
  }
}

function firstLine(err: unknown): string {
  return String(err instanceof Error ? err.message : err).split("\n")[0];
}

function optionalFunc(lib: KoffiLib, definition: string): ((...args: unknown[]) => unknown) | null {
  try {
    return lib.func(definition);
  } catch {
    return null;
  }
}

export interface LoadBlasOptions {
  /** A library to use instead of searching (also the KILN_BLAS environment variable). */
  library?: string;
  /**
   * Load OpenBLAS with OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE removed from the environment for the
   * duration of the load (restored right after), so it picks the kernel for this CPU instead of the
   * one those variables pin. Only effective when this process has not loaded OpenBLAS yet.
   */
  ignoreOpenblasEnv?: boolean;
}

const PINNING_VARIABLES = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"] as const;

/**
 * Environment set while a library loads (it reads it then) where the user has not set it, restored right
 * after. OpenBLAS's idle threads spin (sched_yield) for 2^28 cycles after each call before they sleep, so
 * between BLAS calls they took the second core from the wasm worker: with 2^18 (~0.1 ms) the decoder step on
 * two threads went from 225–259 to 177–184 ms and the LoRA step from 220–227 to 180–188 (interleaved rounds at
 * real-time priority, 2026-12-02). oneDNN's OpenMP threads spin the same way (libgomp's default wait policy):
 * passive took its 2-thread LoRA step from 170–195 to 143 ms.
 */
export const OPENBLAS_LOAD_ENV = { OPENBLAS_THREAD_TIMEOUT: "18" } as const;
export const ONEDNN_LOAD_ENV = { OMP_WAIT_POLICY: "passive" } as const;

/** Runs `load` with `defaults` in the environment where unset (and `remove` removed), then restores it. */
export function withLoadEnv<T>(defaults: Record<string, string>, remove: readonly string[], load: () => T): T {
  const saved = new Map<string, string | undefined>();
  for (const name of remove) {
    if (process.env[name] === undefined) continue;
    saved.set(name, process.env[name]);
    delete process.env[name];
  }
  for (const [name, value] of Object.entries(defaults)) {
    if (process.env[name] !== undefined) continue;
    saved.set(name, undefined);
    process.env[name] = value;
  }
  try {
    return load();
  } finally {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/** Loads the first CBLAS that opens and exports cblas_sgemm; throws NativeBackendUnavailableError saying why not. */
export async function loadBlas(options: LoadBlasOptions = {}): Promise<BlasLibrary> {
  const koffi = await loadKoffi();
  const explicit = options.library ?? process.env.KILN_BLAS;
  const list = explicit ? [{ path: explicit, vendor: vendorOf(explicit) }] : candidates();
  const failures: string[] = [];
  const loaded = withLoadEnv(OPENBLAS_LOAD_ENV, options.ignoreOpenblasEnv ? PINNING_VARIABLES : [], () => {
    for (const { path, vendor } of list) {
      let lib: KoffiLib;
      try {
        lib = koffi.load(path);
      } catch (err) {
        failures.push(`${path}: ${firstLine(err)}`);
        continue;
      }
      const sgemm = optionalFunc(lib, SGEMM_SIGNATURE);
      if (!sgemm) {
        failures.push(`${path}: no cblas_sgemm`);
        continue;
      }
      return bind(lib, path, vendor, sgemm as unknown as Sgemm);
    }
    return null;
  });
  if (loaded) return loaded;
  const where = explicit ? `KILN_BLAS/library ${explicit}` : "no CBLAS library found";
  throw new NativeBackendUnavailableError(
    `native backend unavailable: ${where} (${failures.length ? failures[0] : "nothing to try"}${
      failures.length > 1 ? `; tried ${failures.length}` : ""
    }); install one (Debian: apt install libopenblas0-pthread) or set KILN_BLAS=/path/to/libcblas`,
  );
}

function bind(lib: KoffiLib, path: string, vendor: string, sgemm: Sgemm): BlasLibrary {
  const corename = optionalFunc(lib, "const char* openblas_get_corename()");
  const getConfig = optionalFunc(lib, "const char* openblas_get_config()");
  const setters = [
    optionalFunc(lib, "void openblas_set_num_threads(int)"),
    optionalFunc(lib, "int MKL_Set_Num_Threads_Local(int)") ?? optionalFunc(lib, "void MKL_Set_Num_Threads(int)"),
    optionalFunc(lib, "void bli_thread_set_num_threads(int64_t)"),
  ].filter((f) => f !== null);
  const detected = corename ? "openblas" : vendor;
  return {
    vendor: detected,
    path,
    core: corename ? String(corename()) : null,
    config: getConfig ? String(getConfig()) : null,
    sgemm,
    sgemv: optionalFunc(lib, SGEMV_SIGNATURE) as unknown as Sgemv | null,
    setThreads(threads: number): boolean {
      for (const set of setters) set(threads);
      return setters.length > 0;
    },
  };
}

/** oneDNN's bf16 GEMM (what PyTorch runs bf16 matmuls on CPU with), or null with the reason. */
export async function loadOneDnn(library?: string): Promise<OneDnnLibrary | string> {
  const koffi = await loadKoffi();
  const path =
    library ?? process.env.KILN_ONEDNN ?? (process.platform === "darwin" ? "libdnnl.3.dylib" : "libdnnl.so.2");
  const tried = library || process.env.KILN_ONEDNN ? [path] : [path, "libdnnl.so.3", "libdnnl.so"];
  for (const p of tried) {
    let lib: KoffiLib;
    try {
      lib = withLoadEnv(ONEDNN_LOAD_ENV, [], () => koffi.load(p));
    } catch {
      continue;
    }
    const gemm = optionalFunc(lib, GEMM_BF16_SIGNATURE);
    if (!gemm) return `${p} has no dnnl_gemm_bf16bf16f32`;
    // The library loads on any x86-64, but its bf16 GEMM has kernels only for AVX-512 CPUs; elsewhere
    // every call fails (status 3, unimplemented). Ask once with 1 × 1 before promising it.
    const one = 0x3f80; // 1.0 in bf16
    const product = new Float32Array(1);
    const status = (gemm as unknown as GemmBf16)(
      78, // 'N'
      78,
      1,
      1,
      1,
      1,
      new Uint16Array([one]),
      1,
      new Uint16Array([one]),
      1,
      0,
      product,
      1,
    );
    if (status !== 0 || product[0] !== 1)
      return `${p}: dnnl_gemm_bf16bf16f32 does not run on this CPU (status ${status}${status === 3 ? ", unimplemented: oneDNN's bf16 GEMM needs AVX-512" : ""})`;
    // oneDNN's CPU runtime is OpenMP in Debian's build: its thread count is the OpenMP runtime's.
    let ompSet: ((...args: unknown[]) => unknown) | null = null;
    let openmp: string | null = null;
    for (const omp of ["libgomp.so.1", "libiomp5.so", "libomp.so"]) {
      try {
        ompSet = optionalFunc(koffi.load(omp), "void omp_set_num_threads(int)");
      } catch {
        ompSet = null;
      }
      if (ompSet) {
        openmp = omp;
        break;
      }
    }
    return {
      path: p,
      gemmBf16: gemm as unknown as GemmBf16,
      openmp,
      setThreads(threads: number): boolean {
        ompSet?.(threads);
        return ompSet !== null;
      },
    };
  }
  return `oneDNN not found (${tried.join(", ")}; Debian: apt install libdnnl2)`;
}

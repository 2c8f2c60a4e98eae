// What every backend initialiser may read from initBackend's options (initBackend passes the caller's options
// through whole). A leaf, so the backends need not import init-backend.ts, which imports them.

export interface BaseBackendOptions {
  /** Worker threads for the wasm backend (default: min(2, cores)). */
  threads?: number;
  /** gpu.js mode for the gpujs backend (default: gpu.js picks; "cpu" forces its CPU fallback). */
  gpujsMode?: "gpu" | "cpu" | "headlessgl" | "webgl" | "webgl2" | "webasm";
  /**
   * wasm: use the relaxed-SIMD FMA kernels. "auto" (default) when the runtime already supports them;
   * true also turns on V8's --experimental-wasm-relaxed-simd in Node (process-wide, opt-in).
   */
  relaxedSimd?: boolean | "auto";
  /** Make it the active backend (default true). */
  activate?: boolean;
}

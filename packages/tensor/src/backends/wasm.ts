// The wasm backend: own SIMD kernels (GEMM with packed panels, RMSNorm, cross-entropy)
// on a shared WebAssembly.Memory with worker threads. Kernels it lacks fall back to js.
import { registerKernels } from "../backend.js";
import { registerBackendInitialiser } from "../init-backend.js";
import { makeGemmAttention } from "./attention-gemm.js";
import { type WasmKernels, createWasmKernels } from "../wasm/index.js";

let instance: WasmKernels | null = null;

/** The live wasm kernels (after `initBackend("wasm")`), e.g. to dispose workers. */
export function wasmKernels(): WasmKernels | null {
  return instance;
}

/** Stop the wasm backend's workers (the backend stays registered but must be re-initialised to compute). */
export function disposeWasmBackend(): void {
  instance?.dispose();
  instance = null;
}

registerBackendInitialiser("wasm", async (options) => {
  instance?.dispose();
  const k = await createWasmKernels({ threads: options.threads });
  instance = k;
  const matmul = (a: Float32Array, b: Float32Array, out: Float32Array, shape: Parameters<WasmKernels["matmul"]>[3]) =>
    k.matmul(a, b, out, shape);
  registerKernels("wasm", {
    matmul,
    ...makeGemmAttention(matmul),
    matmulBf16B: (a, b, out, shape) => k.matmulBf16B(a, b, out, shape),
    rmsNorm: (x, w, out, rstd, dim, eps, zc) => k.rmsNorm(x, w, out, rstd, dim, eps, zc),
    crossEntropyForward: (l, t, loss, lse, rows, vocab, ignore) =>
      k.crossEntropyForward(l, t, loss, lse, rows, vocab, ignore),
    crossEntropyBackward: (l, t, lse, g, d, rows, vocab, ignore) =>
      k.crossEntropyBackward(l, t, lse, g, d, rows, vocab, ignore),
  });
});

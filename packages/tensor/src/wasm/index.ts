// @kiln/tensor WASM SIMD kernels on raw typed arrays (f32 GEMM incl. bf16 B, RMSNorm, cross-entropy, attention).
export type {
  AttentionShape,
  AttentionTiles,
  MatmulShape,
  WasmKernelOptions,
  WasmKernels,
  WorkerBlas,
} from "./types.js";
export { createWasmKernels } from "./kernels.js";
export { enableRelaxedSimd, relaxedSimdSupported, sharedMemorySupported, wasmSimdSupported } from "./features.js";

// @kiln/tensor: tensors with reverse-mode autograd for transformer training.
export * from "./autograd.js";
export * from "./backend.js";
export { disposeGpujsBackend, gpujsMode } from "./backends/gpujs.js";
export { disposeWasmBackend, wasmKernels } from "./backends/wasm.js";
export {
  disposeNativeBackend,
  NativeBackendUnavailableError,
  NativeGemm,
  nativeBackendInfo,
  nativeGemm,
  probeSkinnyRowSplit,
  probeSplitAlignment,
  WORKER_SPIN_MICROS,
  type Bf16Gemm,
  type GemmSplit,
  type NativeBackendInfo,
  type NativeBackendOptions,
  type SplitAlignment,
} from "./backends/native/index.js";
export type { AutoBackendOptions, BackendChoice } from "./backends/native/auto.js";
export {
  disposeWebGPUBackend,
  WEBGPU_INSTALL_HINT,
  WebGPUUnavailableError,
  webgpuRuntime,
  type GpuArray,
  type WebGPUBackendOptions,
} from "./backends/webgpu/index.js";
export { initBackend, type InitBackendOptions } from "./init-backend.js";
export * from "./checkpoint.js";
export * from "./dtype.js";
export * from "./errors.js";
export * from "./ops/attention.js";
export * from "./ops/create.js";
export * from "./ops/elementwise.js";
export * from "./ops/matmul.js";
export * from "./ops/movement.js";
export * from "./ops/nn.js";
export * from "./ops/reduce.js";
export { erf } from "./ops/special.js";
export * from "./optim.js";
export * from "./random.js";
export * from "./schedules.js";
export * from "./storage.js";
export { broadcastShapes, sizeOf, stridesOf, type Shape } from "./shape.js";
export * from "./tensor.js";
export {
  createWasmKernels,
  enableRelaxedSimd,
  relaxedSimdSupported,
  wasmSimdSupported,
  type WasmKernels,
  type WorkerBlas,
} from "./wasm/index.js";

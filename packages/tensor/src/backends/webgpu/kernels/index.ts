// The WebGPU kernels, one per entry of `Kernels` (src/kernel-contract.ts), over GPU arrays instead of host arrays.
export { gpuAttentionBackward, gpuAttentionDecodeRagged, gpuAttentionForward } from "./attention.js";
export { GEMM_CONFIG, type GemmConfig, gpuMatmul, type MatmulOptions, fillZeroRange } from "./matmul.js";
export {
  gpuAdamwUpdate,
  gpuRmsNorm,
  gpuRmsNormBackward,
  gpuRopeBackward,
  gpuRopeForward,
  gpuSwigluBackward,
  gpuSwigluForward,
} from "./rows.js";
export { gpuCrossEntropyBackward, gpuCrossEntropyForward, gpuKlDivergenceRows, gpuSoftmaxRows } from "./vocab.js";

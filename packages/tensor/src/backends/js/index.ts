import type { Kernels } from "../../kernel-contract.js";
import { adamwUpdateJs } from "./adamw.js";
import { attentionBackwardJs, attentionDecodeRaggedJs, attentionForwardJs } from "./attention.js";
import { crossEntropyBackwardJs, crossEntropyForwardJs, klDivergenceRowsJs, softmaxRowsJs } from "./cross-entropy.js";
import {
  argmaxJs,
  binaryJs,
  binaryScalarJs,
  castJs,
  clampJs,
  copyJs,
  fillJs,
  gatherAxisJs,
  gatherRowsJs,
  reduceJs,
  scatterAddAxisJs,
  scatterAddRowsJs,
  softmaxBackwardJs,
  softmaxJs,
  unaryBackwardJs,
  unaryJs,
  whereJs,
} from "./generic.js";
import { matmulBf16BJs, matmulJs } from "./matmul.js";
import { rmsNormBackwardJs, rmsNormJs } from "./norms.js";
import { ropeBackwardJs, ropeForwardJs } from "./rope.js";
import { swigluBackwardJs, swigluForwardJs } from "./swiglu.js";

/** The js backend: plain TypeScript kernels, the reference every other backend is checked against. */
export const jsKernels: Kernels = {
  matmul: matmulJs,
  matmulBf16B: matmulBf16BJs,
  rmsNorm: rmsNormJs,
  rmsNormBackward: rmsNormBackwardJs,
  crossEntropyForward: crossEntropyForwardJs,
  crossEntropyBackward: crossEntropyBackwardJs,
  softmaxRows: softmaxRowsJs,
  klDivergenceRows: klDivergenceRowsJs,
  adamwUpdate: adamwUpdateJs,
  ropeForward: ropeForwardJs,
  ropeBackward: ropeBackwardJs,
  swigluForward: swigluForwardJs,
  swigluBackward: swigluBackwardJs,
  attentionForward: attentionForwardJs,
  attentionBackward: attentionBackwardJs,
  attentionDecodeRagged: attentionDecodeRaggedJs,
  unary: unaryJs,
  unaryBackward: unaryBackwardJs,
  binary: binaryJs,
  binaryScalar: binaryScalarJs,
  where: whereJs,
  clamp: clampJs,
  reduce: reduceJs,
  argmax: argmaxJs,
  softmax: softmaxJs,
  softmaxBackward: softmaxBackwardJs,
  copy: copyJs,
  gatherRows: gatherRowsJs,
  scatterAddRows: scatterAddRowsJs,
  gatherAxis: gatherAxisJs,
  scatterAddAxis: scatterAddAxisJs,
  cast: castJs,
  fill: fillJs,
};

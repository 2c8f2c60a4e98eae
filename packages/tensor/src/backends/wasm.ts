// The wasm backend: own SIMD kernels (GEMM with packed panels, RMSNorm, cross-entropy,
// fused attention) on a shared WebAssembly.Memory with worker threads. Kernels it lacks
// fall back to js; attention with a key-padding mask runs the GEMM-tiled version.
import type { AttentionShape, HostArrays } from "../backend.js";
import { registerBackend, unregisterBackend } from "../backend.js";
import type { BaseBackendOptions } from "../backend-options.js";
import { type WasmKernels, createWasmKernels, enableRelaxedSimd } from "../wasm/index.js";
import { makeGemmAttention } from "./attention-gemm.js";
import { jsKernels } from "./js/index.js";
import { WasmStorage } from "./wasm-storage.js";

let instance: WasmKernels | null = null;

/** The live wasm kernels (after `initBackend("wasm")`), e.g. to dispose workers. */
export function wasmKernels(): WasmKernels | null {
  return instance;
}

/** Stop the wasm backend's workers (the backend stays registered but must be re-initialised to compute). */
export function disposeWasmBackend(): void {
  instance?.dispose();
  instance = null;
  unregisterBackend("wasm");
}

function wasmShape(s: AttentionShape) {
  return {
    batch: s.batch,
    heads: s.heads,
    kvHeads: s.kvHeads,
    tq: s.tq,
    tk: s.tk,
    dim: s.headDim,
    causal: s.causal,
    scale: s.scale,
  };
}

/** Compile the kernels, start the workers and register the "wasm" kernels (used by initBackend). */
export async function initWasmBackend(options: BaseBackendOptions): Promise<void> {
  instance?.dispose();
  // relaxedSimd: true opts Node into V8's relaxed-SIMD flag (process-wide) for the FMA kernel;
  // "auto" uses it only where the runtime already validates it (e.g. current browsers).
  if (options.relaxedSimd === true) enableRelaxedSimd();
  const k = await createWasmKernels({ threads: options.threads, relaxedSimd: options.relaxedSimd ?? "auto" });
  instance = k;
  const matmul = k.matmul.bind(k);
  const tiled = makeGemmAttention(matmul);
  // Tensors created while wasm is active live in the kernels' memory (see wasm-storage.ts).
  registerBackend<HostArrays>(new WasmStorage(k.wasmHeap), {
    matmul,
    matmulBf16B: k.matmulBf16B.bind(k),
    rmsNorm: k.rmsNorm.bind(k),
    rmsNormBackward: k.rmsNormBackward.bind(k),
    crossEntropyForward: k.crossEntropyForward.bind(k),
    crossEntropyBackward: k.crossEntropyBackward.bind(k),
    softmaxRows: k.softmaxRows.bind(k),
    klDivergenceRows: k.klDivergenceRows.bind(k),
    ropeForward: k.ropeForward.bind(k),
    ropeBackward: k.ropeBackward.bind(k),
    swigluForward: k.swiglu.bind(k),
    swigluBackward: k.swigluBackward.bind(k),
    adamwUpdate: k.adamw.bind(k),
    // Resident operands run in the module (SIMD, memory.copy); anything else (host arrays, shapes the module
    // does not cover, other ops) takes the js kernel on the same arrays.
    binary: (op, a, b, out, s) => {
      if (!k.binaryResident(op, a, b, out, s.shape, s.aStrides, s.bStrides)) jsKernels.binary(op, a, b, out, s);
    },
    binaryScalar: (op, x, s, out, n, scalarLeft) => {
      if (!k.binaryScalarResident(op, x, s, out, n, scalarLeft)) jsKernels.binaryScalar(op, x, s, out, n, scalarLeft);
    },
    copy: (x, out, s) => {
      if (!k.copyResident(x, out, s.shape, s.srcOffset, s.srcStrides, s.dstOffset, s.dstStrides))
        jsKernels.copy(x, out, s);
    },
    cast: (x, out, n, from, to) => {
      const f32 = x as Float32Array;
      const bits = out as Uint16Array;
      if (from === "bf16" && to === "f32" && k.bf16Resident("widen", x as Uint16Array, out as Float32Array, n)) return;
      if (from === "f32" && to === "bf16" && k.bf16Resident("round", f32, bits, n)) return;
      jsKernels.cast(x, out, n, from, to);
    },
    attentionForward: (q, kk, v, mask, out, lse, s) =>
      mask ? tiled.attentionForward(q, kk, v, mask, out, lse, s) : k.attentionForward(q, kk, v, out, lse, wasmShape(s)),
    attentionDecodeRagged: k.attentionDecodeRagged.bind(k),
    attentionBackward: (q, kk, v, mask, out, lse, dOut, dq, dk, dv, s) =>
      mask
        ? tiled.attentionBackward(q, kk, v, mask, out, lse, dOut, dq, dk, dv, s)
        : k.attentionBackward(q, kk, v, out, dOut, lse, dq, dk, dv, wasmShape(s)),
  });
}

// The webgpu backend: tensors live in GPU buffers (WebGPUStorage) and every kernel is a WGSL dispatch
// encoded into the runtime's pending batch; nothing waits on the device until a read (`await t.data()`).
// In Node the device comes from the optional `webgpu` package (Dawn), in browsers from navigator.gpu.
import { type KernelArrays, type Kernels, registerBackend, unregisterBackend } from "../../backend.js";
import type { DType, StorageArray } from "../../dtype.js";
import { BackendError } from "../../errors.js";
import type { BaseBackendOptions } from "../../backend-options.js";
import type { MemoryInfo, StorageBackend } from "../../storage.js";
import * as G from "./kernels/generic.js";
import * as K from "./kernels/index.js";
import { type GpuArray, type GpuDType, WebGPURuntime, type WebGPURuntimeOptions } from "./runtime.js";

export { WEBGPU_INSTALL_HINT, WebGPUUnavailableError } from "./device.js";
export { type GpuArray, WebGPURuntime } from "./runtime.js";

/** Kernel arguments on webgpu: typed ranges of GPU buffers. */
export interface GpuArrays extends KernelArrays {
  f32: GpuArray;
  i32: GpuArray;
  u16: GpuArray;
  any: GpuArray;
}

const gpuDType = (dtype: DType): GpuDType => dtype;

/** StorageBackend over GPU buffers: native = the allocation (a GpuArray at offset 0), views are typed ranges of it. */
export class WebGPUStorage implements StorageBackend<GpuArray, GpuArray> {
  readonly name = "webgpu";
  readonly hostVisible = false;
  readonly epoch = 0;
  readonly adoptsUploads = false;
  readonly releaseOnGc = true;

  constructor(readonly runtime: WebGPURuntime) {}

  alloc(dtype: DType, size: number): GpuArray {
    return this.runtime.alloc(gpuDType(dtype), size);
  }

  upload(host: StorageArray, dtype: DType): GpuArray {
    return this.runtime.upload(host, gpuDType(dtype));
  }

  view(native: GpuArray, dtype: DType, offset: number, length: number): GpuArray {
    return { buffer: native.buffer, offset: native.offset + offset, length, dtype: gpuDType(dtype) };
  }

  async read(native: GpuArray, dtype: DType, offset: number, length: number): Promise<StorageArray> {
    return (await this.runtime.read(this.view(native, dtype, offset, length))) as StorageArray;
  }

  release(native: GpuArray): void {
    this.runtime.release(native);
  }

  memory(): MemoryInfo {
    const rt = this.runtime;
    return {
      liveBytes: rt.liveBytes,
      pooledBytes: rt.pooledBytes,
      peakBytes: rt.peakBytes,
      allocations: rt.allocations,
    };
  }

  trimPool(): void {
    this.runtime.trimPool();
  }
}

/** The kernels of `Kernels` over GPU arrays, bound to one runtime. */
export function webgpuKernels(rt: WebGPURuntime, options: { f16Math?: boolean } = {}): Kernels<GpuArrays> {
  const kernels = deviceKernels(rt, options);
  // Host arrays reaching a kernel (RoPE tables, key masks, inputs of tensors still on js storage) are
  // uploaded for the call and released once it is encoded.
  const wrapped: Record<string, unknown> = {};
  for (const [name, fn] of Object.entries(kernels) as [string, (...args: unknown[]) => void][]) {
    wrapped[name] = (...args: unknown[]) => {
      const temps: GpuArray[] = [];
      const mapped = args.map((a) => {
        if (!ArrayBuffer.isView(a) || a instanceof DataView) return a;
        const dtype: GpuDType =
          a instanceof Float32Array
            ? "f32"
            : a instanceof Int32Array
              ? "i32"
              : a instanceof Uint16Array
                ? "bf16"
                : "u8";
        const g = rt.upload(a as Float32Array, dtype);
        temps.push(g);
        return g;
      });
      try {
        fn(...mapped);
      } finally {
        for (const t of temps) rt.release(t);
      }
    };
  }
  return wrapped as unknown as Kernels<GpuArrays>;
}

function deviceKernels(rt: WebGPURuntime, options: { f16Math?: boolean }): Kernels<GpuArrays> {
  // RoPE tables and key masks arrive as host arrays in the signature; webgpuKernels has uploaded them.
  const dev = (a: unknown) => a as GpuArray;
  const matmulOptions = { f16Math: options.f16Math ?? false };
  return {
    matmul: (a, b, out, shape) => K.gpuMatmul(rt, a, b, out, shape, matmulOptions),
    matmulBf16B: (a, b, out, shape) =>
      K.gpuMatmul(rt, a, b.dtype === "f16" ? b : { ...b, dtype: "bf16" }, out, shape, matmulOptions),
    rmsNorm: (x, w, out, rstd, dim, eps, zc) => K.gpuRmsNorm(rt, x, w, out, rstd, dim, eps, zc),
    rmsNormBackward: (x, w, rstd, g, dx, dw, dim, zc) => K.gpuRmsNormBackward(rt, x, w, rstd, g, dx, dw, dim, zc),
    crossEntropyForward: (l, t, loss, lse, rows, vocab, ig) =>
      K.gpuCrossEntropyForward(rt, l, t, loss, lse, rows, vocab, ig),
    crossEntropyBackward: (l, t, lse, gl, dl, rows, vocab, ig) =>
      K.gpuCrossEntropyBackward(rt, l, t, lse, gl, dl, rows, vocab, ig),
    softmaxRows: (l, p, lse, rows, vocab, rs) => K.gpuSoftmaxRows(rt, l, p, lse, rows, vocab, rs),
    klDivergenceRows: (s, t, tr, g, loss, ls, lt, shape, gs) =>
      K.gpuKlDivergenceRows(rt, s, t, tr, g, loss, ls, lt, shape, gs),
    ropeForward: (x, cos, sin, out, shape) => K.gpuRopeForward(rt, x, dev(cos), dev(sin), out, shape),
    ropeBackward: (d, cos, sin, dx, shape) => K.gpuRopeBackward(rt, d, dev(cos), dev(sin), dx, shape),
    swigluForward: (g, u, out, sig) => K.gpuSwigluForward(rt, g, u, out, sig),
    swigluBackward: (g, u, sig, d, dg, du) => K.gpuSwigluBackward(rt, g, u, sig, d, dg, du),
    adamwUpdate: (p, g, m, v, step) => K.gpuAdamwUpdate(rt, p, g, m, v, step),
    attentionForward: (q, k, v, mask, out, lse, shape) =>
      K.gpuAttentionForward(rt, q, k, v, mask && dev(mask), out, lse, shape),
    attentionBackward: (q, k, v, mask, out, lse, dOut, dq, dk, dv, shape) =>
      K.gpuAttentionBackward(rt, q, k, v, mask && dev(mask), out, lse, dOut, dq, dk, dv, shape),
    attentionDecodeRagged: (q, keys, values, out, lse, shape) =>
      K.gpuAttentionDecodeRagged(rt, q, keys, values, out, lse, shape),
    unary: (op, x, out, n) => G.gpuUnary(rt, op, x, out, n),
    unaryBackward: (op, x, y, g, dx, n) => G.gpuUnaryBackward(rt, op, x, y, g, dx, n),
    binary: (op, a, b, out, shape) => G.gpuBinary(rt, op, a, b, out, shape),
    binaryScalar: (op, x, s, out, n, left) => G.gpuBinaryScalar(rt, op, x, s, out, n, left),
    where: (c, a, b, out, n) => G.gpuWhere(rt, c, a, b, out, n),
    clamp: (x, out, n, lo, hi) => G.gpuClamp(rt, x, out, n, lo, hi),
    reduce: (op, x, out, outer, n, inner) => G.gpuReduce(rt, op, x, out, outer, n, inner),
    argmax: (x, out, outer, n, inner) => G.gpuArgmax(rt, x, out, outer, n, inner),
    softmax: (mode, x, out, rows, n) => G.gpuSoftmax(rt, mode, x, out, rows, n),
    softmaxBackward: (mode, y, g, dx, rows, n) => G.gpuSoftmaxBackward(rt, mode, y, g, dx, rows, n),
    copy: (x, out, shape) => G.gpuCopy(rt, x, out, shape),
    gatherRows: (table, ids, out, shape) => G.gpuGatherRows(rt, table, ids, out, shape),
    scatterAddRows: (src, ids, out, count, d) => G.gpuScatterAddRows(rt, src, ids, out, count, d),
    gatherAxis: (x, ix, out, outer, n, k, inner) => G.gpuGatherAxis(rt, x, ix, out, outer, n, k, inner),
    scatterAddAxis: (g, ix, dx, outer, n, k, inner) => G.gpuScatterAddAxis(rt, g, ix, dx, outer, n, k, inner),
    cast: (x, out, n, from, to) => G.gpuCast(rt, x, out, n, from, to),
    fill: (out, n, value, step, dtype) => G.gpuFill(rt, out, n, value, step, dtype),
  };
}

let active: WebGPUStorage | null = null;

export interface WebGPUBackendOptions extends WebGPURuntimeOptions {
  /** GEMMs multiply in f16 where the adapter has shader-f16 (faster on GPUs, f16 precision). Default false. */
  webgpuF16Math?: boolean;
}

/** `initBackend("webgpu")`: acquire the device and register storage and kernels under "webgpu". */
export async function initWebGPUBackend(options: BaseBackendOptions & WebGPUBackendOptions = {}): Promise<void> {
  const runtime = await WebGPURuntime.create(options);
  active = new WebGPUStorage(runtime);
  registerBackend<GpuArrays>(active, webgpuKernels(runtime, { f16Math: options.webgpuF16Math }));
}

/** The runtime of the registered webgpu backend (adapter info, limits, sync), or null before initBackend. */
export function webgpuRuntime(): WebGPURuntime | null {
  return active?.runtime ?? null;
}

/** Release the device and unregister the backend (tensors on it become unusable). */
export function disposeWebGPUBackend(): void {
  if (!active) return;
  active.runtime.destroy();
  active = null;
  unregisterBackend("webgpu");
}

export function requireWebGPU(): WebGPURuntime {
  if (!active) throw new BackendError('webgpu: not initialised; call await initBackend("webgpu")');
  return active.runtime;
}

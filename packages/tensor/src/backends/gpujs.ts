// The gpujs backend: gpu.js kernels for the heavy ops (batched GEMM, also with bf16
// weights widened on the host). gpu.js runs them on WebGL in browsers, on headless-gl
// in Node when the optional `gl` module is built, and otherwise on its CPU / webasm
// fallbacks. gpu.js is an optional peer dependency, loaded only by initBackend("gpujs").
import { type MatmulShape, registerKernels, unregisterBackend } from "../backend.js";
import { BackendError } from "../errors.js";
import type { BaseBackendOptions } from "../backend-options.js";

export type GpujsMode = "gpu" | "cpu" | "headlessgl" | "webgl" | "webgl2" | "webasm";

// Minimal structural types for the parts of gpu.js used here (it ships loose typings).
interface GpuKernel {
  (...args: unknown[]): unknown;
  setOutput(output: number[]): GpuKernel;
  destroy?(): void;
}
interface GpuInstance {
  mode: string;
  createKernel(fn: unknown, settings?: Record<string, unknown>): GpuKernel;
  destroy(): Promise<void> | void;
}

let gpu: GpuInstance | null = null;
const kernels = new Map<string, GpuKernel>();

/** The mode gpu.js actually runs in after `initBackend("gpujs")` (e.g. "cpu" without GL). */
export function gpujsMode(): string | null {
  return gpu?.mode ?? null;
}

// One GEMM body for every layout: indices computed from the flags (0/1 numbers).
function gemmKernelSource(
  this: { thread: { x: number; y: number; z: number }; constants: Record<string, number> },
  a: number[],
  b: number[],
) {
  const j = this.thread.x;
  const i = this.thread.y;
  const z = this.thread.z;
  const m = this.constants.m;
  const n = this.constants.n;
  const k = this.constants.k;
  const aBase = z * this.constants.strideA;
  const bBase = z * this.constants.strideB;
  let sum = 0;
  for (let p = 0; p < k; p++) {
    let av = 0;
    let bv = 0;
    if (this.constants.transA > 0) av = a[aBase + p * m + i];
    else av = a[aBase + i * k + p];
    if (this.constants.transB > 0) bv = b[bBase + j * k + p];
    else bv = b[bBase + p * n + j];
    sum += av * bv;
  }
  return sum;
}

function gemmKernel(shape: MatmulShape): GpuKernel {
  if (!gpu) throw new BackendError('gpujs: not initialised; call await initBackend("gpujs")');
  const strideA = shape.batchStrideA ?? shape.m * shape.k;
  const strideB = shape.batchStrideB ?? shape.k * shape.n;
  const constants = {
    m: shape.m,
    n: shape.n,
    k: shape.k,
    transA: shape.transA ? 1 : 0,
    transB: shape.transB ? 1 : 0,
    strideA,
    strideB,
  };
  const key = JSON.stringify([constants, shape.batch]);
  let kernel = kernels.get(key);
  if (!kernel) {
    kernel = gpu
      .createKernel(gemmKernelSource, { constants, loopMaxIterations: Math.max(1, shape.k), tactic: "precision" })
      .setOutput([shape.n, shape.m, shape.batch]);
    kernels.set(key, kernel);
  }
  return kernel;
}

function matmulGpujs(a: Float32Array, b: Float32Array, out: Float32Array, shape: MatmulShape): void {
  const { batch, m, n } = shape;
  if (batch * m * n === 0) return;
  if (shape.k === 0) {
    if (!shape.accumulate) out.fill(0, 0, batch * m * n);
    return;
  }
  const result = gemmKernel(shape)(a, b) as Float32Array[][];
  let o = 0;
  for (let z = 0; z < batch; z++) {
    for (let i = 0; i < m; i++) {
      const row = result[z][i];
      if (shape.accumulate) for (let j = 0; j < n; j++) out[o + j] += row[j];
      else out.set(row.subarray(0, n), o);
      o += n;
    }
  }
}

function matmulBf16BGpujs(a: Float32Array, bBits: Uint16Array, out: Float32Array, shape: MatmulShape): void {
  const wide = new Float32Array(bBits.length);
  const wideBits = new Uint32Array(wide.buffer);
  for (let i = 0; i < bBits.length; i++) wideBits[i] = bBits[i] << 16;
  matmulGpujs(a, wide, out, shape);
}

/** Release gpu.js contexts and compiled kernels. */
export async function disposeGpujsBackend(): Promise<void> {
  for (const k of kernels.values()) k.destroy?.();
  kernels.clear();
  const g = gpu;
  gpu = null;
  unregisterBackend("gpujs");
  await g?.destroy();
}

/** Load gpu.js (optional peer) and register the "gpujs" kernels (used by initBackend). */
export async function initGpujsBackend(options: BaseBackendOptions): Promise<void> {
  let mod: { GPU: new (settings?: { mode?: string }) => GpuInstance };
  try {
    const specifier = "gpu.js";
    mod = (await import(/* @vite-ignore */ specifier)) as typeof mod;
    if (!mod.GPU && (mod as unknown as { default?: typeof mod }).default)
      mod = (mod as unknown as { default: typeof mod }).default;
  } catch (cause) {
    throw new BackendError(
      `initBackend("gpujs"): the optional peer dependency gpu.js is not installed (npm i gpu.js@2.24.1): ${String(cause)}`,
    );
  }
  await disposeGpujsBackend();
  gpu = new mod.GPU(options.gpujsMode ? { mode: options.gpujsMode } : {});
  registerKernels("gpujs", { matmul: matmulGpujs, matmulBf16B: matmulBf16BGpujs });
}

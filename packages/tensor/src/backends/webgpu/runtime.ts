// The WebGPU runtime: a buffer pool by size class with a live-bytes counter, a pipeline cache keyed by
// shader + constants, and command batching — dispatches are encoded into one command encoder and
// submitted together; nothing waits on the GPU until a read.
import type {} from "webgpu"; // the GPU* types (@webgpu/types) only; erased at runtime
import { BackendError } from "../../errors.js";
import { type WebGPUDeviceInfo, acquireDevice } from "./device.js";

export type GpuDType = "f32" | "i32" | "u32" | "bf16" | "f16" | "u8";

export const BYTES_PER_ELEMENT: Record<GpuDType, number> = { f32: 4, i32: 4, u32: 4, bf16: 2, f16: 2, u8: 1 };

/**
 * A typed range of a GPU buffer: `length` elements of `dtype` starting `offset` elements into `buffer`.
 * bf16/f16 are stored two per u32 word and u8 four per word (little-endian, as the host's typed arrays).
 */
export interface GpuArray {
  readonly buffer: GPUBuffer;
  readonly offset: number;
  readonly length: number;
  readonly dtype: GpuDType;
}

export type HostArray = Float32Array | Int32Array | Uint32Array | Uint16Array | Uint8Array;

/** A bound range of a buffer plus the element offset of the array inside it (shaders add it). */
export interface BoundWindow {
  resource: GPUBufferBinding;
  /** Elements of the array's dtype from the binding start to the array's first element. */
  elementOffset: number;
}

const STORAGE_USAGE = 0x80 | 0x4 | 0x8; // STORAGE | COPY_SRC | COPY_DST (GPUBufferUsage, without the global)
const UNIFORM_SLOT = 256;
const UNIFORM_SLOTS = 512;

/** Size classes: powers of two up to 1 MiB, then multiples of 1 MiB (bounded waste, bounded class count). */
function sizeClass(bytes: number): number {
  const b = Math.max(256, bytes);
  if (b <= 1 << 20) return 2 ** Math.ceil(Math.log2(b));
  return Math.ceil(b / (1 << 20)) * (1 << 20);
}

export interface DispatchBinding {
  array: GpuArray;
  /** The element range the dispatch touches (default: the whole array). */
  range?: [number, number];
}

export interface WebGPURuntimeOptions {
  /** Bind at most this many bytes per storage binding (below the adapter's limit; tests of chunking). */
  maxStorageBindingBytes?: number;
}

export class WebGPURuntime {
  readonly device: GPUDevice;
  readonly info: WebGPUDeviceInfo;
  private readonly pool = new Map<number, GPUBuffer[]>();
  private readonly pipelines = new Map<string, GPUComputePipeline>();
  private encoder: GPUCommandEncoder | null = null;
  private pass: GPUComputePassEncoder | null = null;
  private readonly uniformData = new ArrayBuffer(UNIFORM_SLOT * UNIFORM_SLOTS);
  private uniformSlots = 0;
  private readonly uniformBuffer: GPUBuffer;
  private pendingDispatches = 0;
  private liveBytesCount = 0;
  /** Live allocations (arrays handed out by alloc/upload and not released). */
  allocations = 0;
  /** Staging buffers of uploads encoded into the pending batch; destroyed once it is submitted. */
  private stagingThisBatch: GPUBuffer[] = [];
  private pooledBytesCount = 0;
  private peakBytesCount = 0;
  private destroyed = false;
  private dummyArray: GpuArray | null = null;
  private deviceError: string | null = null;
  /** Buffers released while the encoder may still reference them: pooled only after the next submit. */
  private releasedThisBatch: GPUBuffer[] = [];

  static async create(options: WebGPURuntimeOptions = {}): Promise<WebGPURuntime> {
    return new WebGPURuntime(await acquireDevice(), options);
  }

  private readonly bindingLimit: number;

  constructor(info: WebGPUDeviceInfo, options: WebGPURuntimeOptions = {}) {
    this.info = info;
    this.bindingLimit = Math.min(
      info.limits.maxStorageBufferBindingSize,
      options.maxStorageBindingBytes ?? Number.POSITIVE_INFINITY,
    );
    this.device = info.device;
    // Validation and shader errors arrive asynchronously; the next read or sync reports them.
    this.device.onuncapturederror = (event) => {
      this.deviceError ??= event.error.message;
    };
    this.uniformBuffer = this.device.createBuffer({
      size: UNIFORM_SLOT * UNIFORM_SLOTS,
      usage: 0x40 | 0x8, // UNIFORM | COPY_DST
    });
  }

  /** A small shared array bound where a kernel's optional operand is absent (never written). */
  get dummy(): GpuArray {
    if (!this.dummyArray) {
      const buffer = this.device.createBuffer({ size: 256, usage: STORAGE_USAGE });
      this.dummyArray = { buffer, offset: 0, length: 1, dtype: "f32" };
    }
    return this.dummyArray;
  }

  /** Bytes in arrays handed out and not released (pooled buffers excluded). */
  get liveBytes(): number {
    return this.liveBytesCount;
  }
  get peakBytes(): number {
    return this.peakBytesCount;
  }
  get pooledBytes(): number {
    return this.pooledBytesCount;
  }
  resetPeak(): void {
    this.peakBytesCount = this.liveBytesCount;
  }

  /** A buffer-backed array of `length` elements, zero-filled (a reused pooled buffer is cleared in queue order). */
  alloc(dtype: GpuDType, length: number): GpuArray {
    this.checkAlive();
    const bytes = Math.max(4, Math.ceil((length * BYTES_PER_ELEMENT[dtype]) / 4) * 4);
    const cls = sizeClass(bytes);
    if (cls > this.info.limits.maxBufferSize)
      throw new BackendError(
        `webgpu: an array of ${length} ${dtype} (${bytes} bytes) exceeds the adapter's maxBufferSize (${this.info.limits.maxBufferSize})`,
      );
    let buffer = this.pool.get(cls)?.pop();
    if (buffer) {
      this.pooledBytesCount -= cls;
      this.endPass();
      this.getEncoder().clearBuffer(buffer, 0, bytes);
      this.pendingDispatches++;
    } else buffer = this.device.createBuffer({ size: cls, usage: STORAGE_USAGE });
    this.allocations++;
    this.liveBytesCount += cls;
    if (this.liveBytesCount > this.peakBytesCount) this.peakBytesCount = this.liveBytesCount;
    return { buffer, offset: 0, length, dtype };
  }

  /** Return an array's buffer to the pool (after the pending batch is submitted, so queued dispatches still see it). */
  release(array: GpuArray): void {
    if (this.destroyed) return;
    const cls = array.buffer.size;
    this.liveBytesCount -= cls;
    this.allocations--;
    if (this.pendingDispatches > 0) this.releasedThisBatch.push(array.buffer);
    else this.toPool(array.buffer);
  }

  private toPool(buffer: GPUBuffer): void {
    const list = this.pool.get(buffer.size) ?? [];
    list.push(buffer);
    this.pool.set(buffer.size, list);
    this.pooledBytesCount += buffer.size;
  }

  /** Free every pooled (unused) buffer. */
  trimPool(): void {
    this.flush();
    for (const list of this.pool.values()) for (const b of list) b.destroy();
    this.pool.clear();
    this.pooledBytesCount = 0;
  }

  upload(data: HostArray, dtype: GpuDType): GpuArray {
    const length = dtype === "bf16" || dtype === "f16" || dtype === "u8" ? data.length : data.length;
    const array = this.alloc(dtype, length);
    this.write(array, data);
    return array;
  }

  /** Copy host data into an array (ordered after every dispatch encoded so far). */
  write(array: GpuArray, data: HostArray): void {
    this.checkAlive();
    const byteOffset = array.offset * BYTES_PER_ELEMENT[array.dtype];
    if (byteOffset % 4 !== 0) throw new BackendError("webgpu: write into an array not starting on a 4-byte boundary");
    const bytes = new Uint8Array(data.buffer as ArrayBuffer, data.byteOffset, data.byteLength);
    const size = Math.ceil(bytes.byteLength / 4) * 4;
    if (size === 0) return;
    if (this.pendingDispatches === 0) {
      // Nothing encoded yet: queue.writeBuffer is ordered after every earlier submit.
      const padded = bytes.byteLength === size ? bytes : new Uint8Array(size);
      if (padded !== bytes) padded.set(bytes);
      this.device.queue.writeBuffer(array.buffer, byteOffset, padded);
      return;
    }
    // Work is encoded but not submitted: a staging copy in the same encoder keeps the order without a submit.
    const staging = this.device.createBuffer({ size, usage: 0x4, mappedAtCreation: true }); // COPY_SRC
    new Uint8Array(staging.getMappedRange()).set(bytes);
    staging.unmap();
    this.endPass();
    this.getEncoder().copyBufferToBuffer(staging, 0, array.buffer, byteOffset, size);
    this.pendingDispatches++;
    this.stagingThisBatch.push(staging);
  }

  /** A fresh array holding a copy of `src`'s elements [start, start + length). */
  copy(src: GpuArray, start = 0, length = src.length - start): GpuArray {
    const dst = this.alloc(src.dtype, length);
    this.copyInto(src, start, dst, 0, length);
    return dst;
  }

  copyInto(src: GpuArray, srcStart: number, dst: GpuArray, dstStart: number, length: number): void {
    const bpe = BYTES_PER_ELEMENT[src.dtype];
    const s = (src.offset + srcStart) * bpe;
    const d = (dst.offset + dstStart) * bpe;
    const n = Math.ceil((length * bpe) / 4) * 4;
    if (s % 4 || d % 4 || s + n > src.buffer.size || d + n > dst.buffer.size)
      throw new BackendError("webgpu: copy of a range not aligned to 4 bytes");
    this.endPass();
    this.getEncoder().copyBufferToBuffer(src.buffer, s, dst.buffer, d, n);
    this.pendingDispatches++;
  }

  /** Read an array back to the host (submits pending work and waits for it). */
  async read(array: GpuArray): Promise<HostArray> {
    this.checkAlive();
    const bpe = BYTES_PER_ELEMENT[array.dtype];
    const start = array.offset * bpe;
    const alignedStart = Math.floor(start / 4) * 4;
    const end = start + array.length * bpe;
    const alignedEnd = Math.ceil(end / 4) * 4;
    const size = Math.max(4, alignedEnd - alignedStart);
    const staging = this.device.createBuffer({ size, usage: 0x1 | 0x8 }); // MAP_READ | COPY_DST
    this.endPass();
    this.getEncoder().copyBufferToBuffer(array.buffer, alignedStart, staging, 0, size);
    this.pendingDispatches++;
    this.flush();
    await staging.mapAsync(0x1);
    this.throwDeviceError();
    const raw = staging.getMappedRange().slice(start - alignedStart, start - alignedStart + array.length * bpe);
    staging.unmap();
    staging.destroy();
    switch (array.dtype) {
      case "f32":
        return new Float32Array(raw);
      case "i32":
        return new Int32Array(raw);
      case "u32":
        return new Uint32Array(raw);
      case "bf16":
      case "f16":
        return new Uint16Array(raw);
      case "u8":
        return new Uint8Array(raw);
    }
  }

  /** Wait until every submitted command has executed. */
  async sync(): Promise<void> {
    this.flush();
    await this.device.queue.onSubmittedWorkDone();
    this.throwDeviceError();
  }

  private throwDeviceError(): void {
    if (this.deviceError === null) return;
    const message = this.deviceError;
    this.deviceError = null;
    throw new BackendError(`webgpu: the device reported an error: ${message}`);
  }

  pipeline(code: string, constants: Record<string, number> = {}): GPUComputePipeline {
    const key = `${code}\n${JSON.stringify(constants)}`;
    let p = this.pipelines.get(key);
    if (!p) {
      const module = this.device.createShaderModule({ code });
      p = this.device.createComputePipeline({
        layout: "auto",
        compute: { module, entryPoint: "main", constants },
      });
      this.pipelines.set(key, p);
    }
    return p;
  }

  /**
   * Bind the part of `array` covering elements [lo, hi): a window starting at the aligned byte offset
   * at or below the range, so arrays larger than maxStorageBufferBindingSize are reached in chunks.
   */
  window(array: GpuArray, lo = 0, hi = array.length): BoundWindow {
    const bpe = BYTES_PER_ELEMENT[array.dtype];
    const align = this.info.limits.minStorageBufferOffsetAlignment;
    const startByte = (array.offset + lo) * bpe;
    const endByte = Math.ceil(((array.offset + Math.max(hi, lo + 1)) * bpe) / 4) * 4;
    const base = Math.floor(startByte / align) * align;
    const size = Math.min(array.buffer.size - base, Math.max(4, endByte - base));
    if (size > this.bindingLimit)
      throw new BackendError(
        `webgpu: binding ${size} bytes exceeds maxStorageBufferBindingSize (${this.bindingLimit}); the kernel must chunk`,
      );
    return { resource: { buffer: array.buffer, offset: base, size }, elementOffset: array.offset - base / bpe };
  }

  /** Bytes a window over elements [lo, hi) of `array` would bind (for chunk planning). */
  windowBytes(array: GpuArray, lo: number, hi: number): number {
    const bpe = BYTES_PER_ELEMENT[array.dtype];
    const align = this.info.limits.minStorageBufferOffsetAlignment;
    const startByte = (array.offset + lo) * bpe;
    const endByte = (array.offset + hi) * bpe;
    return endByte - Math.floor(startByte / align) * align + 4;
  }

  get maxBinding(): number {
    return this.bindingLimit;
  }

  /**
   * Encode one dispatch. `params` (u32/i32/f32 words, written as given) become binding 0, a uniform
   * struct; `buffers` are bindings 1.. in order.
   */
  dispatch(
    pipeline: GPUComputePipeline,
    params: ArrayLike<number> | null,
    paramTypes: string | null,
    buffers: GPUBufferBinding[],
    groups: [number, number?, number?],
  ): void {
    this.checkAlive();
    const entries: GPUBindGroupEntry[] = [];
    if (params && paramTypes) {
      if (this.uniformSlots >= UNIFORM_SLOTS) this.flush();
      const slot = this.uniformSlots++;
      const view = new DataView(this.uniformData, slot * UNIFORM_SLOT, UNIFORM_SLOT);
      for (let i = 0; i < params.length; i++) {
        const t = paramTypes[i];
        if (t === "f") view.setFloat32(i * 4, params[i], true);
        else if (t === "i") view.setInt32(i * 4, params[i], true);
        else view.setUint32(i * 4, params[i], true);
      }
      entries.push({
        binding: 0,
        resource: { buffer: this.uniformBuffer, offset: slot * UNIFORM_SLOT, size: UNIFORM_SLOT },
      });
    }
    for (const [i, resource] of buffers.entries()) if (resource) entries.push({ binding: i + 1, resource });
    const bindGroup = this.device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries });
    const pass = this.getPass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, bindGroup);
    const max = this.info.limits.maxComputeWorkgroupsPerDimension;
    const [x, y = 1, z = 1] = groups;
    if (x > max || y > max || z > max)
      throw new BackendError(`webgpu: dispatch ${x}×${y}×${z} exceeds ${max} workgroups per dimension`);
    if (x > 0 && y > 0 && z > 0) pass.dispatchWorkgroups(x, y, z);
    this.pendingDispatches++;
  }

  /** Submit everything encoded so far (does not wait). */
  flush(): void {
    if (!this.encoder) return;
    this.endPass();
    if (this.uniformSlots > 0)
      this.device.queue.writeBuffer(this.uniformBuffer, 0, this.uniformData, 0, this.uniformSlots * UNIFORM_SLOT);
    this.device.queue.submit([this.encoder.finish()]);
    this.encoder = null;
    this.uniformSlots = 0;
    this.pendingDispatches = 0;
    for (const b of this.releasedThisBatch) this.toPool(b);
    this.releasedThisBatch = [];
    for (const b of this.stagingThisBatch) b.destroy();
    this.stagingThisBatch = [];
  }

  destroy(): void {
    if (this.destroyed) return;
    this.flush();
    this.destroyed = true;
    for (const list of this.pool.values()) for (const b of list) b.destroy();
    this.pool.clear();
    this.pipelines.clear();
    this.uniformBuffer.destroy();
    this.device.destroy();
  }

  private getEncoder(): GPUCommandEncoder {
    if (!this.encoder) this.encoder = this.device.createCommandEncoder();
    return this.encoder;
  }

  private getPass(): GPUComputePassEncoder {
    if (!this.pass) this.pass = this.getEncoder().beginComputePass();
    return this.pass;
  }

  private endPass(): void {
    if (this.pass) {
      this.pass.end();
      this.pass = null;
    }
  }

  private checkAlive(): void {
    if (this.destroyed) throw new BackendError("webgpu: the backend was disposed");
  }
}

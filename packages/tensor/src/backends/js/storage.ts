// The js backend's storage: plain host typed arrays. `upload` adopts the caller's array (no copy), as a Tensor
// built from a typed array always has; `alloc` takes ArrayBuffers from a pool of size classes that explicit
// disposal fills. Arrays nobody disposes are left to the garbage collector, and a finalizer keeps liveBytes
// honest for them.
import { type DType, type StorageArray, bytesPerElement } from "../../dtype.js";
import { MemoryCounter, type MemoryInfo, type StorageBackend, sizeClassBytes, sizeClassOf } from "../../storage.js";

/** Pooled bytes above this are dropped (the GC reclaims host memory anyway; the pool only saves zeroing churn). */
const POOL_LIMIT_BYTES = 256 * 2 ** 20;

function typedOver(buffer: ArrayBuffer, dtype: DType, size: number): StorageArray {
  switch (dtype) {
    case "f32":
      return new Float32Array(buffer, 0, size);
    case "i32":
      return new Int32Array(buffer, 0, size);
    default:
      return new Uint16Array(buffer, 0, size);
  }
}

class JsStorage implements StorageBackend<StorageArray, StorageArray> {
  readonly name = "js";
  readonly hostVisible = true;
  readonly epoch = 0;
  readonly adoptsUploads = true;
  readonly releaseOnGc = false;
  private readonly counter = new MemoryCounter();
  private readonly pool: ArrayBuffer[][] = [];
  private readonly sizes = new WeakMap<ArrayBufferLike, number>();
  private readonly finalizer =
    typeof FinalizationRegistry === "function"
      ? new FinalizationRegistry<number>((bytes) => this.counter.remove(bytes))
      : null;

  alloc(dtype: DType, size: number): StorageArray {
    const bytes = Math.max(1, size * bytesPerElement(dtype));
    const cls = sizeClassOf(bytes);
    const free = this.pool[cls];
    let buffer = free?.pop();
    const capacity = sizeClassBytes(cls);
    if (buffer) {
      this.counter.pooledBytes -= capacity;
      new Uint8Array(buffer, 0, size * bytesPerElement(dtype)).fill(0);
    } else buffer = new ArrayBuffer(capacity);
    this.counter.add(capacity);
    this.sizes.set(buffer, capacity);
    this.finalizer?.register(buffer, capacity, buffer);
    return typedOver(buffer, dtype, size);
  }

  upload(host: StorageArray): StorageArray {
    return host;
  }

  view(native: StorageArray, _dtype: DType, offset: number, length: number): StorageArray {
    return offset === 0 && length === native.length
      ? native
      : (native.subarray(offset, offset + length) as StorageArray);
  }

  readSync(native: StorageArray, dtype: DType, offset: number, length: number): StorageArray {
    return this.view(native, dtype, offset, length);
  }

  read(native: StorageArray, dtype: DType, offset: number, length: number): Promise<StorageArray> {
    return Promise.resolve(this.view(native, dtype, offset, length).slice() as StorageArray);
  }

  release(native: StorageArray): void {
    const buffer = native.buffer as ArrayBuffer;
    const capacity = this.sizes.get(buffer);
    if (capacity === undefined) return;
    this.sizes.delete(buffer);
    this.finalizer?.unregister(buffer);
    this.counter.remove(capacity);
    if (this.counter.pooledBytes + capacity > POOL_LIMIT_BYTES) return;
    const cls = sizeClassOf(capacity);
    (this.pool[cls] ??= []).push(buffer);
    this.counter.pooledBytes += capacity;
  }

  memory(): MemoryInfo {
    return this.counter.info();
  }

  trimPool(): void {
    this.pool.length = 0;
    this.counter.pooledBytes = 0;
  }
}

/** The one js storage backend (also the storage of backends that register kernels only, e.g. gpujs). */
export const jsStorage: StorageBackend<StorageArray, StorageArray> = new JsStorage();

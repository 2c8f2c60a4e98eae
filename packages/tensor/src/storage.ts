// Backend-owned tensor storage (the tfjs DataId model). A Tensor does not own a host array: it refers to a
// `Storage` handle — the backend that owns the memory, the backend's native array, its dtype and length — plus
// an element offset and size, so views (reshape-likes, narrow on dim 0) share one handle. Host values exist
// only when someone asks for them: `await t.data()` on every backend, `t.dataSync()` where the backend's
// memory is host-visible (js, wasm). Memory is explicit: `dispose`, `tidy`, `keep`, a pool per backend and
// `memory()` counters per backend.
import type { DType, StorageArray } from "./dtype.js";
import { BackendError, TensorError } from "./errors.js";

/** Counters of one backend's memory, in bytes of backend-owned storage (arrays the caller adopted are not counted). */
export interface MemoryInfo {
  /** Bytes held by storage that is still referenced (not disposed and not yet garbage collected). */
  liveBytes: number;
  /** Bytes released into the backend's pool, ready for reuse by `alloc` of the same size class. */
  pooledBytes: number;
  /** The largest liveBytes seen since the backend started (or since `resetPeak`). */
  peakBytes: number;
  /** Live storage allocations (handles, not views). */
  allocations: number;
}

/**
 * What a backend must provide to own tensor memory. `N` is the backend's native array (what `alloc` returns:
 * a typed array on js, a heap block on wasm, a GPUBuffer on webgpu); `A` is the kernel argument that `view`
 * makes from it (a typed array on js and wasm, a buffer binding on webgpu). Kernels registered for the
 * backend (see `Kernels` in kernel-contract.ts) receive `A`s.
 *
 * Contract:
 * - `alloc(dtype, size)` returns storage for `size` elements, ZERO-FILLED (kernels may accumulate into a fresh
 *   output). Pooled memory is re-zeroed. It may round the capacity up to a size class.
 * - `upload(host, dtype)` returns new storage holding a copy of `host` (`host.length` elements), or adopts
 *   `host` itself where the backend stores host arrays (js).
 * - `view(native, dtype, offset, length)` returns the kernel argument for elements [offset, offset+length).
 *   Cheap (called per op and argument); never copies. A host-visible backend returns a typed array of the
 *   dtype's element type (Float32Array for f32, Uint16Array for bf16/f16, Int32Array for i32) that reads and
 *   writes the storage itself.
 * - `readSync(native, dtype, offset, length)` (host-visible backends only) returns that typed array too.
 * - `read(...)` resolves to a fresh host copy on every backend (waits for queued work on devices).
 * - `release(native)` gives the memory back (to the pool); called once per `alloc`/copying `upload`, never for
 *   adopted host arrays. The handle is dead afterwards.
 * - `epoch` changes whenever views made earlier may have become invalid (a non-shared WebAssembly.Memory that
 *   grew detaches its old buffer); tensors cache their view per epoch.
 */
export interface StorageBackend<N = unknown, A = unknown> {
  readonly name: string;
  /** Native arrays are host typed arrays, readable and writable synchronously (js, wasm). */
  readonly hostVisible: boolean;
  readonly epoch: number;
  alloc(dtype: DType, size: number): N;
  /**
   * Optional: like `alloc` but the contents are unspecified (pooled memory is not re-zeroed), for outputs a
   * kernel overwrites completely (`Tensor.empty`). Backends without it get `alloc`.
   */
  allocEmpty?(dtype: DType, size: number): N;
  /**
   * Optional: zero-filled storage for an op output made outside `tidy()`, which nobody is expected to
   * dispose. wasm returns a host array here (reclaimed by the garbage collector, copied per kernel call), as
   * heap blocks released only by finalizers would pile up: V8 does not see wasm memory as heap pressure.
   */
  allocTransient?(dtype: DType, size: number): N;
  upload(host: StorageArray, dtype: DType): N;
  /** Whether `upload` adopted the host array (no copy): then `release` is not called for it. */
  readonly adoptsUploads: boolean;
  view(native: N, dtype: DType, offset: number, length: number): A;
  readSync?(native: N, dtype: DType, offset: number, length: number): StorageArray;
  read(native: N, dtype: DType, offset: number, length: number): Promise<StorageArray>;
  release(native: N): void;
  memory(): MemoryInfo;
  /** Drop pooled memory where the platform can give it back (js); a no-op elsewhere. */
  trimPool?(): void;
  /** Release storage whose handle was garbage-collected without dispose (wasm, devices: memory JS cannot see). */
  readonly releaseOnGc: boolean;
}

/** Use of a tensor after `dispose()` (or after the `tidy` that created it ended without returning it). */
export class DisposedError extends TensorError {}

/** A synchronous host read on a backend whose memory the host cannot read without waiting (use `await t.data()`). */
export class DataSyncError extends TensorError {}

/** A kernel the active backend does not implement, for data the js fallback cannot reach. */
export class MissingKernelError extends BackendError {}

const gcRegistry =
  typeof FinalizationRegistry === "function"
    ? new FinalizationRegistry<{ backend: StorageBackend; native: unknown }>((held) => {
        held.backend.release(held.native);
      })
    : null;

/**
 * A handle on one backend allocation, shared by every view of it. `refs` counts the live (not disposed)
 * tensors on it; the memory goes back to the backend when the last one is disposed, or when the handle is
 * garbage collected (backends with `releaseOnGc`).
 */
export class Storage {
  refs = 0;
  released = false;

  constructor(
    readonly backend: StorageBackend,
    readonly native: unknown,
    readonly dtype: DType,
    /** Elements the storage holds (views address [offset, offset + size) inside it). */
    readonly length: number,
    /** Allocated by the backend (alloc or a copying upload), so released to it; false for adopted host arrays. */
    readonly owned: boolean,
  ) {
    if (owned && backend.releaseOnGc && gcRegistry) gcRegistry.register(this, { backend, native }, this);
  }

  /** Drop one tensor's reference; the last one releases the memory. */
  unref(): void {
    if (--this.refs > 0 || this.released) return;
    this.released = true;
    if (!this.owned) return;
    if (this.backend.releaseOnGc && gcRegistry) gcRegistry.unregister(this);
    this.backend.release(this.native);
  }
}

// ---- size classes shared by the pools: 4 steps per power of two, so capacity overshoots by < 25% ----

/** Index of the size class holding `bytes` (≥ 1). */
export function sizeClassOf(bytes: number): number {
  if (bytes <= 64) return 0;
  const e = 31 - Math.clz32(bytes - 1); // 2^e < bytes ≤ 2^(e+1)
  const step = 2 ** (e - 2);
  const sub = Math.ceil((bytes - 2 ** e) / step); // 1..4
  return (e - 6) * 4 + sub;
}

/** Capacity in bytes of size class `index`. */
export function sizeClassBytes(index: number): number {
  if (index === 0) return 64;
  const e = Math.floor((index - 1) / 4) + 6;
  const sub = index - (e - 6) * 4;
  return 2 ** e + sub * 2 ** (e - 2);
}

/** Shared bookkeeping for MemoryInfo. */
export class MemoryCounter {
  liveBytes = 0;
  pooledBytes = 0;
  peakBytes = 0;
  allocations = 0;

  add(bytes: number): void {
    this.liveBytes += bytes;
    this.allocations++;
    if (this.liveBytes > this.peakBytes) this.peakBytes = this.liveBytes;
  }

  remove(bytes: number): void {
    this.liveBytes -= bytes;
    this.allocations--;
  }

  info(): MemoryInfo {
    return {
      liveBytes: this.liveBytes,
      pooledBytes: this.pooledBytes,
      peakBytes: this.peakBytes,
      allocations: this.allocations,
    };
  }
}

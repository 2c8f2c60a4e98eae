// The wasm backend's storage: tensors RESIDENT in the kernels' WebAssembly.Memory. `alloc` takes a block from
// the heap allocator (wasm/heap.ts, pooled by size class), a tensor's host view is a typed array over the
// memory, and the wasm kernels recognise such views and use them in place: no copy into the heap before a
// call and none out after it. Residency needs a shared memory (its views stay valid when it grows); without
// SharedArrayBuffer, or when the memory's limit is reached, storage falls back to host arrays, which the
// kernels copy per call as before.
import { type DType, type StorageArray, allocate, bytesPerElement } from "../dtype.js";
import { MemoryCounter, type MemoryInfo, type StorageBackend } from "../storage.js";
import type { WasmHeap } from "../wasm/heap.js";

/** A resident block: byte address and requested size. */
export interface WasmBlock {
  readonly ptr: number;
  readonly bytes: number;
}

export type WasmNative = WasmBlock | StorageArray;

function isBlock(native: WasmNative): native is WasmBlock {
  return !ArrayBuffer.isView(native);
}

export class WasmStorage implements StorageBackend<WasmNative, StorageArray> {
  readonly name = "wasm";
  readonly hostVisible = true;
  readonly adoptsUploads = false;
  readonly releaseOnGc = true;
  /** Host-array fallback storage (counted apart from the heap). */
  private readonly hostCounter = new MemoryCounter();
  private readonly resident: boolean;

  constructor(private readonly heap: WasmHeap) {
    this.resident = heap.shared;
  }

  get epoch(): number {
    return this.heap.epoch;
  }

  alloc(dtype: DType, size: number): WasmNative {
    return this.allocBlock(dtype, size, true);
  }

  allocEmpty(dtype: DType, size: number): WasmNative {
    return this.allocBlock(dtype, size, false);
  }

  private allocBlock(dtype: DType, size: number, zero: boolean): WasmNative {
    const bytes = size * bytesPerElement(dtype);
    if (this.resident) {
      try {
        return { ptr: this.heap.alloc(bytes, zero), bytes };
      } catch {
        // The memory's limit: keep going on host arrays (copied per kernel call).
      }
    }
    this.hostCounter.add(bytes);
    return allocate(dtype, size);
  }

  allocTransient(dtype: DType, size: number): WasmNative {
    return allocate(dtype, size);
  }

  upload(host: StorageArray, dtype: DType): WasmNative {
    const native = this.allocEmpty(dtype, host.length);
    this.view(native, dtype, 0, host.length).set(host);
    return native;
  }

  view(native: WasmNative, dtype: DType, offset: number, length: number): StorageArray {
    if (!isBlock(native))
      return offset === 0 && length === native.length
        ? native
        : (native.subarray(offset, offset + length) as StorageArray);
    const buffer = this.heap.buffer();
    const at = native.ptr + offset * bytesPerElement(dtype);
    if (dtype === "f32") return new Float32Array(buffer, at, length);
    if (dtype === "i32") return new Int32Array(buffer, at, length);
    return new Uint16Array(buffer, at, length);
  }

  readSync(native: WasmNative, dtype: DType, offset: number, length: number): StorageArray {
    return this.view(native, dtype, offset, length);
  }

  read(native: WasmNative, dtype: DType, offset: number, length: number): Promise<StorageArray> {
    return Promise.resolve(this.view(native, dtype, offset, length).slice() as StorageArray);
  }

  release(native: WasmNative): void {
    if (isBlock(native)) this.heap.release(native.ptr, native.bytes);
    else this.hostCounter.remove(native.byteLength);
  }

  memory(): MemoryInfo {
    const heap = this.heap.memoryInfo();
    const host = this.hostCounter.info();
    return {
      liveBytes: heap.liveBytes + host.liveBytes,
      pooledBytes: heap.pooledBytes,
      peakBytes: Math.max(heap.peakBytes, heap.liveBytes + host.liveBytes),
      allocations: heap.allocations + host.allocations,
    };
  }
}

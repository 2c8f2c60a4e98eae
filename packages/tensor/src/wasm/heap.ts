// The kernels' view of the one WebAssembly.Memory: [0, 1 KiB) unused, then one packing scratch area
// per thread, then a data area managed by an allocator: tensors resident in wasm memory (the wasm backend's
// storage) and the per-call copies of foreign (host) arrays both take blocks from it. Freed blocks go to a
// pool per size class (4 per power of two); new blocks come from the top, growing the memory.
import { BackendError } from "../errors.js";
import { MemoryCounter, type MemoryInfo, sizeClassBytes, sizeClassOf } from "../storage.js";

const PAGE = 65536;
/** Byte address of the i32 work-queue counter of a dynamically split GEMM (inside the unused first KiB). */
export const WORK_COUNTER = 64;
/** Byte address of the f32 scalar operand of binaryScalar (also inside the unused first KiB). */
export const SCALAR_SLOT = 128;
const ALIGN = 64;

export const alignUp = (n: number, a = ALIGN): number => Math.ceil(n / a) * a;

export class WasmHeap {
  readonly dataStart: number;
  /** Bumped whenever the memory grows (views of a non-shared memory are detached then). */
  epoch = 0;
  private top: number;
  private readonly free: number[][] = [];
  private readonly counter = new MemoryCounter();
  /** Every ArrayBuffer / SharedArrayBuffer object this memory has had: a typed array over one is resident. */
  private readonly buffers = new WeakSet<ArrayBufferLike>();
  private lastBuffer: ArrayBufferLike | null = null;
  /**
   * Zeroes bytes [ptr, ptr + bytes): the module's memory.fill once the kernels are instantiated. A
   * Uint8Array fill on a SharedArrayBuffer runs byte by byte in V8 (~2 GB/s); memory.fill is a memset.
   */
  zeroFill: ((ptr: number, bytes: number) => void) | null = null;

  constructor(
    readonly memory: WebAssembly.Memory,
    readonly scratchBytes: number,
    readonly scratchCount: number,
  ) {
    this.dataStart = alignUp(1024 + scratchBytes * scratchCount);
    this.top = this.dataStart;
  }

  /** Whether grown views stay valid (a shared memory): only then do tensors live in the heap. */
  get shared(): boolean {
    return typeof SharedArrayBuffer === "function" && this.memory.buffer instanceof SharedArrayBuffer;
  }

  /** The memory's current buffer, remembered as one of ours. */
  buffer(): ArrayBufferLike {
    const b = this.memory.buffer;
    if (b !== this.lastBuffer) {
      this.buffers.add(b);
      this.lastBuffer = b;
    }
    return b;
  }

  /** Whether `arr` is a view of this memory (so kernels read and write it in place, without copies). */
  owns(arr: ArrayBufferView): boolean {
    return this.buffers.has(arr.buffer);
  }

  /**
   * A block of at least `bytes` bytes (64-byte aligned), from the pool of its size class or the top of the
   * data area (growing the memory). Contents are unspecified unless `zero`. Returns its address.
   */
  alloc(bytes: number, zero: boolean): number {
    const cls = sizeClassOf(Math.max(bytes, 1));
    const capacity = sizeClassBytes(cls);
    const pooled = this.free[cls]?.pop();
    let ptr: number;
    if (pooled !== undefined) {
      ptr = pooled;
      this.counter.pooledBytes -= capacity;
      if (zero) this.zero(ptr, bytes);
    } else {
      ptr = this.top;
      this.ensure(ptr + capacity);
      this.top = ptr + capacity;
    }
    this.counter.add(capacity);
    return ptr;
  }

  /** Zero bytes [ptr, ptr + bytes) of the memory. */
  zero(ptr: number, bytes: number): void {
    if (bytes <= 0) return;
    if (this.zeroFill) {
      this.zeroFill(ptr, bytes);
      return;
    }
    // 8-byte stores where the block allows (blocks are 64-byte aligned with capacities in multiples of 16).
    const words = bytes >>> 3;
    if (ptr % 8 === 0 && words > 0) new Float64Array(this.buffer(), ptr, words).fill(0);
    const done = ptr % 8 === 0 ? words << 3 : 0;
    if (done < bytes) new Uint8Array(this.buffer(), ptr + done, bytes - done).fill(0);
  }

  /** Return a block from `alloc(bytes)` to its pool. */
  release(ptr: number, bytes: number): void {
    const cls = sizeClassOf(Math.max(bytes, 1));
    const capacity = sizeClassBytes(cls);
    (this.free[cls] ??= []).push(ptr);
    this.counter.remove(capacity);
    this.counter.pooledBytes += capacity;
  }

  memoryInfo(): MemoryInfo {
    return this.counter.info();
  }

  /** Byte address of thread `t`'s packing scratch. */
  scratch(t: number): number {
    return 1024 + t * this.scratchBytes;
  }

  private ensure(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes <= have) return;
    const pages = Math.ceil((bytes - have) / PAGE);
    // Grow by at least 1/8 of the memory (16 MiB minimum) so that a run of allocations grows rarely.
    const ahead = Math.max(pages, Math.ceil(Math.max(have / 8, 16 * 2 ** 20) / PAGE));
    try {
      try {
        this.memory.grow(ahead);
      } catch {
        this.memory.grow(pages);
      }
      this.epoch++;
    } catch (err) {
      throw new BackendError(
        `wasm kernels: cannot grow memory to ${(bytes / 2 ** 20).toFixed(0)} MiB (limit of the WebAssembly memory): ${String(err)}`,
      );
    }
  }

  f32(): Float32Array {
    return new Float32Array(this.buffer());
  }
  i32(): Int32Array {
    return new Int32Array(this.buffer());
  }
  u16(): Uint16Array {
    return new Uint16Array(this.buffer());
  }
}

export const INITIAL_DATA_BYTES = 16 * 2 ** 20;
export function pagesFor(bytes: number): number {
  return Math.ceil(bytes / PAGE);
}

type HeapArray = Float32Array | Int32Array | Uint16Array;

/**
 * The heap regions of one kernel call. A resident argument (a view of this memory) is used in place; a
 * foreign one is copied into a temporary block (`in`), and copied back after the call (`out`). `done()`
 * copies the outputs back and frees the temporaries; `discard()` only frees (on error).
 */
export class CallFrame {
  private readonly temps: [number, number][] = [];
  private readonly outs: [HeapArray, number, number][] = [];

  constructor(private readonly heap: WasmHeap) {}

  /** The address of `n` elements of `arr` in the heap. */
  stage(arr: HeapArray, n: number, mode: "in" | "out" | "inout"): number {
    if (this.heap.owns(arr)) return arr.byteOffset;
    const bytes = n * arr.BYTES_PER_ELEMENT;
    const ptr = this.heap.alloc(bytes, false);
    this.temps.push([ptr, bytes]);
    if (mode !== "out" && n > 0) {
      const src = n === arr.length ? arr : arr.subarray(0, n);
      if (arr instanceof Float32Array) new Float32Array(this.heap.buffer(), ptr, n).set(src as Float32Array);
      else if (arr instanceof Int32Array) new Int32Array(this.heap.buffer(), ptr, n).set(src as Int32Array);
      else new Uint16Array(this.heap.buffer(), ptr, n).set(src as Uint16Array);
    }
    if (mode !== "in") this.outs.push([arr, ptr, n]);
    return ptr;
  }

  /** A temporary block of `bytes` (contents unspecified). */
  scratch(bytes: number): number {
    const ptr = this.heap.alloc(bytes, false);
    this.temps.push([ptr, bytes]);
    return ptr;
  }

  done(): void {
    for (const [arr, ptr, n] of this.outs) {
      if (n === 0) continue;
      const dst = n === arr.length ? arr : arr.subarray(0, n);
      if (arr instanceof Float32Array) dst.set(new Float32Array(this.heap.buffer(), ptr, n));
      else if (arr instanceof Int32Array) dst.set(new Int32Array(this.heap.buffer(), ptr, n));
      else dst.set(new Uint16Array(this.heap.buffer(), ptr, n));
    }
    this.discard();
  }

  discard(): void {
    for (const [ptr, bytes] of this.temps) this.heap.release(ptr, bytes);
    this.temps.length = 0;
    this.outs.length = 0;
  }
}

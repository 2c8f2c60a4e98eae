// The kernels' view of the one WebAssembly.Memory: [0, 1 KiB) unused, then one packing scratch area
// per thread, then a data area that every call refills from its start (inputs copied in, outputs
// copied out), growing the memory when a call needs more.
import { BackendError } from "../errors.js";

const PAGE = 65536;
/** Byte address of the i32 work-queue counter of a dynamically split GEMM (inside the unused first KiB). */
export const WORK_COUNTER = 64;
const ALIGN = 64;

export const alignUp = (n: number, a = ALIGN): number => Math.ceil(n / a) * a;

export class WasmHeap {
  readonly dataStart: number;

  constructor(
    readonly memory: WebAssembly.Memory,
    readonly scratchBytes: number,
    readonly scratchCount: number,
  ) {
    this.dataStart = alignUp(1024 + scratchBytes * scratchCount);
  }

  /** Byte address of thread `t`'s packing scratch. */
  scratch(t: number): number {
    return 1024 + t * this.scratchBytes;
  }

  /** Lays out regions of the given byte sizes in the data area (growing memory) and returns their addresses. */
  layout(sizes: readonly number[]): number[] {
    const ptrs: number[] = [];
    let cursor = this.dataStart;
    for (const size of sizes) {
      ptrs.push(cursor);
      cursor = alignUp(cursor + size);
    }
    this.ensure(cursor);
    return ptrs;
  }

  private ensure(bytes: number): void {
    const have = this.memory.buffer.byteLength;
    if (bytes <= have) return;
    const pages = Math.ceil((bytes - have) / PAGE);
    try {
      this.memory.grow(pages);
    } catch (err) {
      throw new BackendError(
        `wasm kernels: cannot grow memory to ${(bytes / 2 ** 20).toFixed(0)} MiB (limit of the WebAssembly memory): ${String(err)}`,
      );
    }
  }

  f32(): Float32Array {
    return new Float32Array(this.memory.buffer);
  }
  i32(): Int32Array {
    return new Int32Array(this.memory.buffer);
  }
  u16(): Uint16Array {
    return new Uint16Array(this.memory.buffer);
  }
}

export const INITIAL_DATA_BYTES = 16 * 2 ** 20;
export function pagesFor(bytes: number): number {
  return Math.ceil(bytes / PAGE);
}

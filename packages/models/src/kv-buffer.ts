// The growable key/value buffers both caches keep (KVCache for a generate batch, SequenceKV for one
// scheduler sequence; docs/ARCHITECTURE.md §KV cache): [rows, Hkv, capacity, d] f32, new positions written in
// place with the backend's strided copy kernel, reallocated at twice the capacity when full, so a decode
// step copies only its own new keys and values (amortised O(1) per token) instead of the whole cache.
import { type CopyShape, type StorageArray, Tensor, argOf, kernel, keep } from "@kiln/tensor";

/** Positions a buffer's capacity is rounded up to. */
const CAPACITY_QUANTUM = 16;

/** The capacity to grow to for `need` positions: at least double the current one, at most `limit`. */
export function grownCapacity(need: number, current: number, limit = Number.POSITIVE_INFINITY): number {
  const grown = Math.ceil(Math.max(need, current * 2) / CAPACITY_QUANTUM) * CAPACITY_QUANTUM;
  return Math.max(need, Math.min(grown, limit));
}

/** A zeroed buffer [rows, heads, capacity, d], outside any tidy scope (the cache owns it). */
export function newKVBuffer(rows: number, heads: number, capacity: number, d: number): Tensor {
  return keep(Tensor.zeros([rows, heads, capacity, d]));
}

/** A buffer of `capacity` positions holding the first `length` of `old` ([rows, heads, oldCapacity, d]); `old` is disposed. */
export function growKVBuffer(old: Tensor, length: number, capacity: number): Tensor {
  const [rows, heads, oldCapacity, d] = old.shape;
  const fresh = newKVBuffer(rows, heads, capacity, d);
  if (length > 0)
    kernel("copy")(argOf(old) as StorageArray, argOf(fresh) as StorageArray, {
      shape: [rows * heads, length * d],
      srcOffset: 0,
      srcStrides: [oldCapacity * d, 1],
      dstOffset: 0,
      dstStrides: [capacity * d, 1],
    });
  old.dispose();
  return fresh;
}

/**
 * Writes `count` positions into `buffer` [rows, heads, capacity, d] at position `at` of every (row, head), reading
 * them from `source` at element `offset` with strides (row·head, token) between them (channels contiguous).
 */
export function writeKV(
  buffer: Tensor,
  at: number,
  source: Tensor,
  offset: number,
  strides: readonly [number, number],
  count: number,
): void {
  const [rows, heads, capacity, d] = buffer.shape;
  const shape: CopyShape = {
    shape: [rows * heads, count, d],
    srcOffset: offset,
    srcStrides: [strides[0], strides[1], 1],
    dstOffset: at * d,
    dstStrides: [capacity * d, d, 1],
  };
  kernel("copy")(argOf(source) as StorageArray, argOf(buffer) as StorageArray, shape);
}

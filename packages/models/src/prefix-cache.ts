// The batching scheduler's prefix cache (docs/ARCHITECTURE.md §Continuous batching, prefix cache): the KV rows
// of full prompt chunks, keyed by the exact token prefix they end, so that a prompt extending an earlier one
// (an episode's next turn) copies them instead of prefilling them again.
//
// Why a hit gives the same bits as a miss: prompts are cut at multiples of the chunk length in the sequence's
// own positions, every prefill forward has the same width, and a chunk's keys and values depend only on the
// sequence's tokens up to the chunk's end. So the rows a prefill forward wrote for a full chunk [kC, (k+1)C)
// are exactly what any later prompt with the same tokens [0, (k+1)C) would compute. Rows written by decode
// steps and partial last chunks are never stored (another cut, another shape). Trajectories therefore do not
// depend on what the cache holds: not on timing, eviction or concurrency.
//
// Keys: a chunk's key is its parent chunk's id and its own tokens, so a key names one exact prefix (a trie;
// no hash, no collision). Memory: an LRU under a byte cap in which an entry is always more recent than its
// descendants, so eviction takes leaves first; evicting an entry drops its descendants too (unreachable).
import { GenerationError } from "./errors.js";
import type { KVRows, SequenceKV } from "./sequence-kv.js";

/** One cached chunk: positions [start, start + count) of every prompt starting with its chain's tokens. */
export interface PrefixChunk {
  readonly id: number;
  readonly parent: PrefixChunk | null;
  readonly key: string;
  readonly rows: KVRows;
  readonly bytes: number;
  readonly children: Set<PrefixChunk>;
  live: boolean;
}

export interface PrefixCacheCounters {
  /** Chunks stored, and dropped to stay under the cap (descendants included) or because the weights changed. */
  inserts: number;
  evictions: number;
  clears: number;
}

export class PrefixCache {
  /** Live chunks by key, least recently used first. */
  private readonly entries = new Map<string, PrefixChunk>();
  private nextId = 1;
  private held = 0;
  readonly counters: PrefixCacheCounters = { inserts: 0, evictions: 0, clears: 0 };

  constructor(
    readonly capacityBytes: number,
    readonly chunk: number,
  ) {
    if (!(Number.isSafeInteger(capacityBytes) && capacityBytes >= 0))
      throw new GenerationError(`BatchScheduler: prefixCacheBytes = ${capacityBytes} must be a non-negative integer`);
  }

  /** Bytes the cached rows take. */
  get heldBytes(): number {
    return this.held;
  }

  get size(): number {
    return this.entries.size;
  }

  private keyOf(parent: PrefixChunk | null, tokens: readonly number[], start: number): string {
    return `${parent?.id ?? 0}:${tokens.slice(start, start + this.chunk).join(",")}`;
  }

  /** The cached chunk after `parent` at [start, start + chunk) of `tokens`, if any (marked used). */
  next(parent: PrefixChunk | null, tokens: readonly number[], start: number): PrefixChunk | null {
    if (start + this.chunk > tokens.length) return null;
    const entry = this.entries.get(this.keyOf(parent, tokens, start));
    if (!entry) return null;
    this.touch(entry);
    return entry;
  }

  /**
   * Stores the chunk of `kv` at [start, start + chunk) of `tokens`, child of `parent` (the cached chunk ending
   * at `start`, null when start is 0). Returns the cached chunk (an existing one when already there) and
   * whether it is new, or null when it cannot be stored (parent gone, or no room without evicting the chain).
   */
  insert(
    parent: PrefixChunk | null,
    tokens: readonly number[],
    start: number,
    kv: SequenceKV,
  ): { chunk: PrefixChunk; created: boolean } | null {
    if (parent && !parent.live) return null;
    const key = this.keyOf(parent, tokens, start);
    const existing = this.entries.get(key);
    if (existing) {
      this.touch(existing);
      return { chunk: existing, created: false };
    }
    if (parent) this.touch(parent);
    const rows = kv.copyRows(start, this.chunk);
    let bytes = 0;
    for (const t of [...rows.keys, ...rows.values]) if (t) bytes += t.size * 4;
    if (bytes > this.capacityBytes) {
      disposeRows(rows);
      return null;
    }
    const ancestors = new Set<PrefixChunk>();
    for (let a = parent; a; a = a.parent) ancestors.add(a);
    while (this.held + bytes > this.capacityBytes) {
      const victim = this.entries.values().next().value;
      // Only the chain this chunk extends is left (it is the most recent): no room.
      if (!victim || ancestors.has(victim)) {
        disposeRows(rows);
        return null;
      }
      this.counters.evictions += this.remove(victim);
    }
    const chunk: PrefixChunk = { id: this.nextId++, parent, key, rows, bytes, children: new Set(), live: true };
    parent?.children.add(chunk);
    this.entries.set(key, chunk);
    this.held += bytes;
    this.counters.inserts++;
    this.touch(chunk);
    return { chunk, created: true };
  }

  /** Drops a chunk and its descendants, freeing their rows; returns how many were dropped. */
  remove(chunk: PrefixChunk): number {
    if (!chunk.live) return 0;
    chunk.live = false;
    let dropped = 1;
    for (const child of chunk.children) dropped += this.remove(child);
    chunk.parent?.children.delete(chunk);
    this.entries.delete(chunk.key);
    this.held -= chunk.bytes;
    disposeRows(chunk.rows);
    return dropped;
  }

  /** Drops everything (the weights changed). */
  clear(): void {
    if (this.entries.size === 0) return;
    for (const chunk of [...this.entries.values()]) this.remove(chunk);
    this.counters.clears++;
  }

  /** Moves a chunk and its ancestors to the recent end, ancestors last (so they outlive their descendants). */
  private touch(chunk: PrefixChunk): void {
    for (let c: PrefixChunk | null = chunk; c; c = c.parent) {
      this.entries.delete(c.key);
      this.entries.set(c.key, c);
    }
  }
}

function disposeRows(rows: KVRows): void {
  for (const t of [...rows.keys, ...rows.values]) t?.dispose();
}

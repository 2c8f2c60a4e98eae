// CRC-32, raw inflate under a running output budget, and gzip members (RFC 1952) walked one by
// one: the one home of these for hub-io's archives and @kiln/rollout's trajectory files
// (docs/ARCHITECTURE.md §Concepts). Pure: fflate only, browser-safe.
//
// Why walk members here instead of fflate's Gunzip: Gunzip does not say where a member ends, so
// bytes after the last member were reported as a corrupt stream at offset 0 (or as a bad trailer).
// Walking the members ourselves gives each one an exact [start, end) and names trailing bytes as
// what they are, at the byte where they begin.

import { Inflate } from "fflate";
import { ArchiveError } from "./errors.js";

let crcTable: Uint32Array | null = null;

/** Continues a CRC-32 (ISO-HDLC; RFC 1952 §8, zip APPNOTE 4.4.7) over `data`. */
export function crc32Update(crc: number, data: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let c = ~crc >>> 0;
  for (let i = 0; i < data.length; i++) c = crcTable[(c ^ data[i]) & 0xff] ^ (c >>> 8);
  return ~c >>> 0;
}

/** CRC-32 of `data`. */
export function crc32(data: Uint8Array): number {
  return crc32Update(0, data);
}

/** One array holding `chunks` (no copy when there is a single chunk of the full length). */
export function concatBytes(chunks: readonly Uint8Array[], length: number): Uint8Array {
  if (chunks.length === 1 && chunks[0].length === length) return chunks[0];
  const out = new Uint8Array(length);
  let off = 0;
  for (const c of chunks) {
    out.set(c, off);
    off += c.length;
  }
  return out;
}

/**
 * Compressed bytes to feed the inflater next. Deflate expands at most ~1032×, and fflate holds about
 * five times one push's output while producing it, so the slice shrinks with the remaining budget:
 * one push can pass the budget by at most an eighth of it (and by ~2 MB when the budget is small),
 * while ordinary data still inflates in 64 KiB slices. Memory therefore stays within about 1.6× the cap.
 */
function nextSlice(remainingBudget: number): number {
  return Math.max(2048, Math.min(65_536, Math.floor(remainingBudget / (1032 * 8))));
}

/** A byte budget: a finite or infinite non-negative number. */
export function checkByteBudget(maxBytes: number, what = "maxBytes"): void {
  if (!(typeof maxBytes === "number" && maxBytes >= 0))
    throw new ArchiveError(`${what} must be a non-negative number, got ${String(maxBytes)}`, "Unsupported");
}

export interface BoundedInflate {
  chunks: Uint8Array[];
  /** Bytes inflated. */
  length: number;
  /** Offset in the input just past the end of the deflate stream; -1 when the input ends first. */
  end: number;
}

/** fflate's Inflate state, read only to learn where the stream ended (fflate 0.8's own Gunzip reads it so). */
interface InflateInternals {
  p: Uint8Array;
  s: { f?: number; l?: unknown; p?: number };
}

/**
 * Inflates raw deflate data (RFC 1951) slice by slice, stopping as soon as the output passes
 * `maxBytes` (`onTooLarge` makes the error), so the cap bounds memory and a bomb never
 * materialises. Stops reading at the end of the deflate stream and reports where that is; input
 * that ends before the stream does is reported with `end` -1, not thrown. A damaged stream throws
 * fflate's error (callers wrap it in their own typed error).
 */
export function inflateRawBounded(data: Uint8Array, maxBytes: number, onTooLarge: () => Error): BoundedInflate {
  const chunks: Uint8Array[] = [];
  let length = 0;
  const inflater = new Inflate((chunk) => {
    length += chunk.length;
    if (length > maxBytes) throw onTooLarge();
    if (chunk.length > 0) chunks.push(chunk);
  });
  const state = inflater as unknown as InflateInternals;
  let pushed = 0;
  while (pushed < data.length) {
    const next = Math.min(pushed + nextSlice(maxBytes - length), data.length);
    inflater.push(data.subarray(pushed, next), false);
    pushed = next;
    if (state.s.f && !state.s.l) {
      // The final block is done: `p` holds the input not yet consumed, `s.p` the bit position in it.
      const end = pushed - state.p.length + (((state.s.p ?? 0) + 7) >> 3);
      return { chunks, length, end };
    }
  }
  return { chunks, length, end: -1 };
}

/** One gzip member: [start, end) in the input, its deflate data at [dataStart, end - 8). */
export interface GzipMember {
  start: number;
  dataStart: number;
  end: number;
  payload: Uint8Array;
}

const FTEXT_FHCRC = 0x02;
const FEXTRA = 0x04;
const FNAME = 0x08;
const FCOMMENT = 0x10;
const FRESERVED = 0xe0;

/**
 * Length of the gzip member header at `data[start]` (RFC 1952 §2.3): magic, CM = 8, no reserved
 * flag bits, FEXTRA/FNAME/FCOMMENT/FHCRC inside the data (and FHCRC's CRC-16 correct).
 */
export function gzipHeaderLength(data: Uint8Array, start: number): number {
  const bad = (why: string, rule: "Corrupt" | "Unsupported" | "Checksum" = "Corrupt") =>
    new ArchiveError(`gzip member at byte ${start}: ${why}`, rule, start);
  if (data.length - start < 10) throw bad("truncated header (a member needs at least 18 bytes)");
  if (data[start] !== 0x1f || data[start + 1] !== 0x8b) throw bad("no gzip magic 1f 8b");
  if (data[start + 2] !== 8) throw bad(`compression method ${data[start + 2]} (only 8, deflate)`, "Unsupported");
  const flags = data[start + 3];
  if (flags & FRESERVED) throw bad(`reserved flag bits set (FLG ${flags}; RFC 1952 §2.3.1)`);
  let p = start + 10;
  if (flags & FEXTRA) {
    if (p + 2 > data.length) throw bad("truncated FEXTRA length");
    p += 2 + (data[p] | (data[p + 1] << 8));
  }
  for (const flag of [FNAME, FCOMMENT]) {
    if (!(flags & flag)) continue;
    const nul = data.indexOf(0, p);
    if (nul < 0) throw bad(`${flag === FNAME ? "FNAME" : "FCOMMENT"} is not terminated`);
    p = nul + 1;
  }
  if (flags & FTEXT_FHCRC) {
    if (p + 2 > data.length) throw bad("truncated header CRC");
    const want = data[p] | (data[p + 1] << 8);
    if ((crc32(data.subarray(start, p)) & 0xffff) !== want) throw bad("header CRC-16 mismatch", "Checksum");
    p += 2;
  }
  if (p > data.length) throw bad("header runs past the end of the data");
  return p - start;
}

/**
 * Every member of a gzip stream (one or more, RFC 1952 §2.2), inflated under one running budget
 * of `maxBytes` for all of them, each member's CRC-32 and ISIZE checked. Throws ArchiveError with
 * the rule and the byte offset of the problem: `Corrupt` (bad header or deflate data, a truncated
 * member), `Checksum` (trailer disagrees with the data), `TooLarge` (the budget is passed),
 * `TrailingData` (bytes after the last member that are not a gzip member — at the byte where they
 * begin). `baseOffset` is where `data` starts in its file: offsets in errors count from the file's
 * start (the members' own offsets stay relative to `data`).
 */
export function readGzipMembers(data: Uint8Array, maxBytes = 2 ** 32, baseOffset = 0): GzipMember[] {
  checkByteBudget(maxBytes);
  try {
    return walkMembers(data, maxBytes);
  } catch (e) {
    if (!(e instanceof ArchiveError) || baseOffset === 0) throw e;
    // Offsets in the messages and the error are the caller's (a file's), not the slice's.
    const at = (e.byteOffset ?? 0) + baseOffset;
    const message = e.message
      .replace(/^\[\w+\] /, "")
      .replace(/at byte (\d+)|ends at byte (\d+)/g, (m) => m.replace(/\d+/, (d) => String(Number(d) + baseOffset)));
    throw new ArchiveError(message, e.rule, at, e.entry);
  }
}

function walkMembers(data: Uint8Array, maxBytes: number): GzipMember[] {
  const members: GzipMember[] = [];
  let total = 0;
  let start = 0;
  do {
    if (members.length > 0 && !(data[start] === 0x1f && (start + 1 >= data.length || data[start + 1] === 0x8b))) {
      throw new ArchiveError(
        `${data.length - start} bytes after the last gzip member (which ends at byte ${start}) are not a gzip member (RFC 1952 §2.2: a gzip file is a series of members)`,
        "TrailingData",
        start,
      );
    }
    const dataStart = start + gzipHeaderLength(data, start);
    let inflated: BoundedInflate;
    try {
      inflated = inflateRawBounded(
        data.subarray(dataStart),
        maxBytes - total,
        () => new ArchiveError(`gzip stream inflates beyond ${maxBytes} bytes`, "TooLarge", start),
      );
    } catch (e) {
      if (e instanceof ArchiveError) throw e;
      throw new ArchiveError(
        `gzip member at byte ${start}: deflate data does not inflate (${(e as Error).message})`,
        "Corrupt",
        start,
      );
    }
    if (inflated.end < 0)
      throw new ArchiveError(`gzip member at byte ${start} is truncated (deflate data ends early)`, "Corrupt", start);
    const trailer = dataStart + inflated.end;
    if (trailer + 8 > data.length)
      throw new ArchiveError(`gzip member at byte ${start} is truncated (no CRC-32/ISIZE trailer)`, "Corrupt", trailer);
    const payload = concatBytes(inflated.chunks, inflated.length);
    const view = new DataView(data.buffer, data.byteOffset + trailer, 8);
    if (view.getUint32(0, true) !== crc32(payload))
      throw new ArchiveError(
        `gzip member at byte ${start}: CRC-32/ISIZE mismatch (the CRC-32 does not match the data)`,
        "Checksum",
        trailer,
      );
    if (view.getUint32(4, true) !== payload.length >>> 0)
      throw new ArchiveError(
        `gzip member at byte ${start}: CRC-32/ISIZE mismatch (ISIZE does not match the length of the data)`,
        "Checksum",
        trailer + 4,
      );
    total += payload.length;
    members.push({ start, dataStart, end: trailer + 8, payload });
    start = trailer + 8;
  } while (start < data.length);
  return members;
}

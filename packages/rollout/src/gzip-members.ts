// Self-delimiting gzip members (RFC 1952) so a trajectory file can be appended one episode at a
// time and a torn tail (a crash mid-write) can be found and cut without guessing.
// Each member carries its own total size in an FEXTRA subfield "KL" (the idea of BGZF's "BC"
// subfield, SAM spec §4.1, but with a 32-bit size so one member can hold a long episode).
// Any gzip reader (gunzip, zcat, Python's gzip) still reads the file: concatenated members are
// part of RFC 1952 and unknown extra subfields are skipped. Pure: fflate only, browser-safe.
//
// Torn tail vs corruption: appends are sequential, so a crash can only leave a *prefix* of one
// member at the end of the file. Bytes that are a prefix of a valid member are a torn tail (safe
// to cut); anything else — a member that fails its CRC, a size field that disagrees with the
// data, bytes that are not a member — is corruption and is never cut silently.

import { deflateSync, Gunzip, Inflate } from "fflate";
import { TrajectoryFileError } from "./errors.js";

const HEADER_BYTES = 10 + 2 + 4 + 4; // fixed header, XLEN, subfield id+len, uint32 size
const TRAILER_BYTES = 8;
/** The first 16 bytes of every member this module writes (the 4 size bytes follow). */
const MEMBER_PREFIX = new Uint8Array([0x1f, 0x8b, 8, 0x04, 0, 0, 0, 0, 0, 255, 8, 0, 0x4b, 0x4c, 4, 0]);
/**
 * Compressed bytes to feed the inflater next. Deflate expands at most ~1032×, and fflate holds about
 * five times one push's output while producing it, so the slice shrinks with the remaining budget:
 * one push can pass the budget by at most an eighth of it (and by ~2 MB when the budget is small),
 * while ordinary data still inflates in 64 KiB slices. Memory therefore stays within about 1.6× the cap.
 */
function nextSlice(remainingBudget: number): number {
  if (Number.isNaN(remainingBudget)) throw new TrajectoryFileError("inflation cap is not a number", "usage");
  return Math.max(2048, Math.min(65_536, Math.floor(remainingBudget / (1032 * 8))));
}
/** Default cap on one inflated member (one episode). */
export const DEFAULT_MAX_MEMBER_BYTES = 256 * 1024 * 1024;

let crcTable: Uint32Array | null = null;

/** Continues a CRC-32 (ISO-HDLC, the gzip trailer's checksum; RFC 1952 §8) over `data`. */
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

/** CRC-32 of `data` (RFC 1952 §8). */
export function crc32(data: Uint8Array): number {
  return crc32Update(0, data);
}

/** One gzip member holding `data`, with its total size in the "KL" extra subfield. */
export function encodeGzipMember(data: Uint8Array, level: 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 = 6): Uint8Array {
  const body = deflateSync(data, { level });
  const size = HEADER_BYTES + body.length + TRAILER_BYTES;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out.set(MEMBER_PREFIX); // magic, deflate, FEXTRA, mtime 0, xfl 0, OS unknown, XLEN 8, "KL", 4
  view.setUint32(16, size, true);
  out.set(body, HEADER_BYTES);
  view.setUint32(HEADER_BYTES + body.length, crc32(data), true);
  view.setUint32(HEADER_BYTES + body.length + 4, data.length >>> 0, true);
  return out;
}

/** Bytes a sized member needs before its size can be read. */
export const GZIP_MEMBER_HEADER_BYTES = HEADER_BYTES;

/**
 * Total size of the member starting at `header[0]` when it is one of ours (has the "KL" size),
 * null for any other gzip member. `header` must hold at least GZIP_MEMBER_HEADER_BYTES bytes.
 */
export function sizedMemberLength(header: Uint8Array): number | null {
  if (header.length < HEADER_BYTES || header[0] !== 0x1f || header[1] !== 0x8b || header[3] !== 0x04) return null;
  const view = new DataView(header.buffer, header.byteOffset, HEADER_BYTES);
  if (view.getUint16(10, true) !== 8 || header[12] !== 0x4b || header[13] !== 0x4c) return null;
  return view.getUint32(16, true);
}

/** Where a member sits, for error messages: file name, byte offset, 1-based episode number. */
export interface MemberPlace {
  name: string;
  offset: number;
  episode: number;
}

const corrupt = (at: MemberPlace, what: string): TrajectoryFileError =>
  new TrajectoryFileError(
    `${at.name}: episode ${at.episode} (gzip member at byte ${at.offset}) is corrupt: ${what}`,
    "corrupt",
    at.offset,
    at.episode,
  );

/**
 * Inflates raw deflate data slice by slice, stopping as soon as the output passes `maxBytes`,
 * so the cap bounds memory (a bomb never materialises). `final` false leaves the stream open:
 * used to test whether bytes are a prefix of a valid stream.
 */
export function inflateCapped(
  data: Uint8Array,
  maxBytes: number,
  onTooLarge: () => Error,
  final = true,
): { chunks: Uint8Array[]; length: number } {
  const chunks: Uint8Array[] = [];
  let length = 0;
  const inflater = new Inflate((chunk) => {
    length += chunk.length;
    if (length > maxBytes) throw onTooLarge();
    if (chunk.length > 0) chunks.push(chunk);
  });
  for (let o = 0; o < data.length; ) {
    const end = Math.min(o + nextSlice(maxBytes - length), data.length);
    inflater.push(data.subarray(o, end), false);
    o = end;
  }
  if (final) inflater.push(new Uint8Array(0), true);
  return { chunks, length };
}

function concat(chunks: readonly Uint8Array[], length: number): Uint8Array {
  if (chunks.length === 1) return chunks[0];
  const out = new Uint8Array(length);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return out;
}

/** fflate's error code for input that ends before the deflate stream does. */
const FLATE_UNEXPECTED_EOF = 0;

export type SizedMemberRead =
  /** A complete, verified member of `length` bytes. */
  | { kind: "member"; length: number; payload: Uint8Array }
  /** The bytes are a strict prefix of a valid member and run to the end of the data: a torn tail. */
  | { kind: "torn" };

/**
 * Reads the sized member at the start of `bytes`. `bytes` holds the whole member, or — when the
 * member's declared size runs past the end of the data — everything up to the end of the data.
 * Returns "torn" only when the bytes are a prefix of a valid member; throws a TrajectoryFileError
 * naming the episode and byte offset for anything else (CRC, ISIZE, size field, inflation, cap).
 */
export function readSizedMember(
  bytes: Uint8Array,
  at: MemberPlace,
  maxBytes = DEFAULT_MAX_MEMBER_BYTES,
): SizedMemberRead {
  const tooLarge = () =>
    new TrajectoryFileError(
      `${at.name}: episode ${at.episode} (gzip member at byte ${at.offset}) inflates beyond the cap of ${maxBytes} bytes`,
      "too-large",
      at.offset,
      at.episode,
    );
  if (bytes.length < HEADER_BYTES) {
    for (let i = 0; i < Math.min(bytes.length, MEMBER_PREFIX.length); i++) {
      if (bytes[i] !== MEMBER_PREFIX[i]) throw corrupt(at, `truncated header does not match a trajectory member`);
    }
    return { kind: "torn" };
  }
  const size = sizedMemberLength(bytes);
  if (size === null) throw corrupt(at, "not a sized gzip member");
  if (size < HEADER_BYTES + TRAILER_BYTES) throw corrupt(at, `size field ${size} is impossible`);
  if (size <= bytes.length) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, size);
    let inflated: { chunks: Uint8Array[]; length: number };
    try {
      inflated = inflateCapped(bytes.subarray(HEADER_BYTES, size - TRAILER_BYTES), maxBytes, tooLarge);
    } catch (err) {
      if (err instanceof TrajectoryFileError) throw err;
      throw corrupt(at, `deflate data does not inflate (${(err as Error).message})`);
    }
    const payload = concat(inflated.chunks, inflated.length);
    if (view.getUint32(size - 8, true) !== crc32(payload)) throw corrupt(at, "CRC-32 mismatch");
    if (view.getUint32(size - 4, true) !== payload.length >>> 0) throw corrupt(at, "ISIZE mismatch");
    return { kind: "member", length: size, payload };
  }
  // The declared size runs past the end of the data. A torn tail inflates as an unfinished
  // stream; a complete member (the size field is what is wrong) finishes and carries its trailer.
  // Compressed data cannot exceed the cap by more than deflate's stored-block overhead.
  if (bytes.length > maxBytes + (maxBytes >>> 6) + 65_536) throw corrupt(at, `size field ${size} is past the end`);
  let inflated: { chunks: Uint8Array[]; length: number };
  try {
    inflated = inflateCapped(bytes.subarray(HEADER_BYTES), maxBytes, tooLarge);
  } catch (err) {
    if (err instanceof TrajectoryFileError) throw err;
    if ((err as { code?: number }).code === FLATE_UNEXPECTED_EOF) return { kind: "torn" };
    throw corrupt(at, `deflate data does not inflate (${(err as Error).message})`);
  }
  const payload = concat(inflated.chunks, inflated.length);
  const trailer = new Uint8Array(8);
  const tv = new DataView(trailer.buffer);
  tv.setUint32(0, crc32(payload), true);
  tv.setUint32(4, payload.length >>> 0, true);
  if (indexOfBytes(bytes, trailer, HEADER_BYTES) >= 0) {
    throw corrupt(at, `size field ${size} disagrees with the member's data (which ends inside the file)`);
  }
  return { kind: "torn" };
}

function indexOfBytes(haystack: Uint8Array, needle: Uint8Array, from: number): number {
  for (let i = haystack.indexOf(needle[0], from); i >= 0; i = haystack.indexOf(needle[0], i + 1)) {
    if (i + needle.length > haystack.length) return -1;
    let k = 1;
    while (k < needle.length && haystack[i + k] === needle[k]) k++;
    if (k === needle.length) return i;
  }
  return -1;
}

/** Offset of the next byte sequence that looks like one of our member headers, at or after `from`. */
export function nextMemberStart(data: Uint8Array, from: number): number {
  return indexOfBytes(data, MEMBER_PREFIX, from);
}

export interface DecodedMembers {
  /** Decompressed payload of every complete member, in order. */
  payloads: Uint8Array[];
  /** Byte offset where the complete members end (== input length when nothing is torn). */
  validBytes: number;
  /** Whether trailing bytes were an incomplete member (a crash mid-append). */
  torn: boolean;
}

export interface DecodeMembersOptions {
  /** Cap on one inflated member (default 256 MiB). */
  maxMemberBytes?: number;
  /** Cap on everything inflated (default: no cap beyond the per-member one). */
  maxTotalBytes?: number;
  /** Offset of `data[0]` in the file, so messages give real file offsets (default 0). */
  baseOffset?: number;
  /** Number of episodes before `data[0]` (default 0). */
  baseEpisode?: number;
}

/**
 * Splits a file of sized members. A strict prefix of a member at the end is reported as torn;
 * any other damage (a bad CRC, size field or deflate stream, in any member, or bytes that are not
 * a gzip member) throws a TrajectoryFileError naming the episode and byte offset. Members without
 * the "KL" size (a file written by another tool) are decoded as one ordinary multi-member gzip
 * stream, each member's CRC-32 and ISIZE verified.
 */
export function decodeGzipMembers(
  data: Uint8Array,
  name = "gzip data",
  options: DecodeMembersOptions = {},
): DecodedMembers {
  const maxMember = options.maxMemberBytes ?? DEFAULT_MAX_MEMBER_BYTES;
  const maxTotal = options.maxTotalBytes ?? Number.POSITIVE_INFINITY;
  const base = options.baseOffset ?? 0;
  const payloads: Uint8Array[] = [];
  let total = 0;
  let offset = 0;
  let episode = options.baseEpisode ?? 0;
  while (offset < data.length) {
    const at: MemberPlace = { name, offset: base + offset, episode: episode + 1 };
    const rest = data.subarray(offset);
    if (rest[0] !== 0x1f || (rest.length > 1 && rest[1] !== 0x8b)) {
      throw new TrajectoryFileError(
        `${name}: byte ${base + offset} does not start a gzip member (magic 1f 8b): ${rest.length} bytes of garbage after episode ${episode}`,
        "garbage",
        base + offset,
        episode + 1,
      );
    }
    if (rest.length >= HEADER_BYTES && sizedMemberLength(rest) === null) {
      const foreign = gunzipMembers(rest, {
        name,
        baseOffset: base + offset,
        maxBytes: Math.min(maxTotal - total, maxMember * 64),
      });
      payloads.push(...foreign);
      return { payloads, validBytes: data.length, torn: false };
    }
    const read = readSizedMember(rest, at, Math.min(maxMember, maxTotal - total));
    if (read.kind === "torn") return { payloads, validBytes: offset, torn: true };
    payloads.push(read.payload);
    total += read.payload.length;
    offset += read.length;
    episode++;
  }
  return { payloads, validBytes: offset, torn: false };
}

/**
 * An ordinary (possibly multi-member) gzip stream, inflated under a running cap, every member's
 * CRC-32 and ISIZE checked; a missing trailer or bytes after the last member are errors.
 * Returns one payload per member.
 */
export function gunzipMembers(
  data: Uint8Array,
  options: { name?: string; baseOffset?: number; maxBytes?: number } = {},
): Uint8Array[] {
  const name = options.name ?? "gzip data";
  const base = options.baseOffset ?? 0;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_MEMBER_BYTES;
  const fail = (what: string, offset: number, problem: "corrupt" | "too-large" = "corrupt") =>
    new TrajectoryFileError(`${name}: gzip member at byte ${base + offset}: ${what}`, problem, base + offset);
  const members = [{ start: 0, chunks: [] as Uint8Array[], length: 0, crc: 0 }];
  let total = 0;
  const g = new Gunzip((chunk) => {
    const m = members[members.length - 1];
    total += chunk.length;
    if (total > maxBytes) throw fail(`inflates beyond the cap of ${maxBytes} bytes`, m.start, "too-large");
    if (chunk.length === 0) return;
    m.chunks.push(chunk);
    m.length += chunk.length;
    m.crc = crc32Update(m.crc, chunk);
  });
  g.onmember = (start) => members.push({ start, chunks: [], length: 0, crc: 0 });
  try {
    for (let o = 0; o < data.length; ) {
      const end = Math.min(o + nextSlice(maxBytes - total), data.length);
      g.push(data.subarray(o, end), end === data.length);
      o = end;
    }
  } catch (err) {
    if (err instanceof TrajectoryFileError) throw err;
    throw fail(`not a valid gzip stream (${(err as Error).message})`, members[members.length - 1].start);
  }
  members.forEach((m, i) => {
    const end = i + 1 < members.length ? members[i + 1].start : data.length;
    if (end - m.start < 18) throw fail("too short to be a gzip member", m.start);
    const view = new DataView(data.buffer, data.byteOffset + end - 8, 8);
    if (view.getUint32(0, true) !== m.crc || view.getUint32(4, true) !== m.length >>> 0) {
      throw fail(
        i + 1 < members.length
          ? "CRC-32/ISIZE mismatch"
          : "CRC-32/ISIZE mismatch (damaged data, a missing trailer or bytes after the last member)",
        m.start,
      );
    }
  });
  return members.map((m) => concat(m.chunks, m.length));
}

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

import { ArchiveError, concatBytes, crc32, inflateRawBounded, readGzipMembers } from "@kiln/hub-io";
import { deflateSync } from "fflate";
import { TrajectoryFileError } from "./errors.js";

const HEADER_BYTES = 10 + 2 + 4 + 4; // fixed header, XLEN, subfield id+len, uint32 size
const TRAILER_BYTES = 8;
/** The first 16 bytes of every member this module writes (the 4 size bytes follow). */
const MEMBER_PREFIX = new Uint8Array([0x1f, 0x8b, 8, 0x04, 0, 0, 0, 0, 0, 255, 8, 0, 0x4b, 0x4c, 4, 0]);
/** Default cap on one inflated member (one episode). */
export const DEFAULT_MAX_MEMBER_BYTES = 256 * 1024 * 1024;

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
  const inflate = (body: Uint8Array) => {
    try {
      return inflateRawBounded(body, maxBytes, tooLarge);
    } catch (err) {
      if (err instanceof TrajectoryFileError) throw err;
      throw corrupt(at, `deflate data does not inflate (${(err as Error).message})`);
    }
  };
  if (size <= bytes.length) {
    const view = new DataView(bytes.buffer, bytes.byteOffset, size);
    const inflated = inflate(bytes.subarray(HEADER_BYTES, size - TRAILER_BYTES));
    if (inflated.end !== size - TRAILER_BYTES - HEADER_BYTES)
      throw corrupt(
        at,
        inflated.end < 0
          ? `size field ${size} cuts the deflate data short`
          : `size field ${size} disagrees with the deflate data, which ends at byte ${at.offset + HEADER_BYTES + inflated.end}`,
      );
    const payload = concatBytes(inflated.chunks, inflated.length);
    if (view.getUint32(size - 8, true) !== crc32(payload)) throw corrupt(at, "CRC-32 mismatch");
    if (view.getUint32(size - 4, true) !== payload.length >>> 0) throw corrupt(at, "ISIZE mismatch");
    return { kind: "member", length: size, payload };
  }
  // The declared size runs past the end of the data. A torn tail is a strict prefix of a valid
  // member: its deflate stream is unfinished, or finished and followed by part of its own trailer.
  // Compressed data cannot exceed the cap by more than deflate's stored-block overhead.
  if (bytes.length > maxBytes + (maxBytes >>> 6) + 65_536) throw corrupt(at, `size field ${size} is past the end`);
  const inflated = inflate(bytes.subarray(HEADER_BYTES));
  if (inflated.end < 0) return { kind: "torn" };
  const payload = concatBytes(inflated.chunks, inflated.length);
  const trailer = new Uint8Array(8);
  const tv = new DataView(trailer.buffer);
  tv.setUint32(0, crc32(payload), true);
  tv.setUint32(4, payload.length >>> 0, true);
  const after = bytes.subarray(HEADER_BYTES + inflated.end);
  for (let i = 0; i < Math.min(8, after.length); i++)
    if (after[i] !== trailer[i]) throw corrupt(at, i < 4 ? "CRC-32 mismatch" : "ISIZE mismatch");
  if (after.length >= 8)
    throw corrupt(at, `size field ${size} disagrees with the member's data (which ends inside the file)`);
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
  try {
    return readGzipMembers(data, options.maxBytes ?? DEFAULT_MAX_MEMBER_BYTES, base).map((m) => m.payload);
  } catch (err) {
    if (!(err instanceof ArchiveError)) throw err;
    const problem = err.rule === "TooLarge" ? "too-large" : err.rule === "TrailingData" ? "garbage" : "corrupt";
    throw new TrajectoryFileError(`${name}: ${err.message.replace(/^\[\w+\] /, "")}`, problem, err.byteOffset);
  }
}

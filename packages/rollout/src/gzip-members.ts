// Self-delimiting gzip members (RFC 1952) so a trajectory file can be appended one episode at a
// time and a torn tail (a crash mid-write) can be found and cut without guessing.
// Each member carries its own total size in an FEXTRA subfield "KL" (the idea of BGZF's "BC"
// subfield, SAM spec §4.1, but with a 32-bit size so one member can hold a long episode).
// Any gzip reader (gunzip, zcat, Python's gzip) still reads the file: concatenated members are
// part of RFC 1952 and unknown extra subfields are skipped. Pure: fflate only, browser-safe.

import { deflateSync, Gunzip, inflateSync } from "fflate";
import { TrajectoryFileError } from "./errors.js";

const HEADER_BYTES = 10 + 2 + 4 + 4; // fixed header, XLEN, subfield id+len, uint32 size
const TRAILER_BYTES = 8;

let crcTable: Uint32Array | null = null;

/** CRC-32 (ISO-HDLC, the gzip trailer's checksum; RFC 1952 §8). */
export function crc32(data: Uint8Array): number {
  if (!crcTable) {
    crcTable = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      crcTable[n] = c >>> 0;
    }
  }
  let c = 0xffffffff;
  for (let i = 0; i < data.length; i++) c = crcTable[(c ^ data[i]) & 0xff] ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** One gzip member holding `data`, with its total size in the "KL" extra subfield. */
export function encodeGzipMember(data: Uint8Array, level: 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 = 6): Uint8Array {
  const body = deflateSync(data, { level });
  const size = HEADER_BYTES + body.length + TRAILER_BYTES;
  const out = new Uint8Array(size);
  const view = new DataView(out.buffer);
  out.set([0x1f, 0x8b, 8, 0x04, 0, 0, 0, 0, 0, 255]); // magic, deflate, FEXTRA, mtime 0, xfl 0, OS unknown
  view.setUint16(10, 8, true); // XLEN
  out.set([0x4b, 0x4c], 12); // "KL"
  view.setUint16(14, 4, true);
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

export interface DecodedMembers {
  /** Decompressed payload of every complete member, in order. */
  payloads: Uint8Array[];
  /** Byte offset where the complete members end (== input length when nothing is torn). */
  validBytes: number;
  /** Whether trailing bytes were an incomplete member (a crash mid-append). */
  torn: boolean;
}

/**
 * Splits a file of sized members. A short or checksum-failing **last** member is reported as
 * torn; damage before the last member is corruption and throws. Members without the "KL" size
 * (a file written by another tool) are decoded as one ordinary multi-member gzip stream.
 */
export function decodeGzipMembers(data: Uint8Array, name = "gzip data"): DecodedMembers {
  const payloads: Uint8Array[] = [];
  let offset = 0;
  while (offset < data.length) {
    const remaining = data.length - offset;
    if (remaining < HEADER_BYTES) {
      if (data[offset] === 0x1f || remaining < 2) return { payloads, validBytes: offset, torn: true };
    }
    if (data[offset] !== 0x1f || data[offset + 1] !== 0x8b) {
      throw new TrajectoryFileError(`${name}: byte ${offset} does not start a gzip member (magic 1f 8b)`);
    }
    const view = new DataView(data.buffer, data.byteOffset + offset, remaining);
    const sized =
      remaining >= HEADER_BYTES &&
      data[offset + 3] === 0x04 &&
      view.getUint16(10, true) === 8 &&
      data[offset + 12] === 0x4b &&
      data[offset + 13] === 0x4c;
    if (!sized) {
      payloads.push(...gunzipAll(data.subarray(offset), name));
      return { payloads, validBytes: data.length, torn: false };
    }
    const size = view.getUint32(16, true);
    if (size < HEADER_BYTES + TRAILER_BYTES) {
      throw new TrajectoryFileError(`${name}: member at byte ${offset} declares impossible size ${size}`);
    }
    if (size > remaining) return { payloads, validBytes: offset, torn: true };
    let payload: Uint8Array;
    try {
      payload = inflateSync(data.subarray(offset + HEADER_BYTES, offset + size - TRAILER_BYTES));
    } catch (err) {
      if (offset + size === data.length) return { payloads, validBytes: offset, torn: true };
      throw new TrajectoryFileError(`${name}: member at byte ${offset} does not inflate: ${(err as Error).message}`);
    }
    const crc = view.getUint32(size - 8, true);
    if (crc !== crc32(payload) || view.getUint32(size - 4, true) !== payload.length >>> 0) {
      if (offset + size === data.length) return { payloads, validBytes: offset, torn: true };
      throw new TrajectoryFileError(`${name}: member at byte ${offset} fails its CRC-32/ISIZE check`);
    }
    payloads.push(payload);
    offset += size;
  }
  return { payloads, validBytes: offset, torn: false };
}

function gunzipAll(data: Uint8Array, name: string): Uint8Array[] {
  const chunks: Uint8Array[] = [];
  try {
    const g = new Gunzip((chunk) => chunks.push(chunk));
    g.push(data, true);
  } catch (err) {
    throw new TrajectoryFileError(`${name}: gzip stream is corrupt: ${(err as Error).message}`);
  }
  let total = 0;
  for (const c of chunks) total += c.length;
  const out = new Uint8Array(total);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.length;
  }
  return [out];
}

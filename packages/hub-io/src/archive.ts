// gzip and zip with fflate, plus gzipped JSONL trajectory files. Reading never trusts the input:
// - inflation runs slice by slice under a running output budget and stops as soon as the cap is
//   crossed, so a cap bounds memory, not just the size of the result;
// - every gzip member's CRC-32 and ISIZE (RFC 1952 §2.3.1) and every zip entry's CRC-32 and
//   declared sizes (APPNOTE 4.4.7–4.4.9) are checked; a missing trailer or bytes after the end are errors;
// - extraction refuses entry names that would escape the destination (absolute paths, drive
//   letters, `..` segments: "zip-slip"), never follows a link already in the destination, and
//   writes nothing until the whole archive has been read and checked.

import { Gunzip, gzipSync, Inflate, strFromU8, strToU8, zipSync } from "fflate";
import { readFileBytes, writeFileAtomic } from "./atomic-file.js";
import { ArchiveError } from "./errors.js";

/**
 * Compressed bytes to feed the inflater next. Deflate expands at most ~1032×, and fflate holds about
 * five times one push's output while producing it, so the slice shrinks with the remaining budget:
 * one push can pass the budget by at most an eighth of it (and by ~2 MB when the budget is small),
 * while ordinary data still inflates in 64 KiB slices. Memory therefore stays within about 1.6× the cap.
 */
function checkCap(maxBytes: number): void {
  if (!(typeof maxBytes === "number" && maxBytes >= 0))
    throw new ArchiveError(`maxBytes must be a non-negative number, got ${String(maxBytes)}`, "Unsupported");
}

function nextSlice(remainingBudget: number): number {
  return Math.max(2048, Math.min(65_536, Math.floor(remainingBudget / (1032 * 8))));
}

let crcTable: Uint32Array | null = null;

/** Continues a CRC-32 (ISO-HDLC; RFC 1952 §8, APPNOTE 4.4.7) over `data`. */
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

/** gzip bytes (level 6, as gzip's default). */
export function gzip(data: Uint8Array, level: 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 = 6): Uint8Array {
  return gzipSync(data, { level, mtime: 0 });
}

function concat(chunks: readonly Uint8Array[], length: number): Uint8Array {
  if (chunks.length === 1 && chunks[0].length === length) return chunks[0];
  const out = new Uint8Array(length);
  let off = 0;
  for (const p of chunks) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

/**
 * gunzip (one or more members), refusing to inflate more than `maxBytes` (default 4 GiB): the
 * budget is checked as the output grows, so a gzip bomb stops soon after the cap (see nextSlice). Each
 * member's CRC-32 and ISIZE are verified; a truncated stream, a missing trailer and bytes after
 * the last member throw ArchiveError.
 */
export function gunzip(data: Uint8Array, maxBytes = 2 ** 32): Uint8Array {
  checkCap(maxBytes);
  if (data.length < 18 || data[0] !== 0x1f || data[1] !== 0x8b)
    throw new ArchiveError("not a gzip stream (needs the magic 1f 8b and at least 18 bytes)", "Corrupt", 0);
  const members = [{ start: 0, length: 0, crc: 0 }];
  const chunks: Uint8Array[] = [];
  let total = 0;
  const g = new Gunzip((chunk) => {
    total += chunk.length;
    if (total > maxBytes)
      throw new ArchiveError(
        `gzip stream inflates beyond ${maxBytes} bytes`,
        "TooLarge",
        members[members.length - 1].start,
      );
    if (chunk.length === 0) return;
    const m = members[members.length - 1];
    m.length += chunk.length;
    m.crc = crc32Update(m.crc, chunk);
    chunks.push(chunk);
  });
  g.onmember = (start) => members.push({ start, length: 0, crc: 0 });
  try {
    for (let o = 0; o < data.length; ) {
      const end = Math.min(o + nextSlice(maxBytes - total), data.length);
      g.push(data.subarray(o, end), end === data.length);
      o = end;
    }
  } catch (e) {
    if (e instanceof ArchiveError) throw e;
    const at = members[members.length - 1].start;
    throw new ArchiveError(`not a valid gzip stream (member at byte ${at}): ${(e as Error).message}`, "Corrupt", at);
  }
  members.forEach((m, i) => {
    const last = i === members.length - 1;
    const end = last ? data.length : members[i + 1].start;
    if (end - m.start < 18) throw new ArchiveError(`gzip member at byte ${m.start} is truncated`, "Corrupt", m.start);
    const trailer = new DataView(data.buffer, data.byteOffset + end - 8, 8);
    if (trailer.getUint32(0, true) !== m.crc || trailer.getUint32(4, true) !== m.length >>> 0) {
      throw new ArchiveError(
        `gzip member at byte ${m.start}: CRC-32/ISIZE trailer does not match the data${
          last ? " (damaged data, a missing trailer, or bytes after the end of the stream)" : ""
        }`,
        "Checksum",
        end - 8,
      );
    }
  });
  return concat(chunks, total);
}

/**
 * Normalize an archive entry name to a safe relative "/" path, or throw: absolute paths, drive
 * letters, `..` segments, NUL bytes and empty names are refused (backslashes count as separators).
 */
export function safeEntryPath(name: string): string {
  const n = name.replaceAll("\\", "/");
  const refuse = (why: string) =>
    new ArchiveError(`entry ${JSON.stringify(name)}: ${why}`, "UnsafePath", undefined, name);
  if (n.includes("\0")) throw refuse("NUL byte in name");
  if (n.startsWith("/") || /^[A-Za-z]:/.test(n)) throw refuse("absolute path refused");
  const parts = n.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes("..")) throw refuse('".." refused (path would leave the destination)');
  if (parts.length === 0) throw refuse("empty path");
  return parts.join("/");
}

/** Zip files (name → bytes or UTF-8 text); names are checked like extraction checks them. */
export function zipFiles(files: Record<string, Uint8Array | string> | Map<string, Uint8Array | string>): Uint8Array {
  const input: Record<string, Uint8Array> = {};
  for (const [name, data] of files instanceof Map ? files : Object.entries(files)) {
    input[safeEntryPath(name)] = typeof data === "string" ? strToU8(data) : data;
  }
  return zipSync(input, { level: 6, mtime: new Date(1980, 0, 1) });
}

interface ZipEntry {
  name: string;
  method: number;
  flags: number;
  crc: number;
  compressedSize: number;
  size: number;
  localOffset: number;
  centralOffset: number;
}

const U32_MAX = 0xffffffff;

/** The central directory (APPNOTE 4.3.12–4.3.16, with Zip64 4.3.14–4.3.15 and 4.5.3). */
function readCentralDirectory(data: Uint8Array): ZipEntry[] {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  const bad = (why: string, at?: number, rule: "Corrupt" | "TrailingData" | "Unsupported" = "Corrupt") =>
    new ArchiveError(`not a valid zip archive: ${why}`, rule, at);
  let eocd = -1;
  for (let i = data.length - 22; i >= Math.max(0, data.length - 22 - 0xffff); i--) {
    if (view.getUint32(i, true) === 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw bad("no end-of-central-directory record", data.length);
  const commentLength = view.getUint16(eocd + 20, true);
  if (eocd + 22 + commentLength !== data.length) {
    throw bad(
      `${data.length - eocd - 22 - commentLength} bytes after the end of the archive`,
      eocd + 22 + commentLength,
      "TrailingData",
    );
  }
  let count = view.getUint16(eocd + 10, true);
  let cdSize = view.getUint32(eocd + 12, true);
  let cdOffset = view.getUint32(eocd + 16, true);
  if (view.getUint16(eocd + 4, true) !== 0 || view.getUint16(eocd + 6, true) !== 0)
    throw bad("multi-disk archives are not supported", eocd, "Unsupported");
  if (count === 0xffff || cdSize === U32_MAX || cdOffset === U32_MAX) {
    const locator = eocd - 20;
    if (locator < 0 || view.getUint32(locator, true) !== 0x07064b50) throw bad("Zip64 locator missing", eocd);
    const z64 = Number(view.getBigUint64(locator + 8, true));
    if (z64 + 56 > data.length || view.getUint32(z64, true) !== 0x06064b50) throw bad("Zip64 record missing", locator);
    count = Number(view.getBigUint64(z64 + 32, true));
    cdSize = Number(view.getBigUint64(z64 + 40, true));
    cdOffset = Number(view.getBigUint64(z64 + 48, true));
  }
  if (cdOffset + cdSize > eocd) throw bad(`central directory [${cdOffset}, +${cdSize}) overlaps its end record`, eocd);
  const entries: ZipEntry[] = [];
  let p = cdOffset;
  for (let k = 0; k < count; k++) {
    if (p + 46 > cdOffset + cdSize || view.getUint32(p, true) !== 0x02014b50)
      throw bad(`central entry ${k} missing`, p);
    const nameLength = view.getUint16(p + 28, true);
    const extraLength = view.getUint16(p + 30, true);
    const commentLen = view.getUint16(p + 32, true);
    const end = p + 46 + nameLength + extraLength + commentLen;
    if (end > cdOffset + cdSize) throw bad(`central entry ${k} runs past the central directory`, p);
    const entry: ZipEntry = {
      name: strFromU8(data.subarray(p + 46, p + 46 + nameLength), (view.getUint16(p + 8, true) & 0x800) === 0),
      flags: view.getUint16(p + 8, true),
      method: view.getUint16(p + 10, true),
      crc: view.getUint32(p + 16, true),
      compressedSize: view.getUint32(p + 20, true),
      size: view.getUint32(p + 24, true),
      localOffset: view.getUint32(p + 42, true),
      centralOffset: p,
    };
    // Zip64 extended information: present, in this order, only for fields that overflowed.
    for (let e = p + 46 + nameLength; e + 4 <= p + 46 + nameLength + extraLength; ) {
      const id = view.getUint16(e, true);
      const len = view.getUint16(e + 2, true);
      if (id === 0x0001) {
        let f = e + 4;
        const next = () => {
          if (f + 8 > e + 4 + len) throw bad(`entry ${JSON.stringify(entry.name)}: short Zip64 field`, e);
          const v = Number(view.getBigUint64(f, true));
          f += 8;
          return v;
        };
        if (entry.size === U32_MAX) entry.size = next();
        if (entry.compressedSize === U32_MAX) entry.compressedSize = next();
        if (entry.localOffset === U32_MAX) entry.localOffset = next();
      }
      e += 4 + len;
    }
    entries.push(entry);
    p = end;
  }
  return entries;
}

/** Inflates raw deflate data under a budget: stops as soon as the output passes `limit`. */
function inflateBounded(data: Uint8Array, limit: number, onOver: () => ArchiveError): Uint8Array {
  const chunks: Uint8Array[] = [];
  let length = 0;
  const inflater = new Inflate((chunk) => {
    length += chunk.length;
    if (length > limit) throw onOver();
    if (chunk.length > 0) chunks.push(chunk);
  });
  for (let o = 0; o < data.length; ) {
    const end = Math.min(o + nextSlice(limit - length), data.length);
    inflater.push(data.subarray(o, end), false);
    o = end;
  }
  inflater.push(new Uint8Array(0), true);
  return concat(chunks, length);
}

/**
 * Unzip in memory. Throws ArchiveError on unsafe or duplicate names, encrypted or unsupported
 * entries, a declared total beyond `maxBytes` (checked before anything is inflated), an entry
 * whose data inflates past its declared size (inflation stops there), a CRC-32 mismatch, or bytes
 * after the end of the archive.
 */
export function unzipSafe(data: Uint8Array, maxBytes = 2 ** 32): Map<string, Uint8Array> {
  checkCap(maxBytes);
  const entries = readCentralDirectory(data);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let declared = 0;
  const files: ZipEntry[] = [];
  const seen = new Set<string>();
  for (const e of entries) {
    const path = safeEntryPath(e.name);
    if (e.name.endsWith("/") || e.name.endsWith("\\")) continue; // directory entry
    if (seen.has(path))
      throw new ArchiveError(
        `entry ${JSON.stringify(e.name)}: duplicate path ${path}`,
        "Duplicate",
        e.centralOffset,
        e.name,
      );
    seen.add(path);
    if (e.flags & 1)
      throw new ArchiveError(`entry ${JSON.stringify(e.name)}: encrypted`, "Unsupported", e.centralOffset, e.name);
    if (e.method !== 0 && e.method !== 8)
      throw new ArchiveError(
        `entry ${JSON.stringify(e.name)}: compression method ${e.method} is not supported (stored, deflate)`,
        "Unsupported",
        e.centralOffset,
        e.name,
      );
    declared += e.size;
    if (declared > maxBytes)
      throw new ArchiveError(
        `zip declares more than ${maxBytes} bytes of content`,
        "TooLarge",
        e.centralOffset,
        e.name,
      );
    files.push(e);
  }
  const out = new Map<string, Uint8Array>();
  for (const e of files) {
    const fail = (why: string, rule: "Corrupt" | "Checksum" | "TooLarge" = "Corrupt", at = e.localOffset) =>
      new ArchiveError(`entry ${JSON.stringify(e.name)}: ${why}`, rule, at, e.name);
    if (e.localOffset + 30 > data.length || view.getUint32(e.localOffset, true) !== 0x04034b50)
      throw fail(`no local header at byte ${e.localOffset}`);
    const start =
      e.localOffset + 30 + view.getUint16(e.localOffset + 26, true) + view.getUint16(e.localOffset + 28, true);
    if (start + e.compressedSize > data.length)
      throw fail(`data [${start}, +${e.compressedSize}) runs past the end of the archive`);
    const raw = data.subarray(start, start + e.compressedSize);
    let bytes: Uint8Array;
    if (e.method === 0) {
      if (e.compressedSize !== e.size)
        throw fail(`stored entry: compressed size ${e.compressedSize} ≠ size ${e.size}`, "Checksum");
      bytes = raw.slice();
    } else {
      try {
        bytes = inflateBounded(raw, e.size, () =>
          fail(`inflates beyond its declared size of ${e.size} bytes`, "Checksum", start),
        );
      } catch (err) {
        if (err instanceof ArchiveError) throw err;
        throw fail(`deflate data does not inflate: ${(err as Error).message}`, "Corrupt", start);
      }
      if (bytes.length !== e.size)
        throw fail(`inflates to ${bytes.length} bytes, declared ${e.size}`, "Checksum", start);
    }
    if (crc32Update(0, bytes) !== e.crc) throw fail("CRC-32 mismatch", "Checksum", start);
    out.set(safeEntryPath(e.name), bytes);
  }
  return out;
}

/**
 * Extract a zip under `destDir` (Node). Everything is read and checked first (names, sizes,
 * CRCs, file-versus-directory clashes inside the archive and against what is on disk, links:
 * every existing path component is lstat'ed and a symbolic link anywhere under `destDir` is
 * refused). Files are then written to temporary names and renamed into place only once all of
 * them are written, so a failure leaves no partial entries. Returns the written relative paths.
 */
export async function extractZip(data: Uint8Array, destDir: string, maxBytes?: number): Promise<string[]> {
  const { resolve, sep, dirname } = await import("node:path");
  const fs = await import("node:fs/promises");
  const files = unzipSafe(data, maxBytes);
  const root = resolve(destDir);
  const dirs = new Set<string>();
  for (const p of files.keys()) {
    const target = resolve(root, p);
    if (!target.startsWith(root + sep))
      throw new ArchiveError(`entry ${JSON.stringify(p)}: resolves outside ${destDir}`, "UnsafePath", undefined, p);
    const parts = p.split("/");
    for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
  }
  for (const d of dirs) {
    if (files.has(d))
      throw new ArchiveError(
        `entry ${JSON.stringify(d)} is a file but other entries need it as a directory`,
        "TypeClash",
        undefined,
        d,
      );
  }
  const lstatOrNull = (path: string) =>
    fs.lstat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === "ENOENT") return null;
      throw err;
    });
  // Check the destination: each existing component must be a real directory (or, for the last
  // one, a regular file that will be replaced); links are never followed.
  const checked = new Map<string, "dir" | "file" | "missing">();
  const kindOf = async (rel: string) => {
    let kind = checked.get(rel);
    if (kind) return kind;
    const st = await lstatOrNull(resolve(root, rel));
    if (st?.isSymbolicLink())
      throw new ArchiveError(
        `${JSON.stringify(rel)} in ${destDir} is a symbolic link; extraction never follows links`,
        "Symlink",
        undefined,
        rel,
      );
    kind = st === null ? "missing" : st.isDirectory() ? "dir" : st.isFile() ? "file" : "file";
    checked.set(rel, kind);
    return kind;
  };
  for (const p of files.keys()) {
    const parts = p.split("/");
    let parentMissing = false;
    for (let i = 1; i <= parts.length && !parentMissing; i++) {
      const rel = parts.slice(0, i).join("/");
      const kind = await kindOf(rel);
      if (kind === "missing") parentMissing = true;
      else if (i < parts.length && kind !== "dir")
        throw new ArchiveError(
          `entry ${JSON.stringify(p)}: ${JSON.stringify(rel)} exists in ${destDir} and is not a directory`,
          "TypeClash",
          undefined,
          p,
        );
      else if (i === parts.length && kind === "dir")
        throw new ArchiveError(
          `entry ${JSON.stringify(p)}: a directory of that name exists in ${destDir}`,
          "TypeClash",
          undefined,
          p,
        );
    }
  }
  const rootStat = await lstatOrNull(root);
  if (rootStat && !rootStat.isDirectory() && !rootStat.isSymbolicLink())
    throw new ArchiveError(`${destDir} exists and is not a directory`, "TypeClash");
  const temps: [string, string][] = [];
  const token = `${process.pid}-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  try {
    for (const [p, bytes] of files) {
      const target = resolve(root, p);
      await fs.mkdir(dirname(target), { recursive: true });
      const tmp = `${target}.kiln-extract-${token}`;
      // "wx": exclusive create, so a link planted at the temporary name is not followed either.
      const handle = await fs.open(tmp, "wx");
      temps.push([tmp, target]);
      try {
        await handle.writeFile(bytes);
        await handle.sync();
      } finally {
        await handle.close();
      }
    }
    for (const [tmp, target] of temps) await fs.rename(tmp, target);
  } catch (err) {
    await Promise.all(temps.map(([tmp]) => fs.rm(tmp, { force: true })));
    throw err;
  }
  return [...files.keys()];
}

/** Records → gzipped JSON Lines (one JSON value per line, "\n"-terminated). */
export function encodeJsonlGz(records: Iterable<unknown>): Uint8Array {
  let text = "";
  for (const r of records) text += `${JSON.stringify(r)}\n`;
  return gzip(strToU8(text));
}

/** Default cap for gzipped JSONL: below the longest string V8 can hold, so text decoding cannot fail. */
const JSONL_DEFAULT_MAX = 256 * 1024 * 1024;

/**
 * Gzipped JSON Lines → records; a bad line is reported with its number. Inflation is capped at
 * `maxBytes` (default 256 MiB); every failure is an ArchiveError.
 */
export function decodeJsonlGz(data: Uint8Array, maxBytes = JSONL_DEFAULT_MAX): unknown[] {
  const bytes = gunzip(data, maxBytes);
  let text: string;
  try {
    text = strFromU8(bytes);
  } catch (e) {
    throw new ArchiveError(
      `gzipped JSONL of ${bytes.length} bytes cannot be decoded as text: ${(e as Error).message}`,
      "TooLarge",
    );
  }
  const out: unknown[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      out.push(JSON.parse(line));
    } catch (e) {
      throw new ArchiveError(`line ${i + 1} is not JSON: ${(e as Error).message}`, "Corrupt");
    }
  });
  return out;
}

/** Write `rollouts/*.jsonl.gz`-style files atomically (Node). */
export async function writeJsonlGz(path: string, records: Iterable<unknown>): Promise<void> {
  await writeFileAtomic(path, encodeJsonlGz(records));
}

/** Read a gzipped JSONL file (Node), capped like decodeJsonlGz; a file larger than any stream the
 * cap allows is refused before it is read. */
export async function readJsonlGz(path: string, maxBytes = JSONL_DEFAULT_MAX): Promise<unknown[]> {
  const { stat } = await import("node:fs/promises");
  if (!(typeof maxBytes === "number" && maxBytes >= 0))
    throw new ArchiveError(`maxBytes must be a non-negative number, got ${String(maxBytes)}`, "Unsupported");
  const size = (await stat(path)).size;
  // deflate cannot make data larger by more than 5 bytes per 16 KiB stored block, plus headers.
  if (size > maxBytes + Math.ceil(maxBytes / 16384) * 5 + 1024 * 1024)
    throw new ArchiveError(`${path}: ${size} bytes cannot inflate to at most ${maxBytes} bytes`, "TooLarge");
  return decodeJsonlGz(await readFileBytes(path), maxBytes);
}

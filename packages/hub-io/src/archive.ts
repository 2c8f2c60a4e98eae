// gzip and zip with fflate, plus gzipped JSONL trajectory files. Reading never trusts the input:
// - inflation runs slice by slice under a running output budget and stops as soon as the cap is
//   crossed, so a cap bounds memory, not just the size of the result;
// - every gzip member's CRC-32 and ISIZE (RFC 1952 §2.3.1) and every zip entry's CRC-32 and
//   declared sizes (APPNOTE 4.4.7–4.4.9) are checked; a missing trailer or bytes after the end are errors;
// - extraction refuses entry names that would escape the destination (absolute paths, drive
//   letters, `..` segments: "zip-slip"), never follows a link already in the destination, and
//   writes nothing until the whole archive has been read and checked.

import { gzipSync, strFromU8, strToU8, zipSync } from "fflate";
import { readFileBytes, writeFileAtomic } from "./atomic-file.js";
import { ArchiveError } from "./errors.js";
import { checkByteBudget, concatBytes, crc32, inflateRawBounded, readGzipMembers } from "./gzip-stream.js";

/** gzip bytes (level 6, as gzip's default). */
export function gzip(data: Uint8Array, level: 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 = 6): Uint8Array {
  return gzipSync(data, { level, mtime: 0 });
}

/**
 * gunzip (one or more members), refusing to inflate more than `maxBytes` (default 4 GiB): the
 * budget is checked as the output grows, so a gzip bomb stops soon after the cap. Each member's
 * CRC-32 and ISIZE are verified; a truncated stream or a missing trailer is `Corrupt`, bytes after
 * the last member are `TrailingData` at the byte where they begin (see readGzipMembers).
 */
export function gunzip(data: Uint8Array, maxBytes = 2 ** 32): Uint8Array {
  const members = readGzipMembers(data, maxBytes);
  if (members.length === 1) return members[0].payload;
  let length = 0;
  for (const m of members) length += m.payload.length;
  return concatBytes(
    members.map((m) => m.payload),
    length,
  );
}

/** Longest entry path (bytes of UTF-8) and path component extraction accepts: Linux's PATH_MAX and NAME_MAX. */
export const MAX_ENTRY_PATH_BYTES = 4095;
export const MAX_ENTRY_COMPONENT_BYTES = 255;

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
  const path = parts.join("/");
  const tooLong = (why: string) =>
    new ArchiveError(
      `entry ${JSON.stringify(name.slice(0, 80))}${name.length > 80 ? "…" : ""}: ${why}`,
      "NameTooLong",
      undefined,
      name,
    );
  const bytes = (t: string) => new TextEncoder().encode(t).length;
  if (bytes(path) > MAX_ENTRY_PATH_BYTES)
    throw tooLong(`path of ${bytes(path)} bytes is longer than ${MAX_ENTRY_PATH_BYTES} (PATH_MAX)`);
  const long = parts.find((p) => bytes(p) > MAX_ENTRY_COMPONENT_BYTES);
  if (long !== undefined)
    throw tooLong(`a path component of ${bytes(long)} bytes is longer than ${MAX_ENTRY_COMPONENT_BYTES} (NAME_MAX)`);
  return path;
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
  /** Host system of "version made by" (APPNOTE 4.4.2.2): 0 MS-DOS, 3 Unix, 10 NTFS, 19 OS X, … */
  madeBy: number;
  externalAttributes: number;
  /** A link target in the PKWARE Unix extra field 0x000d (APPNOTE 4.5.7), when present. */
  unixLinkTarget: boolean;
}

const U32_MAX = 0xffffffff;

/** The central directory (APPNOTE 4.3.12–4.3.16, with Zip64 4.3.14–4.3.15 and 4.5.3). */
function readCentralDirectory(data: Uint8Array): { entries: ZipEntry[]; cdOffset: number } {
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
  // Each central entry takes at least 46 bytes: a count the directory cannot hold is a lie.
  if (count > cdSize / 46) throw bad(`${count} entries cannot fit in a central directory of ${cdSize} bytes`, eocd);
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
      madeBy: data[p + 5],
      externalAttributes: view.getUint32(p + 38, true),
      unixLinkTarget: false,
    };
    for (let e = p + 46 + nameLength; e + 4 <= p + 46 + nameLength + extraLength; ) {
      const id = view.getUint16(e, true);
      const len = view.getUint16(e + 2, true);
      if (id === 0x0001) {
        // Zip64 extended information: present, in this order, only for fields that overflowed.
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
      } else if (id === 0x000d && len > 12) {
        // PKWARE Unix: atime, mtime, uid, gid, then the "linked to" name of a hard or symbolic link.
        entry.unixLinkTarget = true;
      }
      e += 4 + len;
    }
    entries.push(entry);
    p = end;
  }
  return { entries, cdOffset };
}

/** What an entry is, from its Unix mode (hosts Unix and OS X), DOS attributes and link fields. */
function entryKind(e: ZipEntry): "file" | "directory" | "symlink" | "hardlink" | "FIFO" | "device" | "socket" {
  const unixHost = e.madeBy === 3 || e.madeBy === 19;
  const type = unixHost ? (e.externalAttributes >>> 16) & 0o170000 : 0;
  if (type === 0o120000) return "symlink";
  if (e.unixLinkTarget) return "hardlink";
  if (type === 0o010000) return "FIFO";
  if (type === 0o020000 || type === 0o060000) return "device";
  if (type === 0o140000) return "socket";
  // MS-DOS / NTFS / VFAT attributes: FILE_ATTRIBUTE_REPARSE_POINT marks a Windows link or junction.
  if ((e.madeBy === 0 || e.madeBy === 10 || e.madeBy === 14) && e.externalAttributes & 0x400) return "symlink";
  if (type === 0o040000 || e.name.endsWith("/") || e.name.endsWith("\\")) return "directory";
  return "file";
}

/**
 * Unzip in memory. Throws ArchiveError on unsafe, over-long (`NameTooLong`) or duplicate names;
 * entries that are not regular files or directories (`NotRegularFile`: symlink, hard link, FIFO,
 * device, socket); entries whose bytes overlap another entry's or the central directory
 * (`Overlap`: the shared-data zip bomb); encrypted or unsupported entries; a declared total beyond
 * `maxBytes` (checked before anything is inflated) and a running total beyond it as entries
 * inflate; an entry whose data inflates past its declared size (inflation stops there); a CRC-32
 * mismatch; bytes after the end of the archive.
 */
export function unzipSafe(data: Uint8Array, maxBytes = 2 ** 32): Map<string, Uint8Array> {
  checkByteBudget(maxBytes);
  const { entries, cdOffset } = readCentralDirectory(data);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let declared = 0;
  const files: { entry: ZipEntry; path: string; dataStart: number }[] = [];
  const spans: { from: number; to: number; entry: ZipEntry }[] = [];
  const seen = new Set<string>();
  for (const e of entries) {
    const refuse = (why: string, rule: ArchiveError["rule"], at = e.centralOffset) =>
      new ArchiveError(`entry ${JSON.stringify(e.name)}: ${why}`, rule, at, e.name);
    const path = safeEntryPath(e.name);
    const kind = entryKind(e);
    if (kind !== "file" && kind !== "directory")
      throw refuse(`is a ${kind}; only regular files and directories are extracted`, "NotRegularFile");
    if (e.localOffset + 30 > data.length || view.getUint32(e.localOffset, true) !== 0x04034b50)
      throw refuse(`no local header at byte ${e.localOffset}`, "Corrupt", e.localOffset);
    const dataStart =
      e.localOffset + 30 + view.getUint16(e.localOffset + 26, true) + view.getUint16(e.localOffset + 28, true);
    const dataEnd = dataStart + e.compressedSize;
    if (dataEnd > cdOffset)
      throw refuse(
        `data [${dataStart}, +${e.compressedSize}) runs into the central directory at byte ${cdOffset}`,
        "Overlap",
        e.localOffset,
      );
    spans.push({ from: e.localOffset, to: dataEnd, entry: e });
    if (kind === "directory") {
      if (e.size !== 0) throw refuse(`a directory entry that carries ${e.size} bytes of data`, "TypeClash");
      continue;
    }
    if (seen.has(path)) throw refuse(`duplicate path ${path}`, "Duplicate");
    seen.add(path);
    if (e.flags & 1) throw refuse("encrypted", "Unsupported");
    if (e.method !== 0 && e.method !== 8)
      throw refuse(`compression method ${e.method} is not supported (stored, deflate)`, "Unsupported");
    declared += e.size;
    if (declared > maxBytes) throw refuse(`zip declares more than ${maxBytes} bytes of content`, "TooLarge");
    files.push({ entry: e, path, dataStart });
  }
  // Each entry owns [local header, end of its data); two entries sharing bytes is how a 30 KB
  // zip expands to gigabytes (one compressed stream referenced by every entry).
  spans.sort((x, y) => x.from - y.from);
  for (let i = 1; i < spans.length; i++) {
    const [a, b] = [spans[i - 1], spans[i]];
    if (b.from < a.to)
      throw new ArchiveError(
        `entry ${JSON.stringify(b.entry.name)} (local header at byte ${b.from}) overlaps the bytes of entry ${JSON.stringify(a.entry.name)} [${a.from}, ${a.to}); entries must not share data`,
        "Overlap",
        b.from,
        b.entry.name,
      );
  }
  const out = new Map<string, Uint8Array>();
  let produced = 0;
  for (const { entry: e, path, dataStart: start } of files) {
    const fail = (why: string, rule: "Corrupt" | "Checksum" | "TooLarge" = "Corrupt", at = e.localOffset) =>
      new ArchiveError(`entry ${JSON.stringify(e.name)}: ${why}`, rule, at, e.name);
    const raw = data.subarray(start, start + e.compressedSize);
    const budget = Math.min(e.size, maxBytes - produced);
    let bytes: Uint8Array;
    if (e.method === 0) {
      if (e.compressedSize !== e.size)
        throw fail(`stored entry: compressed size ${e.compressedSize} ≠ size ${e.size}`, "Checksum");
      if (e.size > budget) throw fail(`the archive inflates beyond ${maxBytes} bytes`, "TooLarge");
      bytes = raw.slice();
    } else {
      try {
        const inflated = inflateRawBounded(raw, budget, () =>
          budget < e.size
            ? fail(`the archive inflates beyond ${maxBytes} bytes`, "TooLarge", start)
            : fail(`inflates beyond its declared size of ${e.size} bytes`, "Checksum", start),
        );
        if (inflated.end < 0) throw fail("deflate data ends before the stream does (truncated)", "Corrupt", start);
        bytes = concatBytes(inflated.chunks, inflated.length);
      } catch (err) {
        if (err instanceof ArchiveError) throw err;
        throw fail(`deflate data does not inflate: ${(err as Error).message}`, "Corrupt", start);
      }
      if (bytes.length !== e.size)
        throw fail(`inflates to ${bytes.length} bytes, declared ${e.size}`, "Checksum", start);
    }
    if (crc32(bytes) !== e.crc) throw fail("CRC-32 mismatch", "Checksum", start);
    produced += bytes.length;
    out.set(path, bytes);
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
  checkByteBudget(maxBytes);
  const size = (await stat(path)).size;
  // deflate cannot make data larger by more than 5 bytes per 16 KiB stored block, plus headers.
  if (size > maxBytes + Math.ceil(maxBytes / 16384) * 5 + 1024 * 1024)
    throw new ArchiveError(`${path}: ${size} bytes cannot inflate to at most ${maxBytes} bytes`, "TooLarge");
  return decodeJsonlGz(await readFileBytes(path), maxBytes);
}

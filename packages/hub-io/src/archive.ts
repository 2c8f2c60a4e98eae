// gzip and zip with fflate, plus gzipped JSONL trajectory files. Extraction refuses entry names that
// would escape the destination (absolute paths, drive letters, `..` segments: "zip-slip").

import { Gunzip, gzipSync, strFromU8, strToU8, unzipSync, zipSync } from "fflate";
import { readFileBytes, writeFileAtomic } from "./atomic-file.js";
import { ArchiveError } from "./errors.js";

/** gzip bytes (level 6, as gzip's default). */
export function gzip(data: Uint8Array, level: 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8 | 9 = 6): Uint8Array {
  return gzipSync(data, { level, mtime: 0 });
}

/** gunzip, refusing to inflate more than `maxBytes` (default 4 GiB) so a gzip bomb cannot exhaust memory. */
export function gunzip(data: Uint8Array, maxBytes = 2 ** 32): Uint8Array {
  const parts: Uint8Array[] = [];
  let total = 0;
  const g = new Gunzip((chunk) => {
    total += chunk.byteLength;
    if (total > maxBytes) throw new ArchiveError(`gzip stream inflates beyond ${maxBytes} bytes`);
    parts.push(chunk);
  });
  try {
    g.push(data, true);
  } catch (e) {
    if (e instanceof ArchiveError) throw e;
    throw new ArchiveError(`not a valid gzip stream: ${(e as Error).message}`);
  }
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.byteLength;
  }
  return out;
}

/**
 * Normalize an archive entry name to a safe relative "/" path, or throw: absolute paths, drive
 * letters, `..` segments, NUL bytes and empty names are refused (backslashes count as separators).
 */
export function safeEntryPath(name: string): string {
  const n = name.replaceAll("\\", "/");
  if (n.includes("\0")) throw new ArchiveError(`entry ${JSON.stringify(name)}: NUL byte in name`);
  if (n.startsWith("/") || /^[A-Za-z]:/.test(n))
    throw new ArchiveError(`entry ${JSON.stringify(name)}: absolute path refused`);
  const parts = n.split("/").filter((p) => p !== "" && p !== ".");
  if (parts.includes(".."))
    throw new ArchiveError(`entry ${JSON.stringify(name)}: ".." refused (path would leave the destination)`);
  if (parts.length === 0) throw new ArchiveError(`entry ${JSON.stringify(name)}: empty path`);
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

/** Unzip in memory; throws ArchiveError on unsafe names or more than `maxBytes` inflated in total. */
export function unzipSafe(data: Uint8Array, maxBytes = 2 ** 32): Map<string, Uint8Array> {
  let declared = 0;
  let entries: Record<string, Uint8Array>;
  try {
    entries = unzipSync(data, {
      filter: (f) => {
        if (f.name.endsWith("/")) return false; // directory entry
        safeEntryPath(f.name);
        declared += f.originalSize;
        if (declared > maxBytes) throw new ArchiveError(`zip inflates beyond ${maxBytes} bytes`);
        return true;
      },
    });
  } catch (e) {
    if (e instanceof ArchiveError) throw e;
    throw new ArchiveError(`not a valid zip archive: ${(e as Error).message}`);
  }
  const out = new Map<string, Uint8Array>();
  for (const [name, bytes] of Object.entries(entries)) {
    const p = safeEntryPath(name);
    if (out.has(p)) throw new ArchiveError(`entry ${JSON.stringify(name)}: duplicate path ${p}`);
    out.set(p, bytes);
  }
  return out;
}

/** Extract a zip under `destDir` (Node), after checking every name; returns the written relative paths. */
export async function extractZip(data: Uint8Array, destDir: string, maxBytes?: number): Promise<string[]> {
  const { resolve, sep } = await import("node:path");
  const files = unzipSafe(data, maxBytes);
  const root = resolve(destDir);
  for (const p of files.keys()) {
    const target = resolve(root, p);
    if (!target.startsWith(root + sep))
      throw new ArchiveError(`entry ${JSON.stringify(p)}: resolves outside ${destDir}`);
  }
  for (const [p, bytes] of files) await writeFileAtomic(resolve(root, p), bytes);
  return [...files.keys()];
}

/** Records → gzipped JSON Lines (one JSON value per line, "\n"-terminated). */
export function encodeJsonlGz(records: Iterable<unknown>): Uint8Array {
  let text = "";
  for (const r of records) text += `${JSON.stringify(r)}\n`;
  return gzip(strToU8(text));
}

/** Gzipped JSON Lines → records; a bad line is reported with its number. */
export function decodeJsonlGz(data: Uint8Array, maxBytes?: number): unknown[] {
  const text = strFromU8(gunzip(data, maxBytes));
  const out: unknown[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    try {
      out.push(JSON.parse(line));
    } catch (e) {
      throw new ArchiveError(`line ${i + 1} is not JSON: ${(e as Error).message}`);
    }
  });
  return out;
}

/** Write `rollouts/*.jsonl.gz`-style files atomically (Node). */
export async function writeJsonlGz(path: string, records: Iterable<unknown>): Promise<void> {
  await writeFileAtomic(path, encodeJsonlGz(records));
}

export async function readJsonlGz(path: string, maxBytes?: number): Promise<unknown[]> {
  return decodeJsonlGz(await readFileBytes(path), maxBytes);
}

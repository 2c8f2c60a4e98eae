// Whole-file JSONL reads and atomic writes (temp file + rename), gzip when the name ends in
// ".gz". For datasets and collections written at once (TRL rows, seeded starts); trajectory
// logs that grow episode by episode use trajectory-file.ts. Node only (node:fs).

import { readFile, rename, rm, writeFile } from "node:fs/promises";
import { decodeJsonl, encodeJsonl, isGzipPath } from "./jsonl.js";

export async function writeJsonlFile(path: string, records: readonly unknown[]): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  try {
    await writeFile(tmp, encodeJsonl(records, isGzipPath(path)), { flush: true });
    await rename(tmp, path);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

export async function readJsonlFile(path: string): Promise<unknown[]> {
  const decoded = decodeJsonl(await readFile(path), isGzipPath(path), path);
  if (decoded.torn) throw new SyntaxError(`${path}: ends in an incomplete record (byte ${decoded.validBytes})`);
  return decoded.records;
}

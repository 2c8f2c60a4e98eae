// Whole-file JSONL reads and atomic writes (temp file + rename), gzip when the name ends in
// ".gz". For datasets and collections written at once (TRL rows, seeded starts); trajectory
// logs that grow episode by episode use trajectory-file.ts. Node only (node:fs).

import { open, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { TrajectoryFileError } from "./errors.js";
import { decodeJsonl, encodeJsonl, isGzipPath } from "./jsonl.js";

export async function writeJsonlFile(path: string, records: readonly unknown[]): Promise<void> {
  const tmp = `${path}.tmp-${process.pid}-${Date.now()}`;
  try {
    await writeFile(tmp, encodeJsonl(records, isGzipPath(path)), { flush: true });
    await rename(tmp, path);
    await syncDirectory(dirname(path));
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
}

export async function readJsonlFile(path: string): Promise<unknown[]> {
  const decoded = decodeJsonl(await readFile(path), isGzipPath(path), path);
  if (decoded.torn)
    throw new TrajectoryFileError(
      `${path}: ends in an incomplete record (byte ${decoded.validBytes})`,
      "corrupt",
      decoded.validBytes,
    );
  return decoded.records;
}

/** fsync a directory so a rename in it survives a power loss (a no-op where directories cannot be opened). */
export async function syncDirectory(dir: string): Promise<void> {
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(dir, "r");
    await handle.sync();
  } catch {
    // Windows cannot open directories; there the rename is as durable as the OS makes it.
  } finally {
    await handle?.close();
  }
}

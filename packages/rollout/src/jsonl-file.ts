// Whole-file JSONL reads and atomic writes (temp file + rename), gzip when the name ends in
// ".gz". For datasets and collections written at once (TRL rows, seeded starts); trajectory
// logs that grow episode by episode use trajectory-file.ts. Node only (node:fs).

import { readFile } from "node:fs/promises";
import { writeFileAtomic } from "@kiln/hub-io";
import { TrajectoryFileError } from "./errors.js";
import { decodeJsonl, encodeJsonl, isGzipPath } from "./jsonl.js";

/** Temp file + fsync + rename + directory fsync (hub-io's writeFileAtomic). */
export async function writeJsonlFile(path: string, records: readonly unknown[]): Promise<void> {
  await writeFileAtomic(path, encodeJsonl(records, isGzipPath(path)));
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

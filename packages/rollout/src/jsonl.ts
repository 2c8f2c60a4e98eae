// JSON Lines encoding shared by trajectory files, seeded starts and TRL exports. Pure.

import { strFromU8, strToU8 } from "fflate";
import { TrajectoryFileError } from "./errors.js";
import { type DecodeMembersOptions, decodeGzipMembers, encodeGzipMember } from "./gzip-members.js";

/** Whether a path names a gzip file (".gz" suffix). */
export function isGzipPath(path: string): boolean {
  return path.endsWith(".gz");
}

/** Serialises records as JSONL bytes, gzip-compressed (one member) when `gzip`. */
export function encodeJsonl(records: readonly unknown[], gzip: boolean): Uint8Array {
  const text = records.map((r) => `${JSON.stringify(r)}\n`).join("");
  return gzip ? encodeGzipMember(strToU8(text)) : strToU8(text);
}

export interface DecodedJsonl {
  records: unknown[];
  /** Bytes holding complete records; a torn tail starts here. */
  validBytes: number;
  torn: boolean;
}

/**
 * Parses JSONL bytes (gzip or plain). An incomplete last line or member is reported as torn,
 * not parsed. A complete but unparsable line throws a
 * TrajectoryFileError naming it.
 */
export function decodeJsonl(
  data: Uint8Array,
  gzip: boolean,
  name: string,
  options: DecodeMembersOptions = {},
): DecodedJsonl {
  const records: unknown[] = [];
  if (gzip) {
    const { payloads, validBytes, torn } = decodeGzipMembers(data, name, options);
    let line = 0;
    for (const p of payloads) {
      for (const l of strFromU8(p).split("\n")) {
        line++;
        if (l.trim() !== "") records.push(parseLine(l, name, line));
      }
    }
    return { records, validBytes, torn };
  }
  const text = strFromU8(data);
  const end = text.lastIndexOf("\n") + 1;
  const lines = text.slice(0, end).split("\n");
  lines.forEach((l, i) => {
    if (l.trim() !== "") records.push(parseLine(l, name, i + 1));
  });
  // Byte length of the complete lines (text may hold multi-byte characters).
  const validBytes = strToU8(text.slice(0, end)).length;
  return { records, validBytes, torn: validBytes < data.length };
}

function parseLine(line: string, name: string, n: number): unknown {
  try {
    return JSON.parse(line);
  } catch (err) {
    throw new TrajectoryFileError(
      `${name}: line ${n} is not valid JSON: ${(err as Error).message}`,
      "garbage",
      undefined,
      n,
    );
  }
}

// Parsing and validating a safetensors header, rule for rule as the Rust reference
// (huggingface/safetensors `safetensors/src/tensor.rs`: `read_metadata`, `Metadata::validate`;
// docs/NUMERICS.md §1.3).

import { type Dtype, dtypeBits, isDtype } from "./dtypes.js";
import { SafetensorsError } from "./errors.js";
import { topLevelJsonKeys } from "./python-json.js";

/** Reference limit on the JSON header (`MAX_HEADER_SIZE`). */
export const MAX_HEADER_SIZE = 100_000_000;
/** Length of the little-endian u64 header-size prefix. */
export const N_LEN = 8;

export interface TensorEntry {
  name: string;
  dtype: Dtype;
  shape: number[];
  /** `[begin, end)` relative to the start of the data buffer. */
  dataOffsets: [number, number];
}

export interface SafetensorsHeader {
  /** Header length as stored (the JSON bytes, including any padding). */
  headerSize: number;
  /** Absolute file offset of the data buffer: `8 + headerSize`. */
  dataStart: number;
  /** `__metadata__`, or undefined when absent or null. */
  metadata: Record<string, string> | undefined;
  /** Tensors in file (data-offset) order. */
  tensors: TensorEntry[];
  /** Lookup by name. */
  byName: Map<string, TensorEntry>;
}

/**
 * Rules 1–3: read N from the first 8 bytes and check it against the bounds and the file size.
 * `prefix` may be longer than 8 bytes.
 */
export function readHeaderSize(prefix: Uint8Array, fileSize: number): number {
  if (prefix.byteLength < N_LEN || fileSize < N_LEN) {
    throw new SafetensorsError("HeaderTooSmall", `file has ${fileSize} bytes, fewer than the 8-byte header size`);
  }
  const dv = new DataView(prefix.buffer, prefix.byteOffset, N_LEN);
  const lo = dv.getUint32(0, true);
  const hi = dv.getUint32(4, true);
  if (hi !== 0 || lo > MAX_HEADER_SIZE) {
    const n = BigInt(hi) * 2n ** 32n + BigInt(lo);
    throw new SafetensorsError("HeaderTooLarge", `header size ${n} exceeds the limit of ${MAX_HEADER_SIZE} bytes`);
  }
  if (N_LEN + lo > fileSize) {
    throw new SafetensorsError(
      "InvalidHeaderLength",
      `header size ${lo} runs past the end of the file (8 + ${lo} > ${fileSize} bytes)`,
    );
  }
  return lo;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function asSafeUint(value: unknown, what: string, name: string): number {
  if (typeof value !== "number" || !Number.isFinite(value) || !Number.isInteger(value)) {
    if (typeof value === "number" && !Number.isFinite(value)) {
      throw new SafetensorsError("ValidationOverflow", `${what} ${value} is beyond 2^53`, name);
    }
    throw new SafetensorsError(
      "InvalidTensorInfo",
      `${what} must be a non-negative integer, got ${JSON.stringify(value)}`,
      name,
    );
  }
  if (value < 0) throw new SafetensorsError("InvalidTensorInfo", `${what} must be non-negative, got ${value}`, name);
  // JSON.parse rounds integers above 2^53 - 1; the reference computes in u64 and would either
  // overflow or address > 8 PiB. Either way the value cannot be represented exactly here.
  if (!Number.isSafeInteger(value)) {
    throw new SafetensorsError("ValidationOverflow", `${what} ${value} is beyond 2^53 - 1`, name);
  }
  return value;
}

function parseEntry(name: string, raw: unknown): TensorEntry {
  if (raw === null || typeof raw !== "object" || Array.isArray(raw)) {
    throw new SafetensorsError("InvalidTensorInfo", "entry must be an object {dtype, shape, data_offsets}", name);
  }
  const obj = raw as Record<string, unknown>;
  if (typeof obj.dtype !== "string") {
    throw new SafetensorsError("InvalidTensorInfo", `dtype must be a string, got ${JSON.stringify(obj.dtype)}`, name);
  }
  if (!isDtype(obj.dtype))
    throw new SafetensorsError("UnknownDtype", `unknown dtype ${JSON.stringify(obj.dtype)}`, name);
  if (!Array.isArray(obj.shape)) {
    throw new SafetensorsError("InvalidTensorInfo", `shape must be an array, got ${JSON.stringify(obj.shape)}`, name);
  }
  const shape = obj.shape.map((d, i) => asSafeUint(d, `shape[${i}]`, name));
  const off = obj.data_offsets;
  if (!Array.isArray(off) || off.length !== 2) {
    throw new SafetensorsError(
      "InvalidTensorInfo",
      `data_offsets must be [begin, end], got ${JSON.stringify(off)}`,
      name,
    );
  }
  const begin = asSafeUint(off[0], "data_offsets[0]", name);
  const end = asSafeUint(off[1], "data_offsets[1]", name);
  return { name, dtype: obj.dtype, shape, dataOffsets: [begin, end] };
}

/**
 * Rules 4–7: decode the header bytes (UTF-8, JSON), then walk the tensors in offset order checking
 * contiguity, overflow, bit alignment and sizes, and finally that the data ends exactly at EOF.
 */
export function parseHeader(headerBytes: Uint8Array, fileSize: number): SafetensorsHeader {
  const headerSize = headerBytes.byteLength;
  let text: string;
  try {
    text = utf8.decode(headerBytes);
  } catch {
    throw new SafetensorsError("InvalidHeader", "header is not valid UTF-8");
  }
  let json: unknown;
  try {
    // JSON.parse accepts the JSON whitespace around the object that the reference accepts
    // (test_whitespace_leading_padded_header) and rejects a BOM, as serde_json does.
    json = JSON.parse(text);
  } catch (e) {
    throw new SafetensorsError("InvalidHeaderDeserialization", `header is not JSON: ${(e as Error).message}`);
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) {
    throw new SafetensorsError("InvalidHeaderDeserialization", "header must be a JSON object");
  }
  const duplicate = firstDuplicateTopLevelKey(text);
  if (duplicate !== null)
    throw new SafetensorsError(
      "DuplicateTensor",
      "appears more than once in the header (JSON.parse would keep the last)",
      duplicate,
    );
  let metadata: Record<string, string> | undefined;
  const tensors: TensorEntry[] = [];
  for (const [key, value] of Object.entries(json as Record<string, unknown>)) {
    if (key === "__metadata__") {
      if (value === null) continue;
      if (typeof value !== "object" || Array.isArray(value)) {
        throw new SafetensorsError("InvalidMetadata", "__metadata__ must be an object of string values");
      }
      for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
        if (typeof v !== "string") {
          throw new SafetensorsError(
            "InvalidMetadata",
            `__metadata__[${JSON.stringify(k)}] must be a string, got ${JSON.stringify(v)}`,
          );
        }
      }
      metadata = value as Record<string, string>;
      continue;
    }
    tensors.push(parseEntry(key, value));
  }
  // The reference sorts by (begin, end); file key order does not matter.
  tensors.sort((a, b) => a.dataOffsets[0] - b.dataOffsets[0] || a.dataOffsets[1] - b.dataOffsets[1]);
  let start = 0;
  for (const t of tensors) {
    const [s, e] = t.dataOffsets;
    if (s !== start || e < s) {
      const why =
        s < start
          ? `overlaps the previous tensor, which ends at ${start}`
          : s > start
            ? `leaves a gap: data must be contiguous and start at ${start}`
            : "ends before it begins";
      throw new SafetensorsError("InvalidOffset", `data_offsets [${s}, ${e}] ${why}`, t.name);
    }
    start = e;
    let n = 1;
    for (const d of t.shape) {
      n *= d;
      if (!Number.isSafeInteger(n)) {
        throw new SafetensorsError(
          "ValidationOverflow",
          `element count of shape [${t.shape.join(", ")}] overflows`,
          t.name,
        );
      }
    }
    const bits = n * dtypeBits(t.dtype);
    if (!Number.isSafeInteger(bits)) {
      throw new SafetensorsError(
        "ValidationOverflow",
        `shape [${t.shape.join(", ")}] of ${t.dtype} overflows in bits`,
        t.name,
      );
    }
    if (bits % 8 !== 0) {
      throw new SafetensorsError(
        "MisalignedSlice",
        `${n} elements of ${t.dtype} are ${bits} bits, not whole bytes`,
        t.name,
      );
    }
    if (e - s !== bits / 8) {
      throw new SafetensorsError(
        "TensorInvalidInfo",
        `data_offsets [${s}, ${e}] span ${e - s} bytes but ${t.dtype}[${t.shape.join(", ")}] needs ${bits / 8}`,
        t.name,
      );
    }
  }
  if (start + N_LEN + headerSize !== fileSize) {
    throw new SafetensorsError(
      "MetadataIncompleteBuffer",
      `data ends at byte ${start + N_LEN + headerSize} but the file has ${fileSize} bytes (${
        fileSize > start + N_LEN + headerSize ? "trailing bytes" : "truncated"
      })`,
    );
  }
  const byName = new Map<string, TensorEntry>();
  for (const t of tensors) byName.set(t.name, t);
  return { headerSize, dataStart: N_LEN + headerSize, metadata, tensors, byName };
}

/**
 * The first key that occurs twice at the top level of a JSON object text already known to be
 * valid JSON, or null. JSON.parse silently keeps the last of duplicate keys, which would let a
 * header describe one tensor twice and have the second description win.
 */
function firstDuplicateTopLevelKey(text: string): string | null {
  const seen = new Set<string>();
  for (const key of topLevelJsonKeys(text)) {
    if (seen.has(key)) return key;
    seen.add(key);
  }
  return null;
}

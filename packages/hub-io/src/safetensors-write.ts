// safetensors writer with the reference layout (huggingface/safetensors `tensor.rs` `prepare`,
// docs/NUMERICS.md §1.2): tensors sorted by dtype descending in enum order then by name
// (byte-wise, as Rust's String Ord), contiguous offsets from 0, compact JSON with `__metadata__`
// first and keys `dtype, shape, data_offsets`, header right-padded with spaces to a multiple of 8.

import { openAtomic } from "./atomic-file.js";
import { byteSize, type Dtype, dtypeRank, isDtype, type TensorData } from "./dtypes.js";
import { SafetensorsError } from "./errors.js";
import { compareCodePoints } from "./python-json.js";
import { MAX_HEADER_SIZE, N_LEN } from "./safetensors-header.js";

/** Tensor bytes given up front, produced on demand, or streamed in chunks. */
export type TensorBytes = Uint8Array | (() => Uint8Array | Promise<Uint8Array>) | AsyncIterable<Uint8Array>;

export interface TensorInput {
  dtype: Dtype;
  shape: readonly number[];
  data: TensorBytes;
}

export type TensorMap = Map<string, TensorInput> | Record<string, TensorInput>;

export interface PlannedTensor {
  name: string;
  dtype: Dtype;
  shape: number[];
  dataOffsets: [number, number];
  input: TensorInput;
}

export interface SafetensorsPlan {
  /** The 8-byte size prefix followed by the padded JSON header. */
  prefix: Uint8Array;
  tensors: PlannedTensor[];
  /** Bytes of tensor data. */
  dataSize: number;
  /** prefix + data. */
  fileSize: number;
}

function entries(tensors: TensorMap): [string, TensorInput][] {
  return tensors instanceof Map ? [...tensors.entries()] : Object.entries(tensors);
}

/** Order, offsets and header bytes for a set of tensors, validating each one. */
export function planSafetensors(tensors: TensorMap, metadata?: Record<string, string> | null): SafetensorsPlan {
  const list = entries(tensors);
  for (const [name, t] of list) {
    if (name === "__metadata__") throw new SafetensorsError("InvalidTensorInfo", "this name is reserved", name);
    if (!isDtype(t.dtype)) throw new SafetensorsError("UnknownDtype", `unknown dtype ${JSON.stringify(t.dtype)}`, name);
    for (const d of t.shape) {
      if (!Number.isSafeInteger(d) || d < 0) {
        throw new SafetensorsError(
          "InvalidTensorInfo",
          `shape [${t.shape.join(", ")}] must hold non-negative integers`,
          name,
        );
      }
    }
    if (t.data instanceof Uint8Array) {
      const need = byteSize(t.dtype, t.shape, name);
      if (t.data.byteLength !== need) {
        throw new SafetensorsError(
          "TensorInvalidInfo",
          `has ${t.data.byteLength} bytes but ${t.dtype}[${t.shape.join(", ")}] needs ${need}`,
          name,
        );
      }
    }
  }
  list.sort(([an, a], [bn, b]) => dtypeRank(b.dtype) - dtypeRank(a.dtype) || compareCodePoints(an, bn));
  let offset = 0;
  const planned: PlannedTensor[] = list.map(([name, t]) => {
    const size = byteSize(t.dtype, t.shape, name);
    const p: PlannedTensor = {
      name,
      dtype: t.dtype,
      shape: [...t.shape],
      dataOffsets: [offset, offset + size],
      input: t,
    };
    offset += size;
    return p;
  });
  // Build the JSON by hand to fix the key order; JSON.stringify escapes strings exactly as
  // serde_json does (", \, control characters as \b \f \n \r \t or lowercase \u00XX; nothing else).
  const parts: string[] = [];
  if (metadata) {
    const kv = Object.entries(metadata).map(([k, v]) => {
      if (typeof v !== "string") {
        throw new SafetensorsError("InvalidMetadata", `__metadata__[${JSON.stringify(k)}] must be a string`);
      }
      return `${JSON.stringify(k)}:${JSON.stringify(v)}`;
    });
    parts.push(`"__metadata__":{${kv.join(",")}}`);
  }
  for (const t of planned) {
    parts.push(
      `${JSON.stringify(t.name)}:{"dtype":"${t.dtype}","shape":[${t.shape.join(",")}],"data_offsets":[${t.dataOffsets[0]},${t.dataOffsets[1]}]}`,
    );
  }
  const json = new TextEncoder().encode(`{${parts.join(",")}}`);
  const padded = Math.ceil(json.byteLength / N_LEN) * N_LEN;
  if (padded > MAX_HEADER_SIZE) {
    throw new SafetensorsError("HeaderTooLarge", `header of ${padded} bytes exceeds the limit of ${MAX_HEADER_SIZE}`);
  }
  const prefix = new Uint8Array(N_LEN + padded);
  new DataView(prefix.buffer).setBigUint64(0, BigInt(padded), true);
  prefix.set(json, N_LEN);
  prefix.fill(0x20, N_LEN + json.byteLength);
  return { prefix, tensors: planned, dataSize: offset, fileSize: prefix.byteLength + offset };
}

async function* tensorChunks(t: PlannedTensor): AsyncGenerator<Uint8Array> {
  const d = t.input.data;
  if (d instanceof Uint8Array) yield d;
  else if (typeof d === "function") yield await d();
  else yield* d;
}

/** Stream the file's bytes: header, then each tensor, checking every tensor's length. */
export async function* safetensorsChunks(plan: SafetensorsPlan): AsyncGenerator<Uint8Array> {
  yield plan.prefix;
  for (const t of plan.tensors) {
    const want = t.dataOffsets[1] - t.dataOffsets[0];
    let got = 0;
    for await (const chunk of tensorChunks(t)) {
      got += chunk.byteLength;
      if (got > want) break;
      yield chunk;
    }
    if (got !== want) {
      throw new SafetensorsError(
        "TensorInvalidInfo",
        `produced ${got > want ? "more than" : got} bytes, expected ${want}`,
        t.name,
      );
    }
  }
}

/** Serialize in memory. Only for tensors given as Uint8Array (use writeSafetensorsFile to stream). */
export function serializeSafetensors(
  tensors: Map<string, TensorData> | Record<string, TensorData>,
  metadata?: Record<string, string> | null,
): Uint8Array {
  const plan = planSafetensors(tensors, metadata);
  const out = new Uint8Array(plan.fileSize);
  out.set(plan.prefix, 0);
  for (const t of plan.tensors) out.set(t.input.data as Uint8Array, plan.prefix.byteLength + t.dataOffsets[0]);
  return out;
}

/**
 * Write a safetensors file atomically (temp + rename), streaming tensor by tensor, so peak memory
 * is one tensor (or one chunk, for chunked inputs). Node only.
 */
export async function writeSafetensorsFile(
  path: string,
  tensors: TensorMap,
  metadata?: Record<string, string> | null,
): Promise<SafetensorsPlan> {
  const plan = planSafetensors(tensors, metadata);
  const w = await openAtomic(path);
  try {
    for await (const chunk of safetensorsChunks(plan)) await w.write(chunk);
    await w.commit();
  } catch (e) {
    await w.abort();
    throw e;
  }
  return plan;
}

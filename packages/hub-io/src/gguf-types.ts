// GGUF tensor types (ggml_type) and their block sizes, and the conversions kiln supports:
// f32, f16, bf16 (exact) and q8_0 (quantise + dequantise). Sizes from ggml `ggml/src/ggml.c`
// `type_traits` (ggml-org/llama.cpp, the tree node-llama-cpp 3.21.1 ships); numbers missing from
// the table are ids ggml has removed. Q8_0 follows `quantize_row_q8_0_ref` / `dequantize_row_q8_0`
// (ggml/src/ggml-quants.c) bit for bit.

import { f16BitsToFloat, floatToF16Bits, fromFloat32 } from "./dtypes.js";
import { GgufError } from "./errors.js";

/** ggml type name → [id, elements per block, bytes per block]. */
const GGML_TYPES = {
  F32: [0, 1, 4],
  F16: [1, 1, 2],
  Q4_0: [2, 32, 18],
  Q4_1: [3, 32, 20],
  Q5_0: [6, 32, 22],
  Q5_1: [7, 32, 24],
  Q8_0: [8, 32, 34],
  Q8_1: [9, 32, 36],
  Q2_K: [10, 256, 84],
  Q3_K: [11, 256, 110],
  Q4_K: [12, 256, 144],
  Q5_K: [13, 256, 176],
  Q6_K: [14, 256, 210],
  Q8_K: [15, 256, 292],
  IQ2_XXS: [16, 256, 66],
  IQ2_XS: [17, 256, 74],
  IQ3_XXS: [18, 256, 98],
  IQ1_S: [19, 256, 50],
  IQ4_NL: [20, 32, 18],
  IQ3_S: [21, 256, 110],
  IQ2_S: [22, 256, 82],
  IQ4_XS: [23, 256, 136],
  I8: [24, 1, 1],
  I16: [25, 1, 2],
  I32: [26, 1, 4],
  I64: [27, 1, 8],
  F64: [28, 1, 8],
  IQ1_M: [29, 256, 56],
  BF16: [30, 1, 2],
  TQ1_0: [34, 256, 54],
  TQ2_0: [35, 256, 66],
  MXFP4: [39, 32, 17],
} as const satisfies Record<string, readonly [number, number, number]>;

export type GgmlType = keyof typeof GGML_TYPES;

/** The tensor types kiln writes and reads as numbers. */
export const GGUF_SUPPORTED_TYPES = ["F32", "F16", "BF16", "Q8_0"] as const;
export type GgufSupportedType = (typeof GGUF_SUPPORTED_TYPES)[number];

const BY_ID = new Map<number, GgmlType>(Object.entries(GGML_TYPES).map(([name, [id]]) => [id, name as GgmlType]));

export function ggmlTypeId(type: GgmlType): number {
  return GGML_TYPES[type][0];
}

/** The type for a ggml id, or undefined for ids ggml does not define. */
export function ggmlTypeFromId(id: number): GgmlType | undefined {
  return BY_ID.get(id);
}

export function ggmlBlockSize(type: GgmlType): number {
  return GGML_TYPES[type][1];
}

/**
 * Bytes of a tensor with `shape` (row-major: the last dimension is ggml's ne[0]); blocks run along
 * that last dimension, so its length must be a multiple of the block size. Returns a number or
 * throws GgufError (InvalidTensorInfo) naming the tensor.
 */
export function ggmlByteSize(type: GgmlType, shape: readonly number[], name?: string): number {
  const [, block, bytes] = GGML_TYPES[type];
  const row = shape.length === 0 ? 1 : shape[shape.length - 1];
  if (row % block !== 0) {
    throw new GgufError(
      "InvalidTensorInfo",
      `${type} packs ${block} values per block, but the row length is ${row} (shape [${shape.join(", ")}])`,
      name,
    );
  }
  let rows = 1;
  for (let i = 0; i < shape.length - 1; i++) rows *= shape[i];
  const size = rows * (row / block) * bytes;
  if (!Number.isSafeInteger(size)) {
    throw new GgufError("AbsurdSize", `shape [${shape.join(", ")}] of ${type} overflows`, name);
  }
  return size;
}

/** Whether a row of `rowLength` values can be stored as `type` (block types need whole blocks). */
export function ggmlRowFits(type: GgmlType, rowLength: number): boolean {
  return rowLength % GGML_TYPES[type][1] === 0;
}

const Q8_0_BLOCK = 32;
const Q8_0_BYTES = 34;

/**
 * Float32 values → Q8_0 blocks: per 32 values, d = max|x| / 127 stored as f16, q = round(x / d)
 * as int8, rounding half away from zero (C `roundf`), all arithmetic in float32 like the reference.
 */
export function quantizeQ8_0(values: Float32Array): Uint8Array {
  if (values.length % Q8_0_BLOCK !== 0) {
    throw new GgufError("UnsupportedConversion", `Q8_0 needs a multiple of 32 values, got ${values.length}`);
  }
  const blocks = values.length / Q8_0_BLOCK;
  const out = new Uint8Array(blocks * Q8_0_BYTES);
  const dv = new DataView(out.buffer);
  const fr = Math.fround;
  for (let b = 0; b < blocks; b++) {
    const base = b * Q8_0_BLOCK;
    let amax = 0;
    for (let j = 0; j < Q8_0_BLOCK; j++) {
      const a = Math.abs(values[base + j]);
      if (a > amax) amax = a;
    }
    const d = fr(amax / 127);
    const id = d !== 0 ? fr(1 / d) : 0;
    const o = b * Q8_0_BYTES;
    dv.setUint16(o, floatToF16Bits(d), true);
    for (let j = 0; j < Q8_0_BLOCK; j++) {
      const x = fr(values[base + j] * id);
      const q = x < 0 ? -Math.round(-x) : Math.round(x);
      dv.setInt8(o + 2 + j, q);
    }
  }
  return out;
}

/** Q8_0 blocks → float32 (x = f16(d) · q, in float32). */
export function dequantizeQ8_0(bytes: Uint8Array, count: number): Float32Array {
  if (bytes.byteLength !== (count / Q8_0_BLOCK) * Q8_0_BYTES || count % Q8_0_BLOCK !== 0) {
    throw new GgufError("InvalidTensorInfo", `${bytes.byteLength} bytes are not ${count} Q8_0 values`);
  }
  const out = new Float32Array(count);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let b = 0; b < count / Q8_0_BLOCK; b++) {
    const o = b * Q8_0_BYTES;
    const d = f16BitsToFloat(dv.getUint16(o, true));
    for (let j = 0; j < Q8_0_BLOCK; j++) out[b * Q8_0_BLOCK + j] = Math.fround(d * dv.getInt8(o + 2 + j));
  }
  return out;
}

/** Encode float32 values as a supported GGUF tensor type (f16/bf16 round to nearest even). */
export function ggufEncode(values: Float32Array, type: GgufSupportedType): Uint8Array {
  switch (type) {
    case "F32":
      return fromFloat32(values, "F32");
    case "F16":
      return fromFloat32(values, "F16");
    case "BF16":
      return fromFloat32(values, "BF16");
    case "Q8_0":
      return quantizeQ8_0(values);
  }
}

/**
 * Decode a tensor's bytes to float32: F32, F16, BF16, Q8_0 (and F64/I8/I16/I32 for completeness).
 * Any other type is a GgufError (UnsupportedTensorType) naming the type and the tensor.
 */
export function ggufDecode(type: GgmlType, bytes: Uint8Array, count: number, name?: string): Float32Array {
  const aligned = (n: number) => (bytes.byteOffset % n === 0 ? bytes : bytes.slice());
  switch (type) {
    case "F32": {
      const b = aligned(4);
      return new Float32Array(b.buffer, b.byteOffset, count).slice();
    }
    case "F16": {
      const b = aligned(2);
      const src = new Uint16Array(b.buffer, b.byteOffset, count);
      const out = new Float32Array(count);
      for (let i = 0; i < count; i++) out[i] = f16BitsToFloat(src[i]);
      return out;
    }
    case "BF16": {
      const b = aligned(2);
      const src = new Uint16Array(b.buffer, b.byteOffset, count);
      const out = new Uint32Array(count);
      for (let i = 0; i < count; i++) out[i] = src[i] << 16;
      return new Float32Array(out.buffer);
    }
    case "Q8_0":
      return dequantizeQ8_0(bytes, count);
    case "F64": {
      const b = aligned(8);
      return Float32Array.from(new Float64Array(b.buffer, b.byteOffset, count));
    }
    case "I8":
      return Float32Array.from(new Int8Array(bytes.buffer, bytes.byteOffset, count));
    case "I16": {
      const b = aligned(2);
      return Float32Array.from(new Int16Array(b.buffer, b.byteOffset, count));
    }
    case "I32": {
      const b = aligned(4);
      return Float32Array.from(new Int32Array(b.buffer, b.byteOffset, count));
    }
    default:
      throw new GgufError(
        "UnsupportedTensorType",
        `tensor type ${type} is not supported (kiln reads ${GGUF_SUPPORTED_TYPES.join(", ")}); requantise the file to one of them with llama.cpp's llama-quantize`,
        name,
      );
  }
}

/** bf16 bits of a BF16 tensor without rounding (for loading bf16 weights as they are). */
export function bf16Bits(bytes: Uint8Array): Uint16Array {
  const out = new Uint16Array(bytes.byteLength / 2);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

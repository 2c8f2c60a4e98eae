// safetensors dtypes and float conversions.
// Source: huggingface/safetensors `safetensors/src/tensor.rs` enum `Dtype` (docs/NUMERICS.md §1.1). The
// declaration order below IS the reference's `Ord` on Dtype, which the writer sorts by.

import { SafetensorsError } from "./errors.js";

export const DTYPES = [
  "BOOL",
  "F4",
  "F6_E2M3",
  "F6_E3M2",
  "U8",
  "I8",
  "F8_E5M2",
  "F8_E4M3",
  "F8_E8M0",
  "F8_E4M3FNUZ",
  "F8_E5M2FNUZ",
  "I16",
  "U16",
  "F16",
  "BF16",
  "I32",
  "U32",
  "F32",
  "C64",
  "F64",
  "I64",
  "U64",
] as const;

export type Dtype = (typeof DTYPES)[number];

const BITS: Record<Dtype, number> = {
  BOOL: 8,
  F4: 4,
  F6_E2M3: 6,
  F6_E3M2: 6,
  U8: 8,
  I8: 8,
  F8_E5M2: 8,
  F8_E4M3: 8,
  F8_E8M0: 8,
  F8_E4M3FNUZ: 8,
  F8_E5M2FNUZ: 8,
  I16: 16,
  U16: 16,
  F16: 16,
  BF16: 16,
  I32: 32,
  U32: 32,
  F32: 32,
  C64: 64,
  F64: 64,
  I64: 64,
  U64: 64,
};

const RANK = new Map<string, number>(DTYPES.map((d, i) => [d, i]));

export function isDtype(value: unknown): value is Dtype {
  return typeof value === "string" && RANK.has(value);
}

/** Bits per element (4 and 6 for the packed float formats). */
export function dtypeBits(dtype: Dtype): number {
  return BITS[dtype];
}

/** Position in the reference enum; the writer orders tensors by this, descending. */
export function dtypeRank(dtype: Dtype): number {
  return RANK.get(dtype)!;
}

/** A tensor as raw little-endian bytes, row-major, as stored in a safetensors file. */
export interface TensorData {
  dtype: Dtype;
  shape: number[];
  data: Uint8Array;
}

export function numel(shape: readonly number[]): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Byte size of a dense tensor of `shape`; throws MisalignedSlice if it is not a whole number of bytes. */
export function byteSize(dtype: Dtype, shape: readonly number[], name?: string): number {
  const bits = numel(shape) * BITS[dtype];
  if (!Number.isSafeInteger(bits)) {
    throw new SafetensorsError(
      "ValidationOverflow",
      `shape [${shape.join(", ")}] × ${BITS[dtype]} bits overflows`,
      name,
    );
  }
  if (bits % 8 !== 0) {
    throw new SafetensorsError("MisalignedSlice", `${bits} bits of ${dtype} is not a whole number of bytes`, name);
  }
  return bits / 8;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

function assertLittleEndian(): void {
  // safetensors data is little-endian; typed-array views use host order. Every platform Node and
  // browsers run on today is little-endian, so a big-endian host is refused rather than silently wrong.
  if (!LITTLE_ENDIAN) throw new SafetensorsError("UnsupportedConversion", "big-endian hosts are not supported");
}

/** A typed array over `data`, copying only when the bytes are not aligned for the element size. */
function view<T>(data: Uint8Array, bytesPer: number, make: (buf: ArrayBufferLike, off: number, len: number) => T): T {
  assertLittleEndian();
  const len = data.byteLength / bytesPer;
  if (data.byteOffset % bytesPer === 0) return make(data.buffer, data.byteOffset, len);
  const copy = data.slice();
  return make(copy.buffer, 0, len);
}

// ---- 16-bit floats ---------------------------------------------------------------------------

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** bf16 bits → f32 value (exact: bf16 is the top half of an f32). */
export function bf16BitsToFloat(bits: number): number {
  u32[0] = bits << 16;
  return f32[0];
}

/**
 * NaN as PyTorch's CPU tensor conversion writes it: the vectorized `cvtfp32_bf16`
 * (aten/src/ATen/cpu/vec/vec256/vec256_bfloat16.h) blends in 0xFFFF for every NaN, whatever its sign
 * or payload (checked against torch 1.13 in test/fixtures/conversions.json). Only torch's scalar path
 * (`c10::detail::round_to_nearest_even`, used for 0-d tensors) gives 0x7FC0; files saved from real
 * tensors carry 0xFFFF.
 */
export const BF16_NAN = 0xffff;

/**
 * f32 → bf16 bits, round-to-nearest-even: add 0x7FFF plus the lowest kept bit, then truncate
 * (c10/util/BFloat16.h). Overflow past the largest bf16 rounds to ±Inf, as in torch. NaN → BF16_NAN.
 */
export function floatToBf16Bits(value: number): number {
  f32[0] = value;
  if (Number.isNaN(f32[0])) return BF16_NAN;
  const bits = u32[0];
  return ((bits + (((bits >>> 16) & 1) + 0x7fff)) >>> 16) & 0xffff;
}

/** IEEE binary16 bits → f32 value (exact). */
export function f16BitsToFloat(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const man = h & 0x3ff;
  if (exp === 0) return sign * man * 2 ** -24;
  if (exp === 0x1f) return man ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + man / 1024) * 2 ** (exp - 15);
}

/**
 * f32 → IEEE binary16 bits, round-to-nearest-even (subnormals included, overflow → ±Inf).
 * NaN becomes sign | 0x7E00, as PyTorch's `c10::detail::fp16_ieee_from_fp32_value` (c10/util/Half.h).
 */
export function floatToF16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  const man = x & 0x7fffff;
  if (exp === 0xff) return man ? sign | 0x7e00 : sign | 0x7c00;
  // Unbiased exponent, rebiased for binary16 (bias 15).
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    // Subnormal half (or zero): shift the full 24-bit significand into place, then round.
    if (e < -10) return sign; // below half of the smallest subnormal: rounds to ±0
    const full = man | 0x800000;
    const shift = 14 - e; // 24-bit significand → 10-bit subnormal field
    const kept = full >>> shift;
    const rem = full & ((1 << shift) - 1);
    const half = 1 << (shift - 1);
    const rounded = rem > half || (rem === half && kept & 1) ? kept + 1 : kept;
    return sign | rounded; // a carry into bit 10 correctly yields the smallest normal
  }
  const kept = (e << 10) | (man >>> 13);
  const rem = man & 0x1fff;
  const rounded = rem > 0x1000 || (rem === 0x1000 && kept & 1) ? kept + 1 : kept;
  return sign | rounded; // a carry into the exponent is correct, up to and including Inf
}

// ---- 8-bit floats --------------------------------------------------------------------------

type MiniKind = "ieee" | "fn" | "fnuz";

/** Decode table for an 8-bit float: `fn` has no Inf and NaN = all ones; `fnuz` has NaN = 0x80 only. */
function miniTable(expBits: number, manBits: number, bias: number, kind: MiniKind): Float32Array {
  const table = new Float32Array(256);
  const expMax = (1 << expBits) - 1;
  for (let b = 0; b < 256; b++) {
    const sign = b & 0x80 ? -1 : 1;
    const exp = (b >>> manBits) & expMax;
    const man = b & ((1 << manBits) - 1);
    let v: number;
    if (kind === "fnuz" && b === 0x80) v = Number.NaN;
    else if (kind === "ieee" && exp === expMax) v = man ? Number.NaN : sign * Number.POSITIVE_INFINITY;
    else if (kind === "fn" && exp === expMax && man === (1 << manBits) - 1) v = Number.NaN;
    else if (exp === 0) v = sign * man * 2 ** (1 - bias - manBits);
    else v = sign * (1 + man / (1 << manBits)) * 2 ** (exp - bias);
    table[b] = v;
  }
  return table;
}

const tables = new Map<Dtype, Float32Array>();
function tableFor(dtype: Dtype): Float32Array {
  let t = tables.get(dtype);
  if (!t) {
    if (dtype === "F8_E5M2") t = miniTable(5, 2, 15, "ieee");
    else if (dtype === "F8_E4M3")
      t = miniTable(4, 3, 7, "fn"); // safetensors "F8_E4M3" is torch float8_e4m3fn
    else if (dtype === "F8_E4M3FNUZ") t = miniTable(4, 3, 8, "fnuz");
    else if (dtype === "F8_E5M2FNUZ") t = miniTable(5, 2, 16, "fnuz");
    else if (dtype === "F8_E8M0") {
      // Scale format (OCP MX): value 2^(b-127), 0xFF = NaN, no sign, no zero.
      t = new Float32Array(256);
      for (let b = 0; b < 256; b++) t[b] = b === 255 ? Number.NaN : 2 ** (b - 127);
    } else throw new SafetensorsError("UnsupportedConversion", `no 8-bit table for ${dtype}`);
    tables.set(dtype, t);
  }
  return t;
}

// ---- whole-tensor conversions ---------------------------------------------------------------

/**
 * Decode a tensor's bytes to float32. For F32 the result is a view on `data` when it is 4-byte
 * aligned (no copy): copy it if you mutate it and still need the bytes. 64-bit integers and F64 are
 * rounded to the nearest float32. F4/F6 (sub-byte packed) and C64 have no float32 form.
 */
export function toFloat32(tensor: Pick<TensorData, "dtype" | "data">): Float32Array {
  const { dtype, data } = tensor;
  const n = (data.byteLength * 8) / BITS[dtype];
  switch (dtype) {
    case "F32":
      return view(data, 4, (b, o, l) => new Float32Array(b, o, l));
    case "F64":
      return Float32Array.from(view(data, 8, (b, o, l) => new Float64Array(b, o, l)));
    case "BF16": {
      // Widening bf16 is a 16-bit shift: do it in integer space, no per-element float math.
      const src = view(data, 2, (b, o, l) => new Uint16Array(b, o, l));
      const out = new Uint32Array(n);
      for (let i = 0; i < n; i++) out[i] = src[i] << 16;
      return new Float32Array(out.buffer);
    }
    case "F16": {
      const src = view(data, 2, (b, o, l) => new Uint16Array(b, o, l));
      const lut = f16Table();
      const out = new Float32Array(n);
      for (let i = 0; i < n; i++) out[i] = lut[src[i]];
      return out;
    }
    case "I8":
      return Float32Array.from(new Int8Array(data.buffer, data.byteOffset, data.byteLength));
    case "U8":
      return Float32Array.from(data);
    case "BOOL":
      return Float32Array.from(data, (b) => (b ? 1 : 0));
    case "I16":
      return Float32Array.from(view(data, 2, (b, o, l) => new Int16Array(b, o, l)));
    case "U16":
      return Float32Array.from(view(data, 2, (b, o, l) => new Uint16Array(b, o, l)));
    case "I32":
      return Float32Array.from(view(data, 4, (b, o, l) => new Int32Array(b, o, l)));
    case "U32":
      return Float32Array.from(view(data, 4, (b, o, l) => new Uint32Array(b, o, l)));
    case "I64":
      return Float32Array.from(
        view(data, 8, (b, o, l) => new BigInt64Array(b, o, l)),
        (v) => Number(v),
      );
    case "U64":
      return Float32Array.from(
        view(data, 8, (b, o, l) => new BigUint64Array(b, o, l)),
        (v) => Number(v),
      );
    case "F8_E5M2":
    case "F8_E4M3":
    case "F8_E4M3FNUZ":
    case "F8_E5M2FNUZ":
    case "F8_E8M0": {
      const lut = tableFor(dtype);
      return Float32Array.from(data, (b) => lut[b]);
    }
    default:
      throw new SafetensorsError("UnsupportedConversion", `${dtype} has no float32 conversion`);
  }
}

let f16Lut: Float32Array | undefined;
function f16Table(): Float32Array {
  if (!f16Lut) {
    f16Lut = new Float32Array(65536);
    for (let h = 0; h < 65536; h++) f16Lut[h] = f16BitsToFloat(h);
  }
  return f16Lut;
}

/** Float dtypes `fromFloat32` can encode. */
export type FloatTarget = "F32" | "F16" | "BF16" | "F64";

/**
 * Encode float32 values as `dtype` bytes (little-endian), rounding to nearest even exactly as
 * PyTorch's `tensor.to(dtype)` on CPU (see floatToBf16Bits / floatToF16Bits for the NaN rules).
 */
export function fromFloat32(values: Float32Array | readonly number[], dtype: FloatTarget): Uint8Array {
  assertLittleEndian();
  const n = values.length;
  switch (dtype) {
    case "F32": {
      const out = values instanceof Float32Array ? values.slice() : Float32Array.from(values);
      return new Uint8Array(out.buffer);
    }
    case "F64":
      return new Uint8Array(Float64Array.from(values, (v) => Math.fround(v)).buffer);
    case "BF16": {
      const out = new Uint16Array(n);
      const src = values instanceof Float32Array ? values : Float32Array.from(values);
      const bits = new Uint32Array(src.buffer, src.byteOffset, n);
      for (let i = 0; i < n; i++) {
        const x = bits[i];
        // NaN: exponent all ones and a non-zero mantissa.
        out[i] = (x & 0x7fffffff) > 0x7f800000 ? BF16_NAN : ((x + (((x >>> 16) & 1) + 0x7fff)) >>> 16) & 0xffff;
      }
      return new Uint8Array(out.buffer);
    }
    case "F16": {
      const out = new Uint16Array(n);
      for (let i = 0; i < n; i++) out[i] = floatToF16Bits(values[i]);
      return new Uint8Array(out.buffer);
    }
    default:
      throw new SafetensorsError("UnsupportedConversion", `cannot encode float32 as ${String(dtype)}`);
  }
}

export type NativeArray =
  | Uint8Array
  | Int8Array
  | Uint16Array
  | Int16Array
  | Uint32Array
  | Int32Array
  | Float32Array
  | Float64Array
  | BigInt64Array
  | BigUint64Array;

/**
 * The tensor's elements in their storage type without conversion: BF16 and F16 as Uint16Array bits
 * (for kernels that widen on the fly), 8-bit floats and BOOL as Uint8Array, I64/U64 as BigInt arrays.
 * A view on `data` when aligned, else a copy. F4/F6 (packed) and C64 have no element view.
 */
export function typedView(tensor: Pick<TensorData, "dtype" | "data">): NativeArray {
  const { dtype, data } = tensor;
  switch (dtype) {
    case "F32":
      return view(data, 4, (b, o, l) => new Float32Array(b, o, l));
    case "F64":
      return view(data, 8, (b, o, l) => new Float64Array(b, o, l));
    case "BF16":
    case "F16":
    case "U16":
      return view(data, 2, (b, o, l) => new Uint16Array(b, o, l));
    case "I16":
      return view(data, 2, (b, o, l) => new Int16Array(b, o, l));
    case "I32":
      return view(data, 4, (b, o, l) => new Int32Array(b, o, l));
    case "U32":
      return view(data, 4, (b, o, l) => new Uint32Array(b, o, l));
    case "I64":
      return view(data, 8, (b, o, l) => new BigInt64Array(b, o, l));
    case "U64":
      return view(data, 8, (b, o, l) => new BigUint64Array(b, o, l));
    case "I8":
      return new Int8Array(data.buffer, data.byteOffset, data.byteLength);
    case "U8":
    case "BOOL":
    case "F8_E5M2":
    case "F8_E4M3":
    case "F8_E8M0":
    case "F8_E4M3FNUZ":
    case "F8_E5M2FNUZ":
      return data;
    default:
      throw new SafetensorsError("UnsupportedConversion", `${dtype} has no element-wise typed array`);
  }
}

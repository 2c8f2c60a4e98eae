// Storage dtypes. Compute is always f32; bf16/f16 are storage formats whose
// conversions round to nearest, ties to even, exactly as PyTorch does.

export type DType = "f32" | "bf16" | "f16" | "i32";
export type FloatDType = "f32" | "bf16" | "f16";

export type StorageArray = Float32Array | Uint16Array | Int32Array;

export const DTYPES: readonly DType[] = ["f32", "bf16", "f16", "i32"];

export function bytesPerElement(dtype: DType): number {
  return dtype === "bf16" || dtype === "f16" ? 2 : 4;
}

export function allocate(dtype: DType, size: number): StorageArray {
  switch (dtype) {
    case "f32":
      return new Float32Array(size);
    case "bf16":
    case "f16":
      return new Uint16Array(size);
    case "i32":
      return new Int32Array(size);
  }
}

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** f32 → bf16 bits, round-to-nearest-even; NaN stays a quiet NaN (torch: 0x7fc0). */
export function f32ToBf16Bits(value: number): number {
  f32[0] = value;
  const bits = u32[0];
  if ((bits & 0x7fffffff) > 0x7f800000) return ((bits >>> 16) | 0x0040) & 0xffff;
  const rounding = 0x7fff + ((bits >>> 16) & 1);
  return ((bits + rounding) >>> 16) & 0xffff;
}

export function bf16BitsToF32(bits: number): number {
  u32[0] = bits << 16;
  return f32[0];
}

/** f32 → IEEE half bits, round-to-nearest-even, with subnormals, overflow to ±inf, NaN kept. */
export function f32ToF16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 | (mant >>> 13) : 0);
  const e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mant & ((1 << shift) - 1);
    let out = mant >>> shift;
    if (rest > half || (rest === half && (out & 1) === 1)) out += 1;
    return sign | out;
  }
  let out = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (out & 1) === 1)) out += 1;
  return sign | out;
}

export function f16BitsToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? Number.NaN : sign * Number.POSITIVE_INFINITY;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

/** Widen any storage to a fresh f32 array. */
export function toFloat32Array(data: StorageArray, dtype: DType): Float32Array {
  if (dtype === "f32") return Float32Array.from(data as Float32Array);
  const out = new Float32Array(data.length);
  if (dtype === "bf16") {
    const outBits = new Uint32Array(out.buffer);
    for (let i = 0; i < data.length; i++) outBits[i] = data[i] << 16;
  } else if (dtype === "f16") {
    for (let i = 0; i < data.length; i++) out[i] = f16BitsToF32(data[i]);
  } else {
    for (let i = 0; i < data.length; i++) out[i] = data[i];
  }
  return out;
}

/** Narrow f32 values to the storage of `dtype` (i32 truncates toward zero like torch's .to(int32)). */
export function fromFloat32Array(values: Float32Array, dtype: DType): StorageArray {
  switch (dtype) {
    case "f32":
      return Float32Array.from(values);
    case "bf16": {
      const out = new Uint16Array(values.length);
      for (let i = 0; i < values.length; i++) out[i] = f32ToBf16Bits(values[i]);
      return out;
    }
    case "f16": {
      const out = new Uint16Array(values.length);
      for (let i = 0; i < values.length; i++) out[i] = f32ToF16Bits(values[i]);
      return out;
    }
    case "i32": {
      const out = new Int32Array(values.length);
      for (let i = 0; i < values.length; i++) out[i] = Math.trunc(values[i]);
      return out;
    }
  }
}

import { kernel } from "../backend.js";
import { type DType, type StorageArray, fromFloat32Array } from "../dtype.js";
import { ShapeError, fmtShape } from "../errors.js";
import { Rng } from "../random.js";
import { type Shape, checkShape, sizeOf } from "../shape.js";
import { Tensor, argOf } from "../tensor.js";

type Nested = number | Nested[];

function inferShape(value: Nested): number[] {
  const shape: number[] = [];
  let cur: Nested = value;
  while (Array.isArray(cur)) {
    shape.push(cur.length);
    cur = cur[0] as Nested;
  }
  return shape;
}

/** Build a tensor from nested arrays, a typed array + shape, or a scalar. */
export function tensor(
  values: Nested | Float32Array | Int32Array | Uint16Array | ArrayLike<number>,
  shape?: Shape,
  dtype: DType = "f32",
): Tensor {
  if (values instanceof Float32Array || values instanceof Int32Array || values instanceof Uint16Array) {
    const s = shape ?? [values.length];
    const want = dtype === "f32" ? Float32Array : dtype === "i32" ? Int32Array : Uint16Array;
    if (values instanceof want) return Tensor.fromHost(values, s, dtype);
    return Tensor.fromHost(fromFloat32Array(Float32Array.from(values), dtype), s, dtype);
  }
  if (typeof values === "number")
    return Tensor.fromHost(fromFloat32Array(Float32Array.of(values), dtype), shape ?? [], dtype);
  const inferred = Array.isArray(values) ? inferShape(values as Nested) : [values.length];
  const flat = Array.isArray(values) ? (values as unknown[]).flat(Number.POSITIVE_INFINITY) : Array.from(values);
  const s = shape ?? inferred;
  if (flat.length !== sizeOf(s)) {
    throw new ShapeError(`tensor: ${flat.length} values do not fill shape ${fmtShape(s)} (ragged nested arrays?)`);
  }
  return Tensor.fromHost(fromFloat32Array(Float32Array.from(flat as number[]), dtype), s, dtype);
}

export function scalar(value: number): Tensor {
  return Tensor.fromHost(Float32Array.of(value), []);
}

/** A zero-filled tensor on the active backend. */
export function zeros(shape: Shape, dtype: DType = "f32"): Tensor {
  checkShape("zeros", shape);
  return Tensor.zeros(shape, dtype);
}

export function full(shape: Shape, value: number, dtype: DType = "f32"): Tensor {
  checkShape("full", shape);
  const t = Tensor.zeros(shape, dtype);
  if (value !== 0 || Object.is(value, -0)) kernel("fill")(argOf(t) as StorageArray, t.size, value, 0, dtype);
  return t;
}

export function ones(shape: Shape, dtype: DType = "f32"): Tensor {
  return full(shape, 1, dtype);
}

export function zerosLike(t: Tensor): Tensor {
  return zeros(t.shape, t.dtype);
}

export function onesLike(t: Tensor): Tensor {
  return ones(t.shape, t.dtype);
}

/** [start, end) with `step`, f32 unless dtype "i32". */
export function arange(start: number, end?: number, step = 1, dtype: DType = "f32"): Tensor {
  if (end === undefined) {
    end = start;
    start = 0;
  }
  const n = Math.max(0, Math.ceil((end - start) / step));
  const t = Tensor.zeros([n], dtype);
  kernel("fill")(argOf(t) as StorageArray, n, start, step, dtype);
  return t;
}

export interface RandomOptions {
  seed?: number;
  rng?: Rng;
}

function rngFrom(options: RandomOptions): Rng {
  if (options.rng) return options.rng;
  return new Rng(options.seed ?? 0);
}

/** Standard normal samples (scaled by std, shifted by mean) from the counter-based RNG. */
export function randn(shape: Shape, options: RandomOptions & { mean?: number; std?: number } = {}): Tensor {
  checkShape("randn", shape);
  const values = rngFrom(options).normal(sizeOf(shape));
  const mean = options.mean ?? 0;
  const std = options.std ?? 1;
  if (mean !== 0 || std !== 1) scaleShift(values, std, mean);
  return Tensor.fromHost(values, shape);
}

// A loop of its own: inlined in randn, V8 optimised it on-stack and then deoptimised that code on every later
// call (the property reads after the loop had no feedback yet): ~30 deopts while a model was initialised.
function scaleShift(values: Float32Array, std: number, mean: number): void {
  for (let i = 0; i < values.length; i++) values[i] = values[i] * std + mean;
}

/** Uniform samples in [low, high). */
export function rand(shape: Shape, options: RandomOptions & { low?: number; high?: number } = {}): Tensor {
  checkShape("rand", shape);
  const values = rngFrom(options).uniform(sizeOf(shape));
  const low = options.low ?? 0;
  const high = options.high ?? 1;
  if (low !== 0 || high !== 1) for (let i = 0; i < values.length; i++) values[i] = low + values[i] * (high - low);
  return Tensor.fromHost(values, shape);
}

/** A trainable f32 leaf (requiresGrad = true). */
export function parameter(values: Tensor | Float32Array, shape?: Shape): Tensor {
  const t =
    values instanceof Tensor
      ? values.dtype === "f32"
        ? values.clone()
        : values.to("f32")
      : Tensor.fromHost(values, shape ?? [values.length]);
  t.requiresGrad = true;
  return t;
}

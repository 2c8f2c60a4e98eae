// The js reference of the generic kernels (semantics documented on `Kernels` in kernel-contract.ts).
import type {
  BinaryOp,
  BinaryShape,
  CopyShape,
  GatherRowsShape,
  ReduceOp,
  SoftmaxMode,
  UnaryOp,
} from "../../kernel-contract.js";
import {
  type DType,
  type StorageArray,
  bf16BitsToF32,
  f16BitsToF32,
  f32ToBf16Bits,
  f32ToF16Bits,
} from "../../dtype.js";
import { erf } from "../../ops/special.js";

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const INV_SQRT_2 = 1 / Math.sqrt(2);
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

export function unaryJs(op: UnaryOp, x: Float32Array, out: Float32Array, n: number): void {
  switch (op) {
    case "neg":
      for (let i = 0; i < n; i++) out[i] = -x[i];
      return;
    case "exp":
      for (let i = 0; i < n; i++) out[i] = Math.exp(x[i]);
      return;
    case "log":
      for (let i = 0; i < n; i++) out[i] = Math.log(x[i]);
      return;
    case "sqrt":
      for (let i = 0; i < n; i++) out[i] = Math.sqrt(x[i]);
      return;
    case "rsqrt":
      for (let i = 0; i < n; i++) out[i] = 1 / Math.sqrt(x[i]);
      return;
    case "tanh":
      for (let i = 0; i < n; i++) out[i] = Math.tanh(x[i]);
      return;
    case "sigmoid":
      for (let i = 0; i < n; i++) out[i] = 1 / (1 + Math.exp(-x[i]));
      return;
    case "silu":
      for (let i = 0; i < n; i++) out[i] = x[i] / (1 + Math.exp(-x[i]));
      return;
    case "gelu":
      for (let i = 0; i < n; i++) out[i] = 0.5 * x[i] * (1 + erf(x[i] * INV_SQRT_2));
      return;
    case "geluTanh":
      for (let i = 0; i < n; i++) {
        const v = x[i];
        out[i] = 0.5 * v * (1 + Math.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v)));
      }
      return;
    case "relu":
      for (let i = 0; i < n; i++) out[i] = x[i] > 0 ? x[i] : 0;
      return;
    case "softplus":
      for (let i = 0; i < n; i++) out[i] = x[i] > 20 ? x[i] : Math.log1p(Math.exp(x[i]));
      return;
    case "abs":
      for (let i = 0; i < n; i++) out[i] = Math.abs(x[i]);
      return;
    case "sin":
      for (let i = 0; i < n; i++) out[i] = Math.sin(x[i]);
      return;
    case "cos":
      for (let i = 0; i < n; i++) out[i] = Math.cos(x[i]);
      return;
  }
}

export function unaryBackwardJs(
  op: UnaryOp,
  x: Float32Array,
  y: Float32Array,
  g: Float32Array,
  d: Float32Array,
  n: number,
): void {
  switch (op) {
    case "neg":
      for (let i = 0; i < n; i++) d[i] = -g[i];
      return;
    case "exp":
      for (let i = 0; i < n; i++) d[i] = y[i] * g[i];
      return;
    case "log":
      for (let i = 0; i < n; i++) d[i] = Math.fround(1 / x[i]) * g[i];
      return;
    case "sqrt":
      for (let i = 0; i < n; i++) d[i] = Math.fround(0.5 / y[i]) * g[i];
      return;
    case "rsqrt":
      for (let i = 0; i < n; i++) d[i] = Math.fround(-0.5 * y[i] * y[i] * y[i]) * g[i];
      return;
    case "tanh":
      for (let i = 0; i < n; i++) d[i] = Math.fround(1 - y[i] * y[i]) * g[i];
      return;
    case "sigmoid":
      for (let i = 0; i < n; i++) d[i] = Math.fround(y[i] * (1 - y[i])) * g[i];
      return;
    case "silu":
      for (let i = 0; i < n; i++) {
        const s = 1 / (1 + Math.exp(-x[i]));
        d[i] = Math.fround(s * (1 + x[i] * (1 - s))) * g[i];
      }
      return;
    case "gelu":
      for (let i = 0; i < n; i++) {
        const v = x[i];
        d[i] = Math.fround(0.5 * (1 + erf(v * INV_SQRT_2)) + v * INV_SQRT_2PI * Math.exp(-0.5 * v * v)) * g[i];
      }
      return;
    case "geluTanh":
      for (let i = 0; i < n; i++) {
        const v = x[i];
        const t = Math.tanh(SQRT_2_OVER_PI * (v + 0.044715 * v * v * v));
        d[i] = Math.fround(0.5 * (1 + t) + 0.5 * v * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * v * v)) * g[i];
      }
      return;
    case "relu":
      for (let i = 0; i < n; i++) d[i] = x[i] > 0 ? g[i] : 0 * g[i];
      return;
    case "softplus":
      for (let i = 0; i < n; i++) d[i] = (x[i] > 20 ? 1 : Math.fround(1 / (1 + Math.exp(-x[i])))) * g[i];
      return;
    case "abs":
      for (let i = 0; i < n; i++) d[i] = (x[i] > 0 ? 1 : x[i] < 0 ? -1 : 0) * g[i];
      return;
    case "sin":
      for (let i = 0; i < n; i++) d[i] = Math.fround(Math.cos(x[i])) * g[i];
      return;
    case "cos":
      for (let i = 0; i < n; i++) d[i] = Math.fround(-Math.sin(x[i])) * g[i];
      return;
  }
}

/** x ∘ y with tensor-tensor semantics (maximum/minimum: ties to x). */
function apply(op: BinaryOp, u: number, v: number): number {
  switch (op) {
    case "add":
      return u + v;
    case "sub":
      return u - v;
    case "mul":
      return u * v;
    case "div":
      return u / v;
    case "pow":
      return u ** v;
    case "maximum":
      return u >= v ? u : v;
    case "minimum":
      return u <= v ? u : v;
    case "eq":
      return u === v ? 1 : 0;
    case "ne":
      return u !== v ? 1 : 0;
    case "lt":
      return u < v ? 1 : 0;
    case "le":
      return u <= v ? 1 : 0;
    case "gt":
      return u > v ? 1 : 0;
    case "ge":
      return u >= v ? 1 : 0;
  }
}

/** Contiguous same-length operands: the hot path, one tight loop per op. */
function binaryFlat(op: BinaryOp, x: Float32Array, y: Float32Array, out: Float32Array, n: number): void {
  switch (op) {
    case "add":
      for (let i = 0; i < n; i++) out[i] = x[i] + y[i];
      return;
    case "sub":
      for (let i = 0; i < n; i++) out[i] = x[i] - y[i];
      return;
    case "mul":
      for (let i = 0; i < n; i++) out[i] = x[i] * y[i];
      return;
    case "div":
      for (let i = 0; i < n; i++) out[i] = x[i] / y[i];
      return;
    default:
      for (let i = 0; i < n; i++) out[i] = apply(op, x[i], y[i]);
  }
}

export function binaryScalarJs(
  op: BinaryOp,
  x: Float32Array,
  s: number,
  out: Float32Array,
  n: number,
  scalarLeft: boolean,
): void {
  if (scalarLeft) {
    for (let i = 0; i < n; i++) out[i] = apply(op, s, x[i]);
    return;
  }
  switch (op) {
    case "add":
      for (let i = 0; i < n; i++) out[i] = x[i] + s;
      return;
    case "sub":
      for (let i = 0; i < n; i++) out[i] = x[i] - s;
      return;
    case "mul":
      for (let i = 0; i < n; i++) out[i] = x[i] * s;
      return;
    case "div":
      for (let i = 0; i < n; i++) out[i] = x[i] / s;
      return;
    case "pow":
      if (s === 2) for (let i = 0; i < n; i++) out[i] = x[i] * x[i];
      else for (let i = 0; i < n; i++) out[i] = x[i] ** s;
      return;
    case "maximum":
      for (let i = 0; i < n; i++) out[i] = x[i] > s ? x[i] : s;
      return;
    case "minimum":
      for (let i = 0; i < n; i++) out[i] = x[i] < s ? x[i] : s;
      return;
    default:
      for (let i = 0; i < n; i++) out[i] = apply(op, x[i], s);
  }
}

function isContiguous(shape: readonly number[], strides: readonly number[]): boolean {
  let expect = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] !== 1 && strides[d] !== expect) return false;
    expect *= shape[d];
  }
  return true;
}

function isAllZero(strides: readonly number[]): boolean {
  for (const s of strides) if (s !== 0) return false;
  return true;
}

export function binaryJs(op: BinaryOp, a: Float32Array, b: Float32Array, out: Float32Array, s: BinaryShape): void {
  const shape = s.shape;
  let n = 1;
  for (const d of shape) n *= d;
  if (n === 0) return;
  const aFlat = isContiguous(shape, s.aStrides);
  const bFlat = isContiguous(shape, s.bStrides);
  if (aFlat && bFlat) {
    binaryFlat(op, a, b, out, n);
    return;
  }
  if (aFlat && isAllZero(s.bStrides)) {
    binaryScalarJs(op, a, b[0], out, n, false);
    return;
  }
  if (bFlat && isAllZero(s.aStrides)) {
    const v = a[0];
    for (let i = 0; i < n; i++) out[i] = apply(op, v, b[i]);
    return;
  }
  // General broadcast: iterate the innermost dim as a run, carry the outer index.
  const rank = shape.length;
  const inner = shape[rank - 1];
  const sa = s.aStrides[rank - 1];
  const sb = s.bStrides[rank - 1];
  const idx = new Array<number>(rank).fill(0);
  let ia = 0;
  let ib = 0;
  for (let o = 0; o < n; o += inner) {
    if (sa === 1 && sb === 0) {
      const v = b[ib];
      for (let j = 0; j < inner; j++) out[o + j] = apply(op, a[ia + j], v);
    } else if (sa === 0 && sb === 1) {
      const u = a[ia];
      for (let j = 0; j < inner; j++) out[o + j] = apply(op, u, b[ib + j]);
    } else {
      for (let j = 0; j < inner; j++) out[o + j] = apply(op, a[ia + j * sa], b[ib + j * sb]);
    }
    for (let d = rank - 2; d >= 0; d--) {
      idx[d]++;
      ia += s.aStrides[d];
      ib += s.bStrides[d];
      if (idx[d] < shape[d]) break;
      ia -= s.aStrides[d] * shape[d];
      ib -= s.bStrides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

export function whereJs(c: Float32Array, a: Float32Array, b: Float32Array, out: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) out[i] = c[i] !== 0 ? a[i] : b[i];
}

export function clampJs(x: Float32Array, out: Float32Array, n: number, lo: number, hi: number): void {
  for (let i = 0; i < n; i++) out[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

export function reduceJs(
  op: ReduceOp,
  x: Float32Array,
  out: Float32Array,
  outer: number,
  n: number,
  inner: number,
): void {
  if (inner === 1) {
    for (let o = 0; o < outer; o++) {
      const base = o * n;
      if (op === "sum") {
        let acc = 0;
        for (let j = 0; j < n; j++) acc += x[base + j];
        out[o] = acc;
      } else if (op === "max") {
        let m = Number.NEGATIVE_INFINITY;
        for (let j = 0; j < n; j++) {
          const v = x[base + j];
          if (v > m || Number.isNaN(v)) m = v;
          if (Number.isNaN(m)) break;
        }
        out[o] = m;
      } else {
        let m = Number.POSITIVE_INFINITY;
        for (let j = 0; j < n; j++) {
          const v = x[base + j];
          if (v < m || Number.isNaN(v)) m = v;
          if (Number.isNaN(m)) break;
        }
        out[o] = m;
      }
    }
    return;
  }
  const init = op === "sum" ? 0 : op === "max" ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY;
  out.fill(init, 0, outer * inner);
  for (let o = 0; o < outer; o++) {
    const dst = o * inner;
    for (let j = 0; j < n; j++) {
      const src = (o * n + j) * inner;
      if (op === "sum") for (let i = 0; i < inner; i++) out[dst + i] += x[src + i];
      else if (op === "max")
        for (let i = 0; i < inner; i++) {
          const v = x[src + i];
          if (v > out[dst + i] || Number.isNaN(v)) out[dst + i] = v;
        }
      else
        for (let i = 0; i < inner; i++) {
          const v = x[src + i];
          if (v < out[dst + i] || Number.isNaN(v)) out[dst + i] = v;
        }
    }
  }
  // A NaN seen earlier must survive a later comparison (NaN < v is false, so it does).
}

export function argmaxJs(x: Float32Array, out: Int32Array, outer: number, n: number, inner: number): void {
  for (let o = 0; o < outer; o++) {
    for (let i = 0; i < inner; i++) {
      let best = Number.NEGATIVE_INFINITY;
      let bestJ = 0;
      for (let j = 0; j < n; j++) {
        const v = x[(o * n + j) * inner + i];
        if (v > best || (Number.isNaN(v) && !Number.isNaN(best))) {
          best = v;
          bestJ = j;
          if (Number.isNaN(v)) break;
        }
      }
      out[o * inner + i] = bestJ;
    }
  }
}

export function softmaxJs(mode: SoftmaxMode, src: Float32Array, y: Float32Array, rows: number, n: number): void {
  for (let r = 0, o = 0; r < rows; r++, o += n) {
    let m = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < n; j++) if (src[o + j] > m) m = src[o + j];
    let s = 0;
    if (mode === "softmax") {
      for (let j = 0; j < n; j++) s += y[o + j] = Math.exp(src[o + j] - m);
      for (let j = 0; j < n; j++) y[o + j] /= s;
    } else {
      for (let j = 0; j < n; j++) s += Math.exp(src[o + j] - m);
      const lse = m + Math.log(s);
      for (let j = 0; j < n; j++) y[o + j] = src[o + j] - lse;
    }
  }
}

export function softmaxBackwardJs(
  mode: SoftmaxMode,
  y: Float32Array,
  g: Float32Array,
  dx: Float32Array,
  rows: number,
  n: number,
): void {
  for (let r = 0, o = 0; r < rows; r++, o += n) {
    if (mode === "softmax") {
      let dot = 0;
      for (let j = 0; j < n; j++) dot += g[o + j] * y[o + j];
      for (let j = 0; j < n; j++) dx[o + j] = y[o + j] * (g[o + j] - dot);
    } else {
      let total = 0;
      for (let j = 0; j < n; j++) total += g[o + j];
      for (let j = 0; j < n; j++) dx[o + j] = g[o + j] - Math.exp(y[o + j]) * total;
    }
  }
}

export function copyJs(x: StorageArray, out: StorageArray, s: CopyShape): void {
  const shape = s.shape;
  const rank = shape.length;
  let n = 1;
  for (const d of shape) n *= d;
  if (n === 0) return;
  if (rank === 0) {
    out[s.dstOffset] = x[s.srcOffset];
    return;
  }
  const inner = shape[rank - 1];
  const si = s.srcStrides[rank - 1];
  const di = s.dstStrides[rank - 1];
  const idx = new Array<number>(rank).fill(0);
  let src = s.srcOffset;
  let dst = s.dstOffset;
  for (let o = 0; o < n; o += inner) {
    if (si === 1 && di === 1) out.set(x.subarray(src, src + inner), dst);
    else if (si === 0 && di === 1) out.fill(x[src], dst, dst + inner);
    else for (let j = 0; j < inner; j++) out[dst + j * di] = x[src + j * si];
    for (let d = rank - 2; d >= 0; d--) {
      idx[d]++;
      src += s.srcStrides[d];
      dst += s.dstStrides[d];
      if (idx[d] < shape[d]) break;
      src -= s.srcStrides[d] * shape[d];
      dst -= s.dstStrides[d] * shape[d];
      idx[d] = 0;
    }
  }
}

export function gatherRowsJs(table: StorageArray, ids: Int32Array, out: Float32Array, s: GatherRowsShape): void {
  const d = s.rowLen;
  if (s.dtype === "f32") {
    const w = table as Float32Array;
    for (let i = 0; i < s.count; i++) out.set(w.subarray(ids[i] * d, (ids[i] + 1) * d), i * d);
    return;
  }
  if (s.dtype === "bf16") {
    const bits = new Uint32Array(out.buffer, out.byteOffset, s.count * d);
    for (let i = 0; i < s.count; i++) {
      const src = ids[i] * d;
      for (let j = 0; j < d; j++) bits[i * d + j] = table[src + j] << 16;
    }
    return;
  }
  for (let i = 0; i < s.count; i++) {
    const src = ids[i] * d;
    for (let j = 0; j < d; j++) out[i * d + j] = f16BitsToF32(table[src + j]);
  }
}

export function scatterAddRowsJs(
  src: Float32Array,
  ids: Int32Array,
  out: Float32Array,
  count: number,
  d: number,
): void {
  for (let i = 0; i < count; i++) {
    const o = ids[i] * d;
    const r = i * d;
    for (let j = 0; j < d; j++) out[o + j] += src[r + j];
  }
}

export function gatherAxisJs(
  x: Float32Array,
  index: Int32Array,
  out: Float32Array,
  outer: number,
  n: number,
  k: number,
  inner: number,
): void {
  for (let o = 0; o < outer; o++)
    for (let j = 0; j < k; j++)
      for (let i = 0; i < inner; i++) {
        const p = (o * k + j) * inner + i;
        out[p] = x[(o * n + index[p]) * inner + i];
      }
}

export function scatterAddAxisJs(
  g: Float32Array,
  index: Int32Array,
  dx: Float32Array,
  outer: number,
  n: number,
  k: number,
  inner: number,
): void {
  for (let o = 0; o < outer; o++)
    for (let j = 0; j < k; j++)
      for (let i = 0; i < inner; i++) {
        const p = (o * k + j) * inner + i;
        dx[(o * n + index[p]) * inner + i] += g[p];
      }
}

export function castJs(x: StorageArray, out: StorageArray, n: number, from: DType, to: DType): void {
  if (from === to) {
    out.set(x.subarray(0, n));
    return;
  }
  const read =
    from === "bf16" ? (i: number) => bf16BitsToF32(x[i]) : from === "f16" ? (i: number) => f16BitsToF32(x[i]) : null;
  if (to === "f32" || to === "i32") {
    if (from === "bf16" && to === "f32") {
      const bits = new Uint32Array(out.buffer, out.byteOffset, n);
      for (let i = 0; i < n; i++) bits[i] = x[i] << 16;
      return;
    }
    for (let i = 0; i < n; i++) {
      const v = read ? read(i) : x[i];
      out[i] = to === "i32" ? Math.trunc(Math.fround(v)) : v;
    }
    return;
  }
  const narrow = to === "bf16" ? f32ToBf16Bits : f32ToF16Bits;
  // i32 → half goes through f32 first, as dtype.ts fromFloat32Array does.
  for (let i = 0; i < n; i++) out[i] = narrow(Math.fround(read ? read(i) : x[i]));
}

export function fillJs(out: StorageArray, n: number, value: number, step: number, dtype: DType): void {
  if (dtype === "bf16" || dtype === "f16") {
    const narrow = dtype === "bf16" ? f32ToBf16Bits : f32ToF16Bits;
    for (let i = 0; i < n; i++) out[i] = narrow(Math.fround(value + i * step));
    return;
  }
  if (step === 0) {
    out.fill(dtype === "i32" ? Math.trunc(Math.fround(value)) : value, 0, n);
    return;
  }
  if (dtype === "i32") for (let i = 0; i < n; i++) out[i] = Math.trunc(Math.fround(value + i * step));
  else for (let i = 0; i < n; i++) out[i] = value + i * step;
}

// Elementwise ops with NumPy broadcasting. Forwards run the backend's `unary` / `binary` / `where` / `clamp`
// kernels (backend.ts); each op records its gradient once, written with other ops or the `unaryBackward`
// kernel, so every backend inherits it.
import { record } from "../autograd.js";
import { type BinaryOp, type UnaryOp, kernel } from "../backend.js";
import { DTypeError, ShapeError, fmtShape } from "../errors.js";
import { broadcastShapes, broadcastStrides, sameShape, sizeOf, stridesOf } from "../shape.js";
import { Tensor, argOf, viewAs } from "../tensor.js";

export type TensorLike = Tensor | number;

/** `t` as f32 (bf16/f16 widened into a fresh tensor; grads never flow into those); i32 is a DTypeError. */
export function floatTensor(op: string, t: Tensor): Tensor {
  if (t.dtype === "f32") return t;
  if (t.dtype === "i32") throw new DTypeError(`${op}: expected a float tensor, got i32 ${fmtShape(t.shape)}`);
  return t.to("f32");
}

/** The f32 kernel argument of `t` on the active backend (bf16/f16 widened). */
export function floatData(op: string, t: Tensor): Float32Array {
  return argOf(floatTensor(op, t)) as Float32Array;
}

/** A fresh zero-filled f32 output on the active backend. */
export function outF32(shape: readonly number[]): Tensor {
  return Tensor.output(shape, "f32");
}

/** A fresh f32 output whose every element the caller's kernel writes (not zeroed; see `Tensor.empty`). */
export function emptyF32(shape: readonly number[]): Tensor {
  return Tensor.empty(shape, "f32");
}

/** Materialise `t` broadcast to `shape` (a copy unless the shape already matches); float result. */
export function broadcastTo(t: Tensor, shape: readonly number[]): Tensor {
  if (sameShape(t.shape, shape)) return t;
  const outShape = broadcastShapes("broadcastTo", t.shape, shape);
  if (!sameShape(outShape, shape)) {
    throw new ShapeError(`broadcastTo: cannot broadcast ${fmtShape(t.shape)} to ${fmtShape(shape)}`);
  }
  const src = floatTensor("broadcastTo", t);
  const out = emptyF32(shape);
  kernel("copy")(argOf(src) as Float32Array, argOf(out) as Float32Array, {
    shape,
    srcOffset: 0,
    srcStrides: broadcastStrides(t.shape, shape),
    dstOffset: 0,
    dstStrides: stridesOf(shape),
  });
  return record(out, "broadcastTo", [t], (g) => [sumTo(g, t.shape)]);
}

/** Sum a gradient over broadcast dims so it matches `shape` (inverse of broadcasting). */
export function sumTo(g: Tensor, shape: readonly number[]): Tensor {
  if (sameShape(g.shape, shape)) return g;
  const rank = g.shape.length;
  const offset = rank - shape.length;
  if (offset < 0) throw new ShapeError(`sumTo: cannot reduce ${fmtShape(g.shape)} to ${fmtShape(shape)}`);
  // Runs of adjacent dims that are all reduced or all kept collapse into one dim each.
  const dims: number[] = [];
  const reduced: boolean[] = [];
  for (let d = 0; d < rank; d++) {
    const target = d < offset ? 1 : shape[d - offset];
    if (target !== 1 && target !== g.shape[d])
      throw new ShapeError(`sumTo: cannot reduce ${fmtShape(g.shape)} to ${fmtShape(shape)}`);
    const red = target === 1 && g.shape[d] !== 1;
    if (g.shape[d] === 1) continue;
    if (dims.length > 0 && reduced[reduced.length - 1] === red) dims[dims.length - 1] *= g.shape[d];
    else {
      dims.push(g.shape[d]);
      reduced.push(red);
    }
  }
  let cur = g;
  let curDims = dims;
  for (let r = curDims.length - 1; r >= 0; r--) {
    if (!reduced[r]) continue;
    let outer = 1;
    for (let d = 0; d < r; d++) outer *= curDims[d];
    let inner = 1;
    for (let d = r + 1; d < curDims.length; d++) inner *= curDims[d];
    const next = emptyF32([outer * inner]);
    kernel("reduce")("sum", argOf(cur) as Float32Array, argOf(next) as Float32Array, outer, curDims[r], inner);
    if (cur !== g) cur.dispose();
    cur = next;
    curDims = [...curDims.slice(0, r), 1, ...curDims.slice(r + 1)];
  }
  if (cur === g) return new Tensor(g.storage, shape, g.dtype, g.offset);
  return viewAs(cur, shape);
}

function scalarTensor(value: number): Tensor {
  return Tensor.outputFrom(Float32Array.of(value), []);
}

function binary(op: BinaryOp, a: TensorLike, b: TensorLike): { out: Tensor; ta: Tensor | null; tb: Tensor | null } {
  if (typeof a === "number" && typeof b === "number") {
    const x = scalarTensor(a);
    const out = emptyF32([]);
    kernel("binaryScalar")(op, argOf(x) as Float32Array, b, argOf(out) as Float32Array, 1, false);
    return { out, ta: null, tb: null };
  }
  if (typeof a === "number") {
    const bt = b as Tensor;
    const out = emptyF32(bt.shape);
    kernel("binaryScalar")(op, floatData(op, bt), a, argOf(out) as Float32Array, bt.size, true);
    return { out, ta: null, tb: bt };
  }
  if (typeof b === "number") {
    const out = emptyF32(a.shape);
    kernel("binaryScalar")(op, floatData(op, a), b, argOf(out) as Float32Array, a.size, false);
    return { out, ta: a, tb: null };
  }
  const shape = broadcastShapes(op, a.shape, b.shape);
  const out = emptyF32(shape);
  const x = floatData(op, a);
  const y = floatData(op, b);
  kernel("binary")(op, x, y, argOf(out) as Float32Array, {
    shape,
    aStrides: broadcastStrides(a.shape, shape),
    bStrides: broadcastStrides(b.shape, shape),
  });
  return { out, ta: a, tb: b };
}

export function add(a: TensorLike, b: TensorLike): Tensor {
  const { out, ta, tb } = binary("add", a, b);
  return record(out, "add", inputsOf(ta, tb), (g) =>
    gradsOf(
      ta,
      tb,
      () => sumTo(g, ta!.shape),
      () => sumTo(g, tb!.shape),
    ),
  );
}

export function sub(a: TensorLike, b: TensorLike): Tensor {
  const { out, ta, tb } = binary("sub", a, b);
  return record(out, "sub", inputsOf(ta, tb), (g) =>
    gradsOf(
      ta,
      tb,
      () => sumTo(g, ta!.shape),
      () => sumTo(neg(g), tb!.shape),
    ),
  );
}

export function mul(a: TensorLike, b: TensorLike): Tensor {
  const { out, ta, tb } = binary("mul", a, b);
  return record(out, "mul", inputsOf(ta, tb), (g) =>
    gradsOf(
      ta,
      tb,
      () => sumTo(mul(g, tb ?? (b as number)), ta!.shape),
      () => sumTo(mul(g, ta ?? (a as number)), tb!.shape),
    ),
  );
}

export function div(a: TensorLike, b: TensorLike): Tensor {
  const { out, ta, tb } = binary("div", a, b);
  return record(out, "div", inputsOf(ta, tb), (g) =>
    gradsOf(
      ta,
      tb,
      () => sumTo(div(g, tb ?? (b as number)), ta!.shape),
      // d(a/b)/db = −a/b² = −out/b
      () => sumTo(neg(div(mul(g, out), tb!)), tb!.shape),
    ),
  );
}

/** a ** b (b a tensor or a number). */
export function pow(a: TensorLike, b: TensorLike): Tensor {
  const { out, ta, tb } = binary("pow", a, b);
  return record(out, "pow", inputsOf(ta, tb), (g) =>
    gradsOf(
      ta,
      tb,
      () => {
        const e = tb ?? (b as number);
        return sumTo(mul(g, mul(e, pow(ta!, typeof e === "number" ? e - 1 : sub(e, 1)))), ta!.shape);
      },
      () => sumTo(mul(g, mul(out, log(ta ?? (a as number)))), tb!.shape),
    ),
  );
}

export function maximum(a: TensorLike, b: TensorLike): Tensor {
  const { out, ta, tb } = binary("maximum", a, b);
  // Ties send the gradient to `a` (first argument).
  return record(out, "maximum", inputsOf(ta, tb), (g) =>
    gradsOf(
      ta,
      tb,
      () => sumTo(mul(g, geMask(ta!, tb ?? (b as number))), ta!.shape),
      () => sumTo(mul(g, sub(1, geMask(ta ?? (a as number), tb!))), tb!.shape),
    ),
  );
}

export function minimum(a: TensorLike, b: TensorLike): Tensor {
  return neg(maximum(neg(toTensor(a)), neg(toTensor(b))));
}

function toTensor(x: TensorLike): Tensor {
  return typeof x === "number" ? scalarTensor(x) : x;
}

/** 1 where a ≥ b else 0 (no gradient). */
function geMask(a: TensorLike, b: TensorLike): Tensor {
  return compare("ge", a, b);
}

function inputsOf(a: Tensor | null, b: Tensor | null): Tensor[] {
  const list: Tensor[] = [];
  if (a) list.push(a);
  if (b) list.push(b);
  return list;
}

function gradsOf(a: Tensor | null, b: Tensor | null, ga: () => Tensor, gb: () => Tensor): (Tensor | null)[] {
  const out: (Tensor | null)[] = [];
  if (a) out.push(a.requiresGrad ? ga() : null);
  if (b) out.push(b.requiresGrad ? gb() : null);
  return out;
}

// ---- unary ----

function unary(op: UnaryOp, a: Tensor): Tensor {
  const x = floatTensor(op, a);
  const out = emptyF32(a.shape);
  kernel("unary")(op, argOf(x) as Float32Array, argOf(out) as Float32Array, a.size);
  return record(
    out,
    op,
    [a],
    (g) => {
      const dx = emptyF32(a.shape);
      kernel("unaryBackward")(
        op,
        argOf(x) as Float32Array,
        argOf(out) as Float32Array,
        argOf(g) as Float32Array,
        argOf(dx) as Float32Array,
        a.size,
      );
      return [dx];
    },
    undefined,
    x === a ? undefined : [x],
  );
}

export const neg = (a: Tensor): Tensor => unary("neg", a);
export const exp = (a: Tensor): Tensor => unary("exp", a);
export const log = (a: TensorLike): Tensor => unary("log", toTensor(a));
export const sqrt = (a: Tensor): Tensor => unary("sqrt", a);
export const rsqrt = (a: Tensor): Tensor => unary("rsqrt", a);
export const tanh = (a: Tensor): Tensor => unary("tanh", a);
export const sigmoid = (a: Tensor): Tensor => unary("sigmoid", a);
export const silu = (a: Tensor): Tensor => unary("silu", a);
/** Exact GELU, 0.5·x·(1 + erf(x/√2)) (torch's default approximate="none"). */
export const gelu = (a: Tensor): Tensor => unary("gelu", a);
/** GELU with the tanh approximation (torch approximate="tanh", "gelu_pytorch_tanh"). */
export const geluTanh = (a: Tensor): Tensor => unary("geluTanh", a);
export const relu = (a: Tensor): Tensor => unary("relu", a);
export const softplus = (a: Tensor): Tensor => unary("softplus", a);
export const abs = (a: Tensor): Tensor => unary("abs", a);
export const sin = (a: Tensor): Tensor => unary("sin", a);
export const cos = (a: Tensor): Tensor => unary("cos", a);
export const square = (a: Tensor): Tensor => pow(a, 2);

/** Clamp into [min, max]; the gradient passes where min ≤ x ≤ max (torch.clamp). */
export function clamp(a: Tensor, min?: number, max?: number): Tensor {
  const lo = min ?? Number.NEGATIVE_INFINITY;
  const hi = max ?? Number.POSITIVE_INFINITY;
  if (lo > hi) throw new ShapeError(`clamp: min ${lo} > max ${hi}`);
  const x = floatTensor("clamp", a);
  const out = emptyF32(a.shape);
  kernel("clamp")(argOf(x) as Float32Array, argOf(out) as Float32Array, a.size, lo, hi);
  return record(
    out,
    "clamp",
    [a],
    (g) => {
      const inside = emptyF32(a.shape);
      const k = kernel("binaryScalar");
      k("ge", argOf(x) as Float32Array, lo, argOf(inside) as Float32Array, a.size, false);
      const below = emptyF32(a.shape);
      k("le", argOf(x) as Float32Array, hi, argOf(below) as Float32Array, a.size, false);
      const dx = emptyF32(a.shape);
      const shape = { shape: [a.size], aStrides: [1], bStrides: [1] };
      kernel("binary")(
        "mul",
        argOf(inside) as Float32Array,
        argOf(below) as Float32Array,
        argOf(inside) as Float32Array,
        shape,
      );
      kernel("binary")(
        "mul",
        argOf(g) as Float32Array,
        argOf(inside) as Float32Array,
        argOf(dx) as Float32Array,
        shape,
      );
      inside.dispose();
      below.dispose();
      return [dx];
    },
    undefined,
    x === a ? undefined : [x],
  );
}

/** `t` broadcast to `shape` as a contiguous f32 tensor (no tape). */
function expandF32(t: Tensor, shape: readonly number[]): Tensor {
  const f = t.dtype === "f32" ? t : t.to("f32");
  if (sameShape(f.shape, shape)) return f;
  const out = emptyF32(shape);
  kernel("copy")(argOf(f) as Float32Array, argOf(out) as Float32Array, {
    shape,
    srcOffset: 0,
    srcStrides: broadcastStrides(f.shape, shape),
    dstOffset: 0,
    dstStrides: stridesOf(shape),
  });
  return out;
}

/** Elementwise select: cond (nonzero = true) ? a : b, broadcast together. */
export function where(cond: Tensor, a: TensorLike, b: TensorLike): Tensor {
  const at = toTensor(a);
  const bt = toTensor(b);
  const shape = broadcastShapes("where", broadcastShapes("where", cond.shape, at.shape), bt.shape);
  const n = sizeOf(shape);
  const mask = expandF32(cond, shape);
  const x = expandF32(floatTensor("where", at), shape);
  const y = expandF32(floatTensor("where", bt), shape);
  const out = emptyF32(shape);
  const k = kernel("where");
  k(argOf(mask) as Float32Array, argOf(x) as Float32Array, argOf(y) as Float32Array, argOf(out) as Float32Array, n);
  return record(
    out,
    "where",
    [at, bt],
    (g) => {
      const zero = outF32(shape);
      let ga: Tensor | null = null;
      let gb: Tensor | null = null;
      if (at.requiresGrad) {
        ga = emptyF32(shape);
        k(
          argOf(mask) as Float32Array,
          argOf(g) as Float32Array,
          argOf(zero) as Float32Array,
          argOf(ga) as Float32Array,
          n,
        );
      }
      if (bt.requiresGrad) {
        gb = emptyF32(shape);
        k(
          argOf(mask) as Float32Array,
          argOf(zero) as Float32Array,
          argOf(g) as Float32Array,
          argOf(gb) as Float32Array,
          n,
        );
      }
      zero.dispose();
      return [ga ? sumTo(ga, at.shape) : null, gb ? sumTo(gb, bt.shape) : null];
    },
    mask === cond ? [cond] : undefined,
    mask === cond ? undefined : [mask],
  );
}

export type CompareOp = "eq" | "ne" | "lt" | "le" | "gt" | "ge";

/** Elementwise comparison → f32 tensor of 0/1 (no gradient). */
export function compare(op: CompareOp, a: TensorLike, b: TensorLike): Tensor {
  const at = toTensor(a);
  const bt = toTensor(b);
  const x = at.dtype === "f32" ? at : at.to("f32");
  const y = bt.dtype === "f32" ? bt : bt.to("f32");
  const shape = broadcastShapes(op, at.shape, bt.shape);
  const out = emptyF32(shape);
  kernel("binary")(op, argOf(x) as Float32Array, argOf(y) as Float32Array, argOf(out) as Float32Array, {
    shape,
    aStrides: broadcastStrides(at.shape, shape),
    bStrides: broadcastStrides(bt.shape, shape),
  });
  return out;
}

// Elementwise ops with NumPy broadcasting. Forward loops are tight per-op loops on f32;
// each op records its gradient once, written with other ops (so every backend inherits it).
import { record } from "../autograd.js";
import { DTypeError, ShapeError, fmtShape } from "../errors.js";
import { broadcastShapes, broadcastStrides, sameShape, sizeOf } from "../shape.js";
import { Tensor } from "../tensor.js";
import { erf } from "./special.js";

export type TensorLike = Tensor | number;

/** f32 view of a float tensor (bf16/f16 widened; grads never flow into those). */
export function floatData(op: string, t: Tensor): Float32Array {
  if (t.dtype === "f32") return t.data as Float32Array;
  if (t.dtype === "i32") throw new DTypeError(`${op}: expected a float tensor, got i32 ${fmtShape(t.shape)}`);
  return t.toFloat32Array();
}

/** Materialise `t` broadcast to `shape` (a copy unless the shape already matches). */
export function broadcastTo(t: Tensor, shape: readonly number[]): Tensor {
  if (sameShape(t.shape, shape)) return t;
  const outShape = broadcastShapes("broadcastTo", t.shape, shape);
  if (!sameShape(outShape, shape)) {
    throw new ShapeError(`broadcastTo: cannot broadcast ${fmtShape(t.shape)} to ${fmtShape(shape)}`);
  }
  const src = floatData("broadcastTo", t);
  const out = new Float32Array(sizeOf(shape));
  const strides = broadcastStrides(t.shape, shape);
  const rank = shape.length;
  // Copy the innermost dim in runs (stride 1) or fills (stride 0).
  const inner = shape[rank - 1] ?? 1;
  const innerStride = strides[rank - 1] ?? 0;
  const outer = out.length / Math.max(inner, 1);
  const idx = new Array<number>(Math.max(rank - 1, 0)).fill(0);
  let srcBase = 0;
  for (let o = 0; o < outer; o++) {
    const dst = o * inner;
    if (innerStride === 0) out.fill(src[srcBase], dst, dst + inner);
    else out.set(src.subarray(srcBase, srcBase + inner), dst);
    for (let d = rank - 2; d >= 0; d--) {
      idx[d]++;
      srcBase += strides[d];
      if (idx[d] < shape[d]) break;
      srcBase -= strides[d] * shape[d];
      idx[d] = 0;
    }
  }
  const result = new Tensor(out, shape);
  return record(result, "broadcastTo", [t], (g) => [sumTo(g, t.shape)]);
}

/** Sum a gradient over broadcast dims so it matches `shape` (inverse of broadcasting). */
export function sumTo(g: Tensor, shape: readonly number[]): Tensor {
  if (sameShape(g.shape, shape)) return g;
  const rank = g.shape.length;
  const offset = rank - shape.length;
  const src = g.data as Float32Array;
  const out = new Float32Array(sizeOf(shape));
  const strides = broadcastStrides(shape, g.shape);
  const inner = g.shape[rank - 1] ?? 1;
  const innerStride = strides[rank - 1] ?? 0;
  const outer = src.length / Math.max(inner, 1);
  const idx = new Array<number>(Math.max(rank - 1, 0)).fill(0);
  let dstBase = 0;
  for (let o = 0; o < outer; o++) {
    const s = o * inner;
    if (innerStride === 0) {
      let acc = 0;
      for (let j = 0; j < inner; j++) acc += src[s + j];
      out[dstBase] += acc;
    } else {
      for (let j = 0; j < inner; j++) out[dstBase + j] += src[s + j];
    }
    for (let d = rank - 2; d >= 0; d--) {
      idx[d]++;
      dstBase += strides[d];
      if (idx[d] < g.shape[d]) break;
      dstBase -= strides[d] * g.shape[d];
      idx[d] = 0;
    }
  }
  if (offset < 0) throw new ShapeError(`sumTo: cannot reduce ${fmtShape(g.shape)} to ${fmtShape(shape)}`);
  return new Tensor(out, shape);
}

type BinaryOp = "add" | "sub" | "mul" | "div" | "pow" | "maximum" | "minimum";

function binaryKernel(op: BinaryOp, x: Float32Array, y: Float32Array | number, out: Float32Array): void {
  const n = out.length;
  if (typeof y === "number") {
    switch (op) {
      case "add":
        for (let i = 0; i < n; i++) out[i] = x[i] + y;
        return;
      case "sub":
        for (let i = 0; i < n; i++) out[i] = x[i] - y;
        return;
      case "mul":
        for (let i = 0; i < n; i++) out[i] = x[i] * y;
        return;
      case "div":
        for (let i = 0; i < n; i++) out[i] = x[i] / y;
        return;
      case "pow":
        if (y === 2) for (let i = 0; i < n; i++) out[i] = x[i] * x[i];
        else for (let i = 0; i < n; i++) out[i] = x[i] ** y;
        return;
      case "maximum":
        for (let i = 0; i < n; i++) out[i] = x[i] > y ? x[i] : y;
        return;
      case "minimum":
        for (let i = 0; i < n; i++) out[i] = x[i] < y ? x[i] : y;
        return;
    }
  }
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
    case "pow":
      for (let i = 0; i < n; i++) out[i] = x[i] ** y[i];
      return;
    case "maximum":
      for (let i = 0; i < n; i++) out[i] = x[i] >= y[i] ? x[i] : y[i];
      return;
    case "minimum":
      for (let i = 0; i < n; i++) out[i] = x[i] <= y[i] ? x[i] : y[i];
      return;
  }
}

function binary(op: BinaryOp, a: TensorLike, b: TensorLike): { out: Tensor; ta: Tensor | null; tb: Tensor | null } {
  if (typeof a === "number" && typeof b === "number") {
    const out = new Float32Array(1);
    binaryKernel(op, Float32Array.of(a), b, out);
    return { out: new Tensor(out, []), ta: null, tb: null };
  }
  if (typeof a === "number") {
    // Scalar on the left: broadcast it as a full tensor (rare; keeps the kernels simple).
    const bt = b as Tensor;
    const at = new Tensor(new Float32Array(bt.size).fill(a), bt.shape);
    const r = binary(op, at, bt);
    return { out: r.out, ta: null, tb: bt };
  }
  if (typeof b === "number") {
    const out = new Float32Array(a.size);
    binaryKernel(op, floatData(op, a), b, out);
    return { out: new Tensor(out, a.shape), ta: a, tb: null };
  }
  const shape = broadcastShapes(op, a.shape, b.shape);
  const x = sameShape(a.shape, shape) ? floatData(op, a) : (broadcastTo(a.detach(), shape).data as Float32Array);
  const y =
    b.size === 1 && !sameShape(b.shape, shape)
      ? floatData(op, b)[0]
      : sameShape(b.shape, shape)
        ? floatData(op, b)
        : (broadcastTo(b.detach(), shape).data as Float32Array);
  const out = new Float32Array(sizeOf(shape));
  binaryKernel(op, x, y, out);
  return { out: new Tensor(out, shape), ta: a, tb: b };
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
  return typeof x === "number" ? new Tensor(Float32Array.of(x), []) : x;
}

/** 1 where a ≥ b else 0 (no gradient). */
function geMask(a: TensorLike, b: TensorLike): Tensor {
  const at = toTensor(a);
  const bt = toTensor(b);
  const shape = broadcastShapes("ge", at.shape, bt.shape);
  const x = broadcastTo(at.detach(), shape).data as Float32Array;
  const y = broadcastTo(bt.detach(), shape).data as Float32Array;
  const out = new Float32Array(x.length);
  for (let i = 0; i < out.length; i++) out[i] = x[i] >= y[i] ? 1 : 0;
  return new Tensor(out, shape);
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

type UnaryOp =
  | "neg"
  | "exp"
  | "log"
  | "sqrt"
  | "rsqrt"
  | "tanh"
  | "sigmoid"
  | "silu"
  | "gelu"
  | "geluTanh"
  | "relu"
  | "softplus"
  | "abs"
  | "sin"
  | "cos";

const SQRT_2_OVER_PI = Math.sqrt(2 / Math.PI);
const INV_SQRT_2 = 1 / Math.sqrt(2);
const INV_SQRT_2PI = 1 / Math.sqrt(2 * Math.PI);

function unaryKernel(op: UnaryOp, x: Float32Array, out: Float32Array): void {
  const n = x.length;
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
      // torch.nn.functional.softplus(beta=1, threshold=20): linear above the threshold.
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

/** d out / d x as a fresh array, from the input x and the output y. */
function unaryDerivative(op: UnaryOp, x: Float32Array, y: Float32Array): Float32Array {
  const n = x.length;
  const d = new Float32Array(n);
  switch (op) {
    case "neg":
      d.fill(-1);
      break;
    case "exp":
      d.set(y);
      break;
    case "log":
      for (let i = 0; i < n; i++) d[i] = 1 / x[i];
      break;
    case "sqrt":
      for (let i = 0; i < n; i++) d[i] = 0.5 / y[i];
      break;
    case "rsqrt":
      for (let i = 0; i < n; i++) d[i] = -0.5 * y[i] * y[i] * y[i];
      break;
    case "tanh":
      for (let i = 0; i < n; i++) d[i] = 1 - y[i] * y[i];
      break;
    case "sigmoid":
      for (let i = 0; i < n; i++) d[i] = y[i] * (1 - y[i]);
      break;
    case "silu":
      for (let i = 0; i < n; i++) {
        const s = 1 / (1 + Math.exp(-x[i]));
        d[i] = s * (1 + x[i] * (1 - s));
      }
      break;
    case "gelu":
      for (let i = 0; i < n; i++) {
        const v = x[i];
        d[i] = 0.5 * (1 + erf(v * INV_SQRT_2)) + v * INV_SQRT_2PI * Math.exp(-0.5 * v * v);
      }
      break;
    case "geluTanh":
      for (let i = 0; i < n; i++) {
        const v = x[i];
        const inner = SQRT_2_OVER_PI * (v + 0.044715 * v * v * v);
        const t = Math.tanh(inner);
        d[i] = 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * v * v);
      }
      break;
    case "relu":
      for (let i = 0; i < n; i++) d[i] = x[i] > 0 ? 1 : 0;
      break;
    case "softplus":
      for (let i = 0; i < n; i++) d[i] = x[i] > 20 ? 1 : 1 / (1 + Math.exp(-x[i]));
      break;
    case "abs":
      for (let i = 0; i < n; i++) d[i] = x[i] > 0 ? 1 : x[i] < 0 ? -1 : 0;
      break;
    case "sin":
      for (let i = 0; i < n; i++) d[i] = Math.cos(x[i]);
      break;
    case "cos":
      for (let i = 0; i < n; i++) d[i] = -Math.sin(x[i]);
      break;
  }
  return d;
}

function unary(op: UnaryOp, a: Tensor): Tensor {
  const x = floatData(op, a);
  const y = new Float32Array(x.length);
  unaryKernel(op, x, y);
  const out = new Tensor(y, a.shape);
  return record(out, op, [a], (g) => {
    const d = unaryDerivative(op, x, y);
    const gd = g.data as Float32Array;
    for (let i = 0; i < d.length; i++) d[i] *= gd[i];
    return [new Tensor(d, a.shape)];
  });
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
  const x = floatData("clamp", a);
  const lo = min ?? Number.NEGATIVE_INFINITY;
  const hi = max ?? Number.POSITIVE_INFINITY;
  if (lo > hi) throw new ShapeError(`clamp: min ${lo} > max ${hi}`);
  const y = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) y[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
  const out = new Tensor(y, a.shape);
  return record(out, "clamp", [a], (g) => {
    const gd = g.data as Float32Array;
    const d = new Float32Array(x.length);
    for (let i = 0; i < x.length; i++) d[i] = x[i] >= lo && x[i] <= hi ? gd[i] : 0;
    return [new Tensor(d, a.shape)];
  });
}

/** Elementwise select: cond (nonzero = true) ? a : b, broadcast together. */
export function where(cond: Tensor, a: TensorLike, b: TensorLike): Tensor {
  const at = toTensor(a);
  const bt = toTensor(b);
  const shape = broadcastShapes("where", broadcastShapes("where", cond.shape, at.shape), bt.shape);
  const c = broadcastTo(cond.dtype === "f32" ? cond.detach() : cond.to("f32"), shape).data as Float32Array;
  const x = broadcastTo(at.detach(), shape).data as Float32Array;
  const y = broadcastTo(bt.detach(), shape).data as Float32Array;
  const out = new Float32Array(c.length);
  for (let i = 0; i < out.length; i++) out[i] = c[i] !== 0 ? x[i] : y[i];
  const mask = new Tensor(c, shape);
  return record(new Tensor(out, shape), "where", [at, bt], (g) => {
    const gd = g.data as Float32Array;
    const ga = new Float32Array(gd.length);
    const gb = new Float32Array(gd.length);
    for (let i = 0; i < gd.length; i++) {
      if (mask.data[i] !== 0) ga[i] = gd[i];
      else gb[i] = gd[i];
    }
    return [
      at.requiresGrad ? sumTo(new Tensor(ga, shape), at.shape) : null,
      bt.requiresGrad ? sumTo(new Tensor(gb, shape), bt.shape) : null,
    ];
  });
}

export type CompareOp = "eq" | "ne" | "lt" | "le" | "gt" | "ge";

/** Elementwise comparison → f32 tensor of 0/1 (no gradient). */
export function compare(op: CompareOp, a: TensorLike, b: TensorLike): Tensor {
  const at = toTensor(a);
  const bt = toTensor(b);
  const shape = broadcastShapes(op, at.shape, bt.shape);
  const x = broadcastTo(at.dtype === "f32" ? at.detach() : at.to("f32"), shape).data as Float32Array;
  const y = broadcastTo(bt.dtype === "f32" ? bt.detach() : bt.to("f32"), shape).data as Float32Array;
  const out = new Float32Array(x.length);
  for (let i = 0; i < out.length; i++) {
    const u = x[i];
    const v = y[i];
    out[i] = (
      op === "eq"
        ? u === v
        : op === "ne"
          ? u !== v
          : op === "lt"
            ? u < v
            : op === "le"
              ? u <= v
              : op === "gt"
                ? u > v
                : u >= v
    )
      ? 1
      : 0;
  }
  return new Tensor(out, shape);
}

// Reductions over axes: the backend's `reduce` kernel over [outer, n, inner] per axis. keepDims as torch's keepdim.
import { noGrad, record } from "../autograd.js";
import { type ReduceOp, kernel } from "../backend.js";
import { normAxes } from "../shape.js";
import { Tensor, argOf, viewAs } from "../tensor.js";
import { abs, add, broadcastTo, compare, div, exp, floatTensor, log, mul, sub, where } from "./elementwise.js";
import { reshape } from "./movement.js";

export type Axes = number | readonly number[] | undefined;

function keptShape(shape: readonly number[], axes: readonly number[]): number[] {
  return shape.map((d, i) => (axes.includes(i) ? 1 : d));
}

function finalShape(shape: readonly number[], axes: readonly number[], keepDims: boolean): number[] {
  return keepDims ? keptShape(shape, axes) : shape.filter((_, i) => !axes.includes(i));
}

/** Reduce `t` over `axes` one axis at a time; the result has `shape` (kept dims or final dims). */
function reduceAxes(op: string, t: Tensor, axes: readonly number[], kind: ReduceOp, shape: number[]): Tensor {
  const x = floatTensor(op, t);
  let cur = x;
  let dims = [...t.shape];
  for (const axis of axes) {
    let outer = 1;
    for (let i = 0; i < axis; i++) outer *= dims[i];
    let inner = 1;
    for (let i = axis + 1; i < dims.length; i++) inner *= dims[i];
    const next = Tensor.empty([outer * inner]);
    kernel("reduce")(kind, argOf(cur) as Float32Array, argOf(next) as Float32Array, outer, dims[axis], inner);
    if (cur !== x) cur.dispose();
    cur = next;
    dims = [...dims];
    dims[axis] = 1;
  }
  // No axes: a copy, as the host loops made.
  if (cur === x) return viewAs(x.clone(), shape);
  return viewAs(cur, shape);
}

export function sum(t: Tensor, axes?: Axes, keepDims = false): Tensor {
  const ax = normAxes("sum", axes, t.rank);
  const out = reduceAxes("sum", t, ax, "sum", finalShape(t.shape, ax, keepDims));
  return record(out, "sum", [t], (g) => [broadcastTo(reshape(g, keptShape(t.shape, ax)), t.shape)]);
}

export function mean(t: Tensor, axes?: Axes, keepDims = false): Tensor {
  const ax = normAxes("mean", axes, t.rank);
  const count = ax.reduce((acc, a) => acc * t.shape[a], 1);
  return mul(sum(t, ax, keepDims), 1 / count);
}

function extremum(kind: "max" | "min", t: Tensor, axes: Axes, keepDims: boolean): Tensor {
  const ax = normAxes(kind, axes, t.rank);
  const kept = keptShape(t.shape, ax);
  const values = reduceAxes(kind, t, ax, kind, kept);
  const out = reshape(values.detach(), finalShape(t.shape, ax, keepDims));
  return record(
    out,
    kind,
    [t],
    (g) => {
      // The gradient goes to the extremal elements, split evenly among ties (torch amax/amin).
      const hit = compare("eq", t, values);
      const counts = reduceAxes(kind, hit, ax, "sum", kept);
      const share = div(reshape(g, kept), counts);
      return [where(hit, share, 0)];
    },
    undefined,
    [values],
  );
}

export function max(t: Tensor, axes?: Axes, keepDims = false): Tensor {
  return extremum("max", t, axes, keepDims);
}

export function min(t: Tensor, axes?: Axes, keepDims = false): Tensor {
  return extremum("min", t, axes, keepDims);
}

/** log Σ exp, stabilised by the (detached) max: m + log Σ exp(x − m). */
export function logsumexp(t: Tensor, axes?: Axes, keepDims = false): Tensor {
  const ax = normAxes("logsumexp", axes, t.rank);
  const kept = keptShape(t.shape, ax);
  const lse = noGrad(() => {
    const rawMax = reduceAxes("logsumexp", t, ax, "max", kept);
    // An all −inf (or inf / NaN) slice shifts by 0 instead, as torch does.
    const m = where(compare("lt", abs(rawMax), Number.POSITIVE_INFINITY), rawMax, 0);
    return add(log(sum(exp(sub(t, m)), ax, true)), m);
  });
  const out = reshape(lse.detach(), finalShape(t.shape, ax, keepDims));
  // Gradient: softmax over the reduced axes.
  return record(
    out,
    "logsumexp",
    [t],
    (g) => {
      const p = exp(sub(t.detach(), lse));
      return [mul(p, reshape(g, kept))];
    },
    undefined,
    [lse],
  );
}

/** Index of the max along one axis (first on ties), as i32. No gradient. */
export function argmax(t: Tensor, axis = -1, keepDims = false): Tensor {
  const [a] = normAxes("argmax", axis, t.rank);
  const x = floatTensor("argmax", t);
  let outer = 1;
  for (let i = 0; i < a; i++) outer *= t.shape[i];
  const n = t.shape[a];
  let inner = 1;
  for (let i = a + 1; i < t.rank; i++) inner *= t.shape[i];
  const out = Tensor.empty(finalShape(t.shape, [a], keepDims), "i32");
  kernel("argmax")(argOf(x) as Float32Array, argOf(out) as Int32Array, outer, n, inner);
  return out;
}

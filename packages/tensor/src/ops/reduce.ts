// Reductions over axes ([outer, n, inner] loops per axis). keepDims as torch's keepdim.
import { noGrad, record } from "../autograd.js";
import { normAxes } from "../shape.js";
import { Tensor } from "../tensor.js";
import { broadcastTo, exp, floatData, log, mul, sub } from "./elementwise.js";
import { reshape } from "./movement.js";

export type Axes = number | readonly number[] | undefined;

function keptShape(shape: readonly number[], axes: readonly number[]): number[] {
  return shape.map((d, i) => (axes.includes(i) ? 1 : d));
}

function finalShape(shape: readonly number[], axes: readonly number[], keepDims: boolean): number[] {
  return keepDims ? keptShape(shape, axes) : shape.filter((_, i) => !axes.includes(i));
}

function reduceAxis(
  x: Float32Array,
  shape: readonly number[],
  axis: number,
  kind: "sum" | "max" | "min",
): { out: Float32Array; shape: number[] } {
  let outer = 1;
  for (let i = 0; i < axis; i++) outer *= shape[i];
  const n = shape[axis];
  let inner = 1;
  for (let i = axis + 1; i < shape.length; i++) inner *= shape[i];
  const out = new Float32Array(outer * inner);
  if (kind !== "sum") out.fill(kind === "max" ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY);
  for (let o = 0; o < outer; o++) {
    const dst = o * inner;
    for (let j = 0; j < n; j++) {
      const src = (o * n + j) * inner;
      if (kind === "sum") for (let i = 0; i < inner; i++) out[dst + i] += x[src + i];
      else if (kind === "max")
        for (let i = 0; i < inner; i++)
          out[dst + i] = x[src + i] > out[dst + i] || Number.isNaN(x[src + i]) ? x[src + i] : out[dst + i];
      else
        for (let i = 0; i < inner; i++)
          out[dst + i] = x[src + i] < out[dst + i] || Number.isNaN(x[src + i]) ? x[src + i] : out[dst + i];
    }
  }
  const s = [...shape];
  s[axis] = 1;
  return { out, shape: s };
}

function reduceAll(t: Tensor, axes: readonly number[], kind: "sum" | "max" | "min"): Float32Array {
  let data = floatData(kind, t);
  let shape: readonly number[] = t.shape;
  for (const axis of axes) {
    const r = reduceAxis(data, shape, axis, kind);
    data = r.out;
    shape = r.shape;
  }
  if (axes.length === 0) data = Float32Array.from(data);
  return data;
}

export function sum(t: Tensor, axes?: Axes, keepDims = false): Tensor {
  const ax = normAxes("sum", axes, t.rank);
  const out = new Tensor(reduceAll(t, ax, "sum"), finalShape(t.shape, ax, keepDims));
  return record(out, "sum", [t], (g) => [broadcastTo(reshape(g, keptShape(t.shape, ax)), t.shape)]);
}

export function mean(t: Tensor, axes?: Axes, keepDims = false): Tensor {
  const ax = normAxes("mean", axes, t.rank);
  const count = ax.reduce((acc, a) => acc * t.shape[a], 1);
  return mul(sum(t, ax, keepDims), 1 / count);
}

function extremum(kind: "max" | "min", t: Tensor, axes: Axes, keepDims: boolean): Tensor {
  const ax = normAxes(kind, axes, t.rank);
  const values = reduceAll(t, ax, kind);
  const out = new Tensor(values, finalShape(t.shape, ax, keepDims));
  return record(out, kind, [t], (g) => {
    // The gradient goes to the extremal elements, split evenly among ties (torch amax/amin).
    const kept = keptShape(t.shape, ax);
    const m = broadcastTo(new Tensor(values, kept), t.shape).data as Float32Array;
    const x = floatData(kind, t);
    const hit = new Float32Array(x.length);
    for (let i = 0; i < x.length; i++) hit[i] = x[i] === m[i] ? 1 : 0;
    const counts = broadcastTo(new Tensor(reduceAll(new Tensor(hit, t.shape), ax, "sum"), kept), t.shape)
      .data as Float32Array;
    const gb = broadcastTo(reshape(g, kept), t.shape).data as Float32Array;
    const dx = new Float32Array(x.length);
    for (let i = 0; i < x.length; i++) dx[i] = hit[i] ? gb[i] / counts[i] : 0;
    return [new Tensor(dx, t.shape)];
  });
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
  const m = new Tensor(reduceAll(t, ax, "max"), keptShape(t.shape, ax));
  const md = m.data as Float32Array;
  for (let i = 0; i < md.length; i++) if (!Number.isFinite(md[i])) md[i] = 0;
  const s = noGrad(() => log(sum(exp(sub(t, m)), ax, true)));
  const out = new Tensor(Float32Array.from(s.data as Float32Array), s.shape);
  const od = out.data as Float32Array;
  for (let i = 0; i < od.length; i++) od[i] += md[i];
  const shaped = finalShape(t.shape, ax, keepDims);
  // Gradient: softmax over the reduced axes.
  const result = new Tensor(od, shaped);
  return record(result, "logsumexp", [t], (g) => {
    const lse = broadcastTo(new Tensor(od, keptShape(t.shape, ax)), t.shape);
    const p = exp(sub(t.detach(), lse));
    return [mul(p, broadcastTo(reshape(g, keptShape(t.shape, ax)), t.shape))];
  });
}

/** Index of the max along one axis (first on ties), as i32. No gradient. */
export function argmax(t: Tensor, axis = -1, keepDims = false): Tensor {
  const [a] = normAxes("argmax", axis, t.rank);
  const x = floatData("argmax", t);
  let outer = 1;
  for (let i = 0; i < a; i++) outer *= t.shape[i];
  const n = t.shape[a];
  let inner = 1;
  for (let i = a + 1; i < t.rank; i++) inner *= t.shape[i];
  const out = new Int32Array(outer * inner);
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
  return new Tensor(out, finalShape(t.shape, [a], keepDims), "i32");
}

import { ShapeError, fmtShape } from "./errors.js";

export type Shape = readonly number[];

export function sizeOf(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

export function stridesOf(shape: Shape): number[] {
  const strides = new Array<number>(shape.length);
  let s = 1;
  for (let i = shape.length - 1; i >= 0; i--) {
    strides[i] = s;
    s *= shape[i];
  }
  return strides;
}

export function sameShape(a: Shape, b: Shape): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** NumPy broadcasting: align trailing dims; each pair equal or one of them 1. */
export function broadcastShapes(op: string, a: Shape, b: Shape): number[] {
  const n = Math.max(a.length, b.length);
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const da = a[a.length - n + i] ?? 1;
    const db = b[b.length - n + i] ?? 1;
    if (da !== db && da !== 1 && db !== 1) {
      throw new ShapeError(
        `${op}: shapes ${fmtShape(a)} and ${fmtShape(b)} cannot be broadcast (dim ${i}: ${da} vs ${db})`,
      );
    }
    out[i] = da === 1 ? db : da;
  }
  return out;
}

/** Strides of `shape` viewed inside `outShape` (0 where broadcast). */
export function broadcastStrides(shape: Shape, outShape: Shape): number[] {
  const strides = stridesOf(shape);
  const out = new Array<number>(outShape.length).fill(0);
  const offset = outShape.length - shape.length;
  for (let i = 0; i < shape.length; i++) out[offset + i] = shape[i] === 1 ? 0 : strides[i];
  return out;
}

/** Normalise a possibly negative axis; throws naming the op when out of range. */
export function normAxis(op: string, axis: number, rank: number): number {
  const a = axis < 0 ? axis + rank : axis;
  if (!Number.isInteger(a) || a < 0 || a >= rank) {
    throw new ShapeError(`${op}: axis ${axis} out of range for a tensor of rank ${rank}`);
  }
  return a;
}

export function normAxes(op: string, axes: number | readonly number[] | undefined, rank: number): number[] {
  if (axes === undefined) return Array.from({ length: rank }, (_, i) => i);
  const list = typeof axes === "number" ? [axes] : axes;
  const out = [...new Set(list.map((a) => normAxis(op, a, rank)))];
  return out.sort((x, y) => x - y);
}

export function checkShape(op: string, shape: Shape): void {
  for (const d of shape) {
    if (!Number.isInteger(d) || d < 0) throw new ShapeError(`${op}: invalid shape ${fmtShape(shape)}`);
  }
}

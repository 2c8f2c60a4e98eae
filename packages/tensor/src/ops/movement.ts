// Shape and layout ops. reshape/squeeze/unsqueeze/flatten (and narrow of a contiguous block) are zero-copy
// views of the same storage; permute/transpose/slice/concat copy into fresh contiguous storage with the
// backend's strided `copy` kernel.
import { record } from "../autograd.js";
import { type CopyShape, kernel } from "../backend.js";
import type { StorageArray } from "../dtype.js";
import { IndexError, ShapeError, fmtShape } from "../errors.js";
import { normAxis, sizeOf, stridesOf } from "../shape.js";
import { Tensor, argOf } from "../tensor.js";

function copyInto(src: Tensor, dst: Tensor, shape: CopyShape): void {
  kernel("copy")(argOf(src) as StorageArray, argOf(dst) as StorageArray, shape);
}

/** Same storage, new shape; one dim may be -1. */
export function reshape(t: Tensor, shape: readonly number[]): Tensor {
  const resolved = [...shape];
  const unknown = resolved.indexOf(-1);
  if (unknown >= 0) {
    const known = resolved.reduce((acc, d, i) => (i === unknown ? acc : acc * d), 1);
    if (known === 0 || t.size % known !== 0) {
      throw new ShapeError(`reshape: cannot infer -1 reshaping ${fmtShape(t.shape)} to ${fmtShape(shape)}`);
    }
    resolved[unknown] = t.size / known;
  }
  if (sizeOf(resolved) !== t.size) {
    throw new ShapeError(`reshape: ${fmtShape(t.shape)} (${t.size} elements) cannot become ${fmtShape(shape)}`);
  }
  const out = new Tensor(t.storage, resolved, t.dtype, t.offset);
  return record(out, "reshape", [t], (g) => [new Tensor(g.storage, t.shape, g.dtype, g.offset)]);
}

export function flatten(t: Tensor, startAxis = 0, endAxis = -1): Tensor {
  const s = normAxis("flatten", startAxis, Math.max(t.rank, 1));
  const e = normAxis("flatten", endAxis, Math.max(t.rank, 1));
  if (t.rank === 0) return reshape(t, [1]);
  const merged = t.shape.slice(s, e + 1).reduce((a, b) => a * b, 1);
  return reshape(t, [...t.shape.slice(0, s), merged, ...t.shape.slice(e + 1)]);
}

export function unsqueeze(t: Tensor, axis: number): Tensor {
  const a = normAxis("unsqueeze", axis, t.rank + 1);
  const shape = [...t.shape];
  shape.splice(a, 0, 1);
  return reshape(t, shape);
}

export function squeeze(t: Tensor, axis?: number): Tensor {
  if (axis === undefined)
    return reshape(
      t,
      t.shape.filter((d) => d !== 1),
    );
  const a = normAxis("squeeze", axis, t.rank);
  if (t.shape[a] !== 1) throw new ShapeError(`squeeze: dim ${axis} of ${fmtShape(t.shape)} is ${t.shape[a]}, not 1`);
  const shape = [...t.shape];
  shape.splice(a, 1);
  return reshape(t, shape);
}

export function permute(t: Tensor, perm: readonly number[]): Tensor {
  if (perm.length !== t.rank || new Set(perm.map((p) => normAxis("permute", p, t.rank))).size !== t.rank) {
    throw new ShapeError(
      `permute: ${fmtShape(perm)} is not a permutation of the ${t.rank} dims of ${fmtShape(t.shape)}`,
    );
  }
  const p = perm.map((x) => normAxis("permute", x, t.rank));
  if (p.every((x, i) => x === i)) return t;
  const outShape = p.map((x) => t.shape[x]);
  const out = Tensor.empty(outShape, t.dtype);
  const inStrides = stridesOf(t.shape);
  copyInto(t, out, {
    shape: outShape,
    srcOffset: 0,
    srcStrides: p.map((x) => inStrides[x]),
    dstOffset: 0,
    dstStrides: stridesOf(outShape),
  });
  const inverse = new Array<number>(p.length);
  for (let i = 0; i < p.length; i++) inverse[p[i]] = i;
  return record(out, "permute", [t], (g) => [permute(g, inverse)]);
}

export function transpose(t: Tensor, axis0 = -2, axis1 = -1): Tensor {
  const a = normAxis("transpose", axis0, t.rank);
  const b = normAxis("transpose", axis1, t.rank);
  const perm = Array.from({ length: t.rank }, (_, i) => i);
  perm[a] = b;
  perm[b] = a;
  return permute(t, perm);
}

/** Slice along one axis: [start, end) with negative indices from the end (like t[..., start:end]). */
export function narrow(t: Tensor, axis: number, start: number, end?: number): Tensor {
  const a = normAxis("slice", axis, t.rank);
  const dim = t.shape[a];
  let s = start < 0 ? start + dim : start;
  let e = end === undefined ? dim : end < 0 ? end + dim : end;
  s = Math.max(0, Math.min(dim, s));
  e = Math.max(s, Math.min(dim, e));
  const outer = sizeOf(t.shape.slice(0, a));
  const inner = sizeOf(t.shape.slice(a + 1));
  const shape = [...t.shape];
  shape[a] = e - s;
  if (outer === 1) {
    // Contiguous block: a zero-copy view.
    const view = new Tensor(t.storage, shape, t.dtype, t.offset + s * inner);
    return record(view, "slice", [t], (g) => [padSlice(g, t.shape, a, s)]);
  }
  const out = Tensor.empty(shape, t.dtype);
  copyInto(t, out, {
    shape: [outer, e - s, inner],
    srcOffset: s * inner,
    srcStrides: [dim * inner, inner, 1],
    dstOffset: 0,
    dstStrides: [(e - s) * inner, inner, 1],
  });
  return record(out, "slice", [t], (g) => [padSlice(g, t.shape, a, s)]);
}

/** Multi-axis slice: one [start, end) pair (or null for all) per leading axis. */
export function slice(t: Tensor, ranges: readonly ([number, number?] | null)[]): Tensor {
  if (ranges.length > t.rank) throw new IndexError(`slice: ${ranges.length} ranges for a tensor of rank ${t.rank}`);
  let out = t;
  ranges.forEach((r, axis) => {
    if (r) out = narrow(out, axis, r[0], r[1]);
  });
  return out;
}

function padSlice(g: Tensor, shape: readonly number[], axis: number, start: number): Tensor {
  const outer = sizeOf(shape.slice(0, axis));
  const inner = sizeOf(shape.slice(axis + 1));
  const dim = shape[axis];
  const len = g.shape[axis];
  const out = Tensor.output(shape, "f32");
  copyInto(g, out, {
    shape: [outer, len, inner],
    srcOffset: 0,
    srcStrides: [len * inner, inner, 1],
    dstOffset: start * inner,
    dstStrides: [dim * inner, inner, 1],
  });
  return out;
}

export function concat(tensors: readonly Tensor[], axis = 0): Tensor {
  if (tensors.length === 0) throw new ShapeError("concat: no tensors");
  const first = tensors[0];
  const a = normAxis("concat", axis, first.rank);
  for (const t of tensors) {
    if (t.rank !== first.rank || t.dtype !== first.dtype || t.shape.some((d, i) => i !== a && d !== first.shape[i])) {
      throw new ShapeError(
        `concat: along axis ${axis}, ${fmtShape(t.shape)} ${t.dtype} does not match ${fmtShape(first.shape)} ${first.dtype}`,
      );
    }
  }
  const outer = sizeOf(first.shape.slice(0, a));
  const inner = sizeOf(first.shape.slice(a + 1));
  const total = tensors.reduce((acc, t) => acc + t.shape[a], 0);
  const shape = [...first.shape];
  shape[a] = total;
  // Every element is written by exactly one input's copy.
  const out = Tensor.empty(shape, first.dtype);
  let offset = 0;
  for (const t of tensors) {
    const len = t.shape[a] * inner;
    copyInto(t, out, {
      shape: [outer, len],
      srcOffset: 0,
      srcStrides: [len, 1],
      dstOffset: offset,
      dstStrides: [total * inner, 1],
    });
    offset += len;
  }
  return record(out, "concat", tensors, (g) => {
    let start = 0;
    return tensors.map((t) => {
      const piece = narrow(g, a, start, start + t.shape[a]);
      start += t.shape[a];
      return t.requiresGrad ? piece : null;
    });
  });
}

export function stack(tensors: readonly Tensor[], axis = 0): Tensor {
  if (tensors.length === 0) throw new ShapeError("stack: no tensors");
  const a = normAxis("stack", axis, tensors[0].rank + 1);
  return concat(
    tensors.map((t) => unsqueeze(t, a)),
    a,
  );
}

/** Split into pieces of the given sizes along `axis`. */
export function split(t: Tensor, sizes: readonly number[], axis = 0): Tensor[] {
  const a = normAxis("split", axis, t.rank);
  const total = sizes.reduce((x, y) => x + y, 0);
  if (total !== t.shape[a])
    throw new ShapeError(`split: sizes sum to ${total}, dim ${axis} of ${fmtShape(t.shape)} is ${t.shape[a]}`);
  let start = 0;
  return sizes.map((s) => {
    const piece = narrow(t, a, start, start + s);
    start += s;
    return piece;
  });
}

// Launching kernels over rows of large arrays: the rows are split into chunks whose windows fit one
// storage binding each, and every chunk is one dispatch.
import { BackendError } from "../../../errors.js";
import { BYTES_PER_ELEMENT, type GpuArray, type WebGPURuntime } from "../runtime.js";
import { headerTypes } from "./wgsl.js";

export interface Operand {
  array: GpuArray;
  /** Elements per row; 0 binds the whole array in every chunk (weights, lookup tables). */
  perRow: number;
}

export interface RowLaunch {
  rows: number;
  operands: Operand[];
  /** The kernel's own uniform fields after the header (values and type letters u/i/f). */
  params: number[];
  types: string;
  /** Workgroups for rows [r0, r1). */
  groups: (r0: number, r1: number) => [number, number?, number?];
  /** Largest rows per chunk the dispatch shape allows (e.g. 65535 for one workgroup per row). */
  maxRowsPerChunk?: number;
}

/**
 * Operands that share a buffer (in-place calls: out = x) must share one binding — WebGPU rejects two
 * writable bindings over the same range. Rewrites `code` so each later operand on a buffer uses the first
 * one's array (its declaration dropped, the survivor made read_write); returns the rewritten code and, per
 * operand, the index of the operand whose binding it uses.
 */
function dedupe(code: string, operands: Operand[]): [string, number[]] {
  const declOf = (i: number) =>
    new RegExp(`@group\\(0\\) @binding\\(${i + 1}\\) var<storage, (read|read_write)> (\\w+): array<(\\w+)>;\\n?`).exec(
      code,
    );
  const decls = operands.map((_, i) => declOf(i));
  const writes = (i: number) => decls[i]?.[1] === "read_write";
  // Read-only bindings may overlap (the shared placeholder of absent operands); writable ones may not.
  const owner = operands.map((op, i) => {
    const j = operands.findIndex((o, k) => k < i && o.array.buffer === op.array.buffer && (writes(i) || writes(k)));
    return j < 0 ? i : j;
  });
  let out = code;
  for (const [i, o] of owner.entries()) {
    if (o === i) continue;
    const m = decls[i];
    const k = decls[o];
    if (!m || !k || m[3] !== k[3])
      throw new BackendError("webgpu: in-place call of a kernel whose operands cannot share a binding");
    out = out.replace(m[0], "");
    out = out.replace(k[0], k[0].replace("var<storage, read>", "var<storage, read_write>"));
    out = out.replace(new RegExp(`\\b${m[2]}\\[`, "g"), `${k[2]}[`);
  }
  return [out, owner];
}

export function launchRows(rt: WebGPURuntime, code: string, launch: RowLaunch): void {
  const { rows, operands } = launch;
  if (rows <= 0) return;
  const [source, owner] = dedupe(code, operands);
  const pipeline = rt.pipeline(source);
  const align = rt.info.limits.minStorageBufferOffsetAlignment;
  let chunk = Math.min(rows, launch.maxRowsPerChunk ?? rows);
  for (const op of operands) {
    if (op.perRow <= 0) continue;
    const rowBytes = op.perRow * BYTES_PER_ELEMENT[op.array.dtype];
    const fit = Math.floor((rt.maxBinding - align - 8) / rowBytes);
    if (fit < 1)
      throw new BackendError(
        `webgpu: one row of ${op.perRow} ${op.array.dtype} exceeds maxStorageBufferBindingSize (${rt.maxBinding})`,
      );
    chunk = Math.min(chunk, fit);
  }
  for (let r0 = 0; r0 < rows; r0 += chunk) {
    const r1 = Math.min(rows, r0 + chunk);
    // Absolute element range of each operand in its buffer; shared buffers bind the union once.
    const range = (op: Operand): [number, number] =>
      op.perRow > 0
        ? [op.array.offset + r0 * op.perRow, op.array.offset + r1 * op.perRow]
        : [op.array.offset, op.array.offset + op.array.length];
    const offsets: number[] = [];
    const resources: GPUBufferBinding[] = [];
    for (const [i, op] of operands.entries()) {
      if (owner[i] !== i) continue;
      let [lo, hi] = range(op);
      for (const [j, other] of operands.entries())
        if (owner[j] === i) {
          const [l2, h2] = range(other);
          lo = Math.min(lo, l2);
          hi = Math.max(hi, h2);
        }
      const whole: GpuArray = { buffer: op.array.buffer, offset: 0, length: hi, dtype: op.array.dtype };
      const w = rt.window(whole, lo, hi);
      resources[i] = w.resource;
      for (const [j, other] of operands.entries())
        if (owner[j] === i) offsets[j] = other.array.offset + w.elementOffset;
    }
    rt.dispatch(
      pipeline,
      [r0, r1, ...offsets, ...launch.params],
      headerTypes(operands.length) + launch.types,
      resources,
      launch.groups(r0, r1),
    );
  }
}

/** Workgroups for `n` invocations of a 1-D kernel, folded into y past the per-dimension limit. */
export function grid1d(rt: WebGPURuntime, n: number, wg: number): [number, number] {
  const groups = Math.ceil(n / wg);
  const max = rt.info.limits.maxComputeWorkgroupsPerDimension;
  if (groups <= max) return [groups, 1];
  const y = Math.ceil(groups / max);
  return [Math.ceil(groups / y), y];
}

/** Workgroup size of the one-invocation-per-element kernels launched with launchElementwise. */
export const ELEMENTWISE_WG = 256;

/** One invocation per element i of `arrays` (all indexed by i), in chunks; the kernel's workgroup size is ELEMENTWISE_WG. */
export function launchElementwise(
  rt: WebGPURuntime,
  code: string,
  n: number,
  arrays: GpuArray[],
  params: number[] = [],
  types = "",
): void {
  launchRows(rt, code, {
    rows: n,
    operands: arrays.map((array) => ({ array, perRow: 1 })),
    params,
    types,
    groups: (r0, r1) => grid1d(rt, r1 - r0, ELEMENTWISE_WG),
  });
}

/** WGSL for the flat invocation index of a grid1d dispatch (`let i = ...`). */
export const FLAT_INDEX = "gid.x + gid.y * nw.x * WG";

/** A 4-byte placeholder bound where an optional operand is absent. */
export function dummy(rt: WebGPURuntime): GpuArray {
  return rt.dummy;
}

/**
 * Arrays a dispatch reads must not share a buffer with one it writes (WebGPU's usage rules);
 * returns `read` or a copy of it, plus a cleanup that releases the copy after encoding.
 */
export function distinctFrom(rt: WebGPURuntime, read: GpuArray, writes: GpuArray[]): [GpuArray, () => void] {
  if (!writes.some((w) => w.buffer === read.buffer)) return [read, () => {}];
  const copy = rt.copy(read);
  return [copy, () => rt.release(copy)];
}

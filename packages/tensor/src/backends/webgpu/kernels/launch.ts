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

export function launchRows(rt: WebGPURuntime, pipeline: GPUComputePipeline, launch: RowLaunch): void {
  const { rows, operands } = launch;
  if (rows <= 0) return;
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
    const windows = operands.map((op) =>
      op.perRow > 0 ? rt.window(op.array, r0 * op.perRow, r1 * op.perRow) : rt.window(op.array),
    );
    rt.dispatch(
      pipeline,
      [r0, r1, ...windows.map((w) => w.elementOffset), ...launch.params],
      headerTypes(operands.length) + launch.types,
      windows.map((w) => w.resource),
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

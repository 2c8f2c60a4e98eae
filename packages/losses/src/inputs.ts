// Shared input checks and conversions. Losses accept tensors of any leading shape and
// work on flat rows: logits [..., V] → [N, V], per-token tensors [...] → [N].
import { type Tensor, isTensor } from "@kiln/tensor";
import { LossInputError, LossOptionError } from "./errors.js";
import type { MaskLike } from "./result.js";

export function fmt(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

/** Rows and vocabulary of a logits tensor [..., V] (f32 only: all loss math is f32). */
export function logitRows(op: string, name: string, logits: Tensor): { rows: number; vocab: number } {
  if (logits.dtype !== "f32")
    throw new LossInputError(`${op}: ${name} must be f32, got ${logits.dtype} ${fmt(logits.shape)}`);
  if (logits.rank < 1) throw new LossInputError(`${op}: ${name} must have a vocabulary axis, got a scalar`);
  const vocab = logits.shape[logits.rank - 1];
  if (vocab < 1) throw new LossInputError(`${op}: ${name} has an empty vocabulary axis ${fmt(logits.shape)}`);
  return { rows: logits.size / vocab, vocab };
}

/** The i32 data of an index tensor with exactly `n` elements. */
export function indexData(op: string, name: string, t: Tensor, n: number): Int32Array {
  if (t.dtype !== "i32")
    throw new LossInputError(`${op}: ${name} must be i32 token ids, got ${t.dtype} ${fmt(t.shape)}`);
  if (t.size !== n) throw new LossInputError(`${op}: ${name} ${fmt(t.shape)} has ${t.size} elements, expected ${n}`);
  return t.dataSync() as Int32Array;
}

/** The f32 data of a per-token tensor with exactly `n` elements. */
export function floatValues(op: string, name: string, t: Tensor, n: number): Float32Array {
  if (t.dtype !== "f32") throw new LossInputError(`${op}: ${name} must be f32, got ${t.dtype} ${fmt(t.shape)}`);
  if (t.size !== n) throw new LossInputError(`${op}: ${name} ${fmt(t.shape)} has ${t.size} elements, expected ${n}`);
  return t.dataSync() as Float32Array;
}

/** A 0/1 mask of length `n` (nonzero / true = keep). `undefined` keeps everything. */
export function maskValues(op: string, name: string, mask: MaskLike | Tensor | undefined, n: number): Uint8Array {
  const out = new Uint8Array(n);
  if (mask === undefined) return out.fill(1);
  const values: ArrayLike<number | boolean> = isTensor(mask)
    ? mask.dtype === "f32" || mask.dtype === "i32"
      ? (mask.dataSync() as ArrayLike<number>)
      : mask.toFloat32Array()
    : "data" in (mask as object) && !Array.isArray(mask)
      ? (mask as { data: ArrayLike<number> }).data
      : (mask as ArrayLike<number | boolean>);
  if (values.length !== n) throw new LossInputError(`${op}: ${name} has ${values.length} elements, expected ${n}`);
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (v === true || (typeof v === "number" && v !== 0)) out[i] = 1;
  }
  return out;
}

export function checkPositiveInt(op: string, name: string, v: number): void {
  if (!Number.isInteger(v) || v < 1) throw new LossOptionError(`${op}: ${name} must be a positive integer, got ${v}`);
}

export function checkFinite(op: string, name: string, v: number): void {
  if (!Number.isFinite(v)) throw new LossOptionError(`${op}: ${name} must be a finite number, got ${v}`);
}

/** Default rows per chunk: about 16 MiB of f32 logits per chunk, at least one row. */
export function defaultChunkRows(vocab: number): number {
  return Math.max(1, Math.floor((4 << 20) / vocab));
}

/**
 * An `expectedGradient` option as float32 values per row (what a backward compares against
 * exactly); null when not given. One number applies to every row.
 */
export function expectedGradientRows(
  op: string,
  hint: number | ArrayLike<number> | undefined,
  rows: number,
): Float32Array | null {
  if (hint === undefined) return null;
  const e = new Float32Array(rows);
  if (typeof hint === "number") e.fill(hint);
  else {
    if (hint.length !== rows)
      throw new LossInputError(`${op}: expectedGradient has ${hint.length} entries, expected one per row (${rows})`);
    for (let i = 0; i < rows; i++) e[i] = hint[i];
  }
  for (let i = 0; i < rows; i++)
    if (!Number.isFinite(e[i])) throw new LossInputError(`${op}: expectedGradient[${i}] = ${e[i]} is not finite`);
  return e;
}

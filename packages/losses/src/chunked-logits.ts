// Logits that are never materialised whole. A causal LM's logits are `head(hidden)`; at real
// sizes ([T, V] = 2,048 × 151,936) they and their gradient are the largest tensors of a step.
// Every loss here also accepts `ChunkedLogits` — the hidden states plus the head — and then
// projects `chunkRows` rows at a time: the per-row loss of each chunk is computed and its logits
// dropped; the backward projects each chunk again and sends its gradient to the hidden rows
// (and to whatever the head trains). At most one chunk of logits (and its gradient) is alive.
import {
  Tensor,
  backwardMany,
  concat,
  isGradEnabled,
  isTensor,
  narrow,
  noGrad,
  reshape,
  takeGrad,
  withGrad,
} from "@kiln/tensor";
import { LossInputError } from "./errors.js";
import { checkPositiveInt, defaultChunkRows, fmt, logitRows } from "./inputs.js";

export interface ChunkedLogits {
  /** Hidden states [..., D]: one row per logits row (the final-normed states the head reads). */
  readonly hidden: Tensor;
  readonly vocab: number;
  /** Rows [R, D] → logits [R, V]: the model's output head, adapters included. */
  project(rows: Tensor): Tensor;
  /** Rows per chunk. Default: about 4 Mi logits (16 MiB) per chunk. */
  readonly chunkRows?: number;
}

/** A logits tensor [..., V], or the hidden states and head that make it chunk by chunk. */
export type Logits = Tensor | ChunkedLogits;

export function isChunkedLogits(x: unknown): x is ChunkedLogits {
  return (
    typeof x === "object" &&
    x !== null &&
    !isTensor(x) &&
    isTensor((x as ChunkedLogits).hidden) &&
    typeof (x as ChunkedLogits).project === "function"
  );
}

/** Rows, vocabulary and leading shape (the logits' shape without V) of either kind of logits. */
export function logitsLayout(
  op: string,
  name: string,
  logits: Logits,
): { rows: number; vocab: number; lead: number[] } {
  if (isTensor(logits)) return { ...logitRows(op, name, logits), lead: logits.shape.slice(0, -1) };
  if (!isChunkedLogits(logits))
    throw new LossInputError(`${op}: ${name} must be a tensor [..., V] or { hidden, vocab, project }`);
  const h = logits.hidden;
  if (h.rank < 1 || h.dtype !== "f32")
    throw new LossInputError(`${op}: ${name}.hidden must be f32 [..., D], got ${h.dtype} ${fmt(h.shape)}`);
  checkPositiveInt(op, `${name}.vocab`, logits.vocab);
  if (logits.chunkRows !== undefined) checkPositiveInt(op, `${name}.chunkRows`, logits.chunkRows);
  const D = h.shape[h.rank - 1];
  return { rows: D > 0 ? h.size / D : 0, vocab: logits.vocab, lead: h.shape.slice(0, -1) };
}

interface Chunks {
  flat: Tensor;
  starts: number[];
  rows: number;
  size: number;
}

function chunksOf(op: string, logits: ChunkedLogits): Chunks {
  const { rows } = logitsLayout(op, "logits", logits);
  const D = logits.hidden.shape[logits.hidden.rank - 1];
  const size = logits.chunkRows ?? defaultChunkRows(logits.vocab);
  const starts: number[] = [];
  for (let r = 0; r < rows; r += size) starts.push(r);
  return { flat: reshape(logits.hidden, [rows, D]), starts, rows, size };
}

function project(op: string, logits: ChunkedLogits, rows: Tensor): Tensor {
  const out = logits.project(rows);
  if (out.rank !== 2 || out.shape[0] !== rows.shape[0] || out.shape[1] !== logits.vocab) {
    throw new LossInputError(
      `${op}: project() turned ${rows.shape[0]} hidden rows into ${fmt(out.shape)}, expected [${rows.shape[0]}, ${logits.vocab}]`,
    );
  }
  return out;
}

/**
 * Per-row values of every chunk, concatenated to [rows]: `fn(chunkLogits [R, V], start, end)` must
 * return [R]. Differentiable; the backward recomputes each chunk's logits.
 */
export function mapLogitChunks(
  op: string,
  logits: ChunkedLogits,
  fn: (chunk: Tensor, start: number, end: number) => Tensor,
): Tensor {
  const { flat, starts, rows, size } = chunksOf(op, logits);
  // Each chunk's logits are disposed as soon as they are used (after its values in the forward,
  // after its backward in the backward), so at most one chunk of them is ever alive.
  const run = (h: Tensor, s: number) => {
    const e = Math.min(s + size, rows);
    const chunk = project(op, logits, h);
    const v = fn(chunk, s, e);
    if (v.size !== e - s)
      throw new LossInputError(`${op}: a chunk of ${e - s} rows gave ${v.size} values, expected one per row`);
    return { values: reshape(v, [e - s]), chunk };
  };
  const values = noGrad(() => {
    const parts = starts.map((s) => {
      const r = run(narrow(flat, 0, s, Math.min(s + size, rows)), s);
      r.chunk.dispose();
      return r.values;
    });
    return parts.length === 1 ? parts[0] : concat(parts, 0);
  });
  if (!isGradEnabled()) return values;
  const hidden = logits.hidden;
  const result = new Tensor(values.storage, values.shape, values.dtype, values.offset);
  // On the tape even when `hidden` needs no gradient: the head itself may train (as in checkpoint()).
  result.requiresGrad = true;
  result.node = {
    op: `${op}(chunked logits)`,
    inputs: [hidden],
    backward: (g) => {
      const base = flat.detach();
      const grads: Tensor[] = [];
      for (const s of starts) {
        const e = Math.min(s + size, rows);
        const h = narrow(base, 0, s, e).detach();
        h.requiresGrad = hidden.requiresGrad;
        const { values: v, chunk } = withGrad(() => run(h, s));
        if (v.requiresGrad) backwardMany([v], [narrow(g, 0, s, e)]);
        chunk.dispose();
        const hg = takeGrad(h);
        if (hidden.requiresGrad) grads.push(hg ?? Tensor.zeros([e - s, h.shape[1]]));
      }
      if (!hidden.requiresGrad) return [null];
      return [reshape(grads.length === 1 ? grads[0] : concat(grads, 0), hidden.shape)];
    },
  };
  return result;
}

/** Visit every chunk's logits [R, V] without a tape (metrics). */
export function forEachLogitChunk(
  op: string,
  logits: ChunkedLogits,
  fn: (chunk: Tensor, start: number, end: number) => void,
): void {
  const { flat, starts, rows, size } = chunksOf(op, logits);
  noGrad(() => {
    for (const s of starts) {
      const e = Math.min(s + size, rows);
      fn(project(op, logits, narrow(flat, 0, s, e)), s, e);
    }
  });
}

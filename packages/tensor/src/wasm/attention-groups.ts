// Attention by (batch, kv head) groups, one group after another on one thread: each tile's products as
// single-threaded cblas_sgemm calls and its softmax pieces as the module's attn_tile_* exports. The native
// backend runs groups on the caller and on a worker at once (docs/ARCHITECTURE.md, "Attention on BLAS"): a
// group's tiles touch only their own output rows and their own kv head's dk/dv, and run in the order the
// one-thread tiled attention runs them, so the bits do not depend on how the groups are shared out.
//
// `attentionGroupsJob` and `sgemmOnMemory` are embedded in the worker's source by their text
// (wasm/worker-source.ts), so they stay self-contained: no imports, no module-level names, no nested functions
// (the types below are erased).

import type { AttentionShape } from "../kernel-contract.js";
import type { TypedSgemm } from "./types.js";

/** C = op(A)·op(B) + beta·C, row-major, alpha 1; op 111 = none, 112 = transpose; A, B, C as byte offsets. */
export type SgemmAt = (
  transA: number,
  transB: number,
  m: number,
  n: number,
  k: number,
  a: number,
  lda: number,
  b: number,
  ldb: number,
  beta: number,
  c: number,
  ldc: number,
) => void;

/**
 * cblas_sgemm (as koffi binds it: typed arrays, row-major) on byte offsets into `memory`, each operand a view
 * from its offset to the last element op(X) reads; alpha 1. The workers' `sgemm` op and the caller's share of a
 * group job both call the library through it.
 */
export function sgemmOnMemory(
  memory: ArrayBufferLike,
  typed: TypedSgemm,
  ta: number,
  tb: number,
  m: number,
  n: number,
  k: number,
  pa: number,
  lda: number,
  pb: number,
  ldb: number,
  beta: number,
  pc: number,
  ldc: number,
): void {
  const [aRows, aCols] = ta === 112 ? [k, m] : [m, k];
  const [bRows, bCols] = tb === 112 ? [n, k] : [k, n];
  const a = new Float32Array(memory, pa, aRows === 0 ? 0 : (aRows - 1) * lda + aCols);
  const b = new Float32Array(memory, pb, bRows === 0 ? 0 : (bRows - 1) * ldb + bCols);
  const c = new Float32Array(memory, pc, m === 0 ? 0 : (m - 1) * ldc + n);
  typed(101, ta, tb, m, n, k, 1, a, lda, b, ldb, beta, c, ldc);
}

/** The module exports a group job calls (scripts/wat/attention-tiles.mjs). */
export interface AttentionTileExports {
  attn_tile_softmax(S: number, rows: number, end: number, scale: number, vis0: number, lse: number): void;
  attn_tile_probs(S: number, rows: number, end: number, scale: number, vis0: number, lse: number): void;
  attn_tile_dscores(
    P: number,
    dP: number,
    dOut: number,
    out: number,
    rows: number,
    end: number,
    d: number,
    scale: number,
  ): void;
}

/**
 * One group job: the call's shape without its batch (groups index batch × kv head) and arrays as byte offsets
 * into the kernels' memory (the gradient ones 0 in a forward job).
 */
export interface GroupJob extends Omit<AttentionShape, "batch"> {
  backward: boolean;
  q: number;
  k: number;
  v: number;
  out: number;
  lse: number;
  dOut: number;
  dq: number;
  dk: number;
  dv: number;
  blockRows: number;
  /** Groups [group0, group1). */
  group0: number;
  group1: number;
  /** Scratch tiles of blockRows·tk f32 each. */
  P: number;
  dP: number;
}

/** A job as the flat argument list attentionGroupsJob reads (and a worker receives). */
export function groupJobArgs(j: GroupJob): number[] {
  return [
    j.backward ? 1 : 0,
    j.q,
    j.k,
    j.v,
    j.out,
    j.lse,
    j.dOut,
    j.dq,
    j.dk,
    j.dv,
    j.heads,
    j.kvHeads,
    j.tq,
    j.tk,
    j.headDim,
    j.scale,
    j.causal ? 1 : 0,
    j.blockRows,
    j.group0,
    j.group1,
    j.P,
    j.dP,
  ];
}

/**
 * Runs groups [group0, group1) (group g = batch·kvHeads + kv head) of a forward (out, lse) or backward (dq, and
 * accumulation into dk, dv, which the caller zeroed) attention; `a` is groupJobArgs' list.
 */
export function attentionGroupsJob(
  a: readonly number[],
  memory: ArrayBufferLike,
  sgemm: SgemmAt,
  ex: AttentionTileExports,
): void {
  const backward = a[0] !== 0;
  const q = a[1];
  const k = a[2];
  const v = a[3];
  const out = a[4];
  const lse = a[5];
  const dOut = a[6];
  const dq = a[7];
  const dk = a[8];
  const dv = a[9];
  const heads = a[10];
  const kvHeads = a[11];
  const tq = a[12];
  const tk = a[13];
  const d = a[14];
  const scale = a[15];
  const causal = a[16] !== 0;
  const blk = a[17];
  const P = a[20];
  const dP = a[21];
  const perKv = heads / kvHeads;
  const f32 = new Float32Array(memory);
  for (let g = a[18]; g < a[19]; g++) {
    const b = Math.floor(g / kvHeads);
    const kvh = g - b * kvHeads;
    const kAt = g * tk * d * 4;
    for (let h = kvh * perKv; h < (kvh + 1) * perKv; h++)
      for (let i0 = 0; i0 < tq; i0 += blk) {
        const rows = Math.min(blk, tq - i0);
        const end = causal ? Math.min(tk, i0 + rows - 1 + (tk - tq) + 1) : tk;
        const row = (b * heads + h) * tq + i0;
        const qAt = row * d * 4;
        if (end <= 0) {
          if (backward) f32.fill(0, (dq + qAt) >>> 2, ((dq + qAt) >>> 2) + rows * d);
          else {
            f32.fill(0, (out + qAt) >>> 2, ((out + qAt) >>> 2) + rows * d);
            f32.fill(Number.NEGATIVE_INFINITY, (lse >>> 2) + row, (lse >>> 2) + row + rows);
          }
          continue;
        }
        const vis0 = causal ? i0 + (tk - tq) + 1 : end;
        sgemm(111, 112, rows, end, d, q + qAt, d, k + kAt, d, 0, P, end);
        if (!backward) {
          ex.attn_tile_softmax(P, rows, end, scale, vis0, lse + row * 4);
          sgemm(111, 111, rows, d, end, P, end, v + kAt, d, 0, out + qAt, d);
          continue;
        }
        ex.attn_tile_probs(P, rows, end, scale, vis0, lse + row * 4);
        sgemm(111, 112, rows, end, d, dOut + qAt, d, v + kAt, d, 0, dP, end);
        sgemm(112, 111, end, d, rows, P, end, dOut + qAt, d, 1, dv + kAt, d);
        ex.attn_tile_dscores(P, dP, dOut + qAt, out + qAt, rows, end, d, scale);
        sgemm(111, 111, rows, d, end, dP, end, k + kAt, d, 0, dq + qAt, d);
        sgemm(112, 111, end, d, rows, dP, end, q + qAt, d, 1, dk + kAt, d);
      }
  }
}

// Attention built on a backend's GEMM, tiled over blocks of queries: for each
// (batch, head, query block) the scores S = Q_blk·Kᵀ are a [blk × tk] tile, so extra
// memory is O(blk·T) (linear in T), and all the O(T²·D) work runs in the fast matmul.
// Backward recomputes P from the saved row logsumexp (FlashAttention-2's recurrence):
// dV += Pᵀ·dO, dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(dO ⊙ O)), dQ = dS·K·s, dK += dSᵀ·Q·s.
import type { AttentionShape, Kernels } from "../backend.js";
import { groupJobArgs } from "../wasm/attention-groups.js";
import type { AttentionTiles, TypedSgemm } from "../wasm/types.js";

const BLOCK = 64;

type Matmul = Kernels["matmul"];

function keyEnd(i: number, s: AttentionShape): number {
  return s.causal ? Math.min(s.tk, i + (s.tk - s.tq) + 1) : s.tk;
}

/** Scores for queries [i0, i1) against keys [0, end): scaled, masked (−inf). */
function scores(
  matmul: Matmul,
  q: Float32Array,
  k: Float32Array,
  keyMask: Uint8Array | null,
  qOff: number,
  kOff: number,
  b: number,
  i0: number,
  rows: number,
  end: number,
  s: AttentionShape,
  out: Float32Array,
): void {
  const d = s.headDim;
  matmul(q.subarray(qOff, qOff + rows * d), k.subarray(kOff, kOff + end * d), out, {
    batch: 1,
    m: rows,
    n: end,
    k: d,
    transB: true,
  });
  for (let r = 0; r < rows; r++) {
    const o = r * end;
    const visible = keyEnd(i0 + r, s);
    for (let j = 0; j < end; j++) {
      if (j >= visible || (keyMask && keyMask[b * s.tk + j] === 0)) out[o + j] = Number.NEGATIVE_INFINITY;
      else out[o + j] *= s.scale;
    }
  }
}

export function makeGemmAttention(matmul: Matmul): Pick<Kernels, "attentionForward" | "attentionBackward"> {
  return {
    attentionForward(q, k, v, keyMask, out, lse, s) {
      const { batch, heads, kvHeads, tq, tk, headDim: d } = s;
      const group = heads / kvHeads;
      const tile = new Float32Array(BLOCK * tk);
      for (let b = 0; b < batch; b++)
        for (let h = 0; h < heads; h++) {
          const kOff = (b * kvHeads + Math.floor(h / group)) * tk * d;
          for (let i0 = 0; i0 < tq; i0 += BLOCK) {
            const rows = Math.min(BLOCK, tq - i0);
            const end = keyEnd(i0 + rows - 1, s);
            const qOff = ((b * heads + h) * tq + i0) * d;
            const S = tile.subarray(0, rows * end);
            scores(matmul, q, k, keyMask, qOff, kOff, b, i0, rows, end, s, S);
            for (let r = 0; r < rows; r++) {
              const o = r * end;
              let m = Number.NEGATIVE_INFINITY;
              for (let j = 0; j < end; j++) if (S[o + j] > m) m = S[o + j];
              const row = (b * heads + h) * tq + i0 + r;
              if (m === Number.NEGATIVE_INFINITY) {
                S.fill(0, o, o + end);
                lse[row] = Number.NEGATIVE_INFINITY;
                continue;
              }
              let sum = 0;
              for (let j = 0; j < end; j++) sum += S[o + j] = Math.exp(S[o + j] - m);
              const inv = 1 / sum;
              for (let j = 0; j < end; j++) S[o + j] *= inv;
              lse[row] = m + Math.log(sum);
            }
            matmul(S, v.subarray(kOff, kOff + end * d), out.subarray(qOff, qOff + rows * d), {
              batch: 1,
              m: rows,
              n: d,
              k: end,
            });
          }
        }
    },

    attentionBackward(q, k, v, keyMask, out, lse, dOut, dq, dk, dv, s) {
      const { batch, heads, kvHeads, tq, tk, headDim: d, scale } = s;
      const group = heads / kvHeads;
      const P = new Float32Array(BLOCK * tk);
      const dP = new Float32Array(BLOCK * tk);
      dk.fill(0);
      dv.fill(0);
      for (let b = 0; b < batch; b++)
        for (let h = 0; h < heads; h++) {
          const kOff = (b * kvHeads + Math.floor(h / group)) * tk * d;
          for (let i0 = 0; i0 < tq; i0 += BLOCK) {
            const rows = Math.min(BLOCK, tq - i0);
            const end = keyEnd(i0 + rows - 1, s);
            const qOff = ((b * heads + h) * tq + i0) * d;
            const Pt = P.subarray(0, rows * end);
            const dPt = dP.subarray(0, rows * end);
            scores(matmul, q, k, keyMask, qOff, kOff, b, i0, rows, end, s, Pt);
            for (let r = 0; r < rows; r++) {
              const L = lse[(b * heads + h) * tq + i0 + r];
              const o = r * end;
              if (L === Number.NEGATIVE_INFINITY) Pt.fill(0, o, o + end);
              else for (let j = 0; j < end; j++) Pt[o + j] = Math.exp(Pt[o + j] - L);
            }
            const dOblk = dOut.subarray(qOff, qOff + rows * d);
            const kSlice = k.subarray(kOff, kOff + end * d);
            matmul(Pt, dOblk, dv.subarray(kOff, kOff + end * d), {
              batch: 1,
              m: end,
              n: d,
              k: rows,
              transA: true,
              accumulate: true,
            });
            matmul(dOblk, v.subarray(kOff, kOff + end * d), dPt, { batch: 1, m: rows, n: end, k: d, transB: true });
            for (let r = 0; r < rows; r++) {
              let D = 0;
              for (let c = 0; c < d; c++) D += dOut[qOff + r * d + c] * out[qOff + r * d + c];
              const o = r * end;
              for (let j = 0; j < end; j++) dPt[o + j] = Pt[o + j] * (dPt[o + j] - D) * scale;
            }
            matmul(dPt, kSlice, dq.subarray(qOff, qOff + rows * d), { batch: 1, m: rows, n: d, k: end });
            matmul(dPt, q.subarray(qOff, qOff + rows * d), dk.subarray(kOff, kOff + end * d), {
              batch: 1,
              m: end,
              n: d,
              k: rows,
              transA: true,
              accumulate: true,
            });
          }
        }
    },
  };
}

/**
 * Score tiles of at most this many elements (1 MiB): query blocks are as tall as that allows (at least BLOCK
 * rows), so a short sequence is one GEMM per head and direction instead of one per 64 queries.
 */
const TILE_ELEMENTS = 1 << 18;

/**
 * Threads that run whole (batch, kv head) groups of tiles side by side (the native backend's workers, which load
 * the same BLAS): see wasm/attention-groups.ts.
 */
export interface AttentionGroupThreads {
  /** Worker threads; each takes a share of the groups beside the caller. */
  readonly workers: number;
  /** Whether the workers are free now (no job of another kernel pending on them). */
  free(): boolean;
  /** Starts a group job on worker `index`; returns the wait for it. */
  start(index: number, args: readonly number[]): () => void;
  /** The caller's cblas_sgemm, set to one library thread (what the workers' calls run on). */
  sgemm(): TypedSgemm;
}

/**
 * Below this many rows the native matmul runs a product as GEMVs, not one sgemm; a group job calls sgemm
 * directly, so it takes only calls whose every product the one-thread path would also run as an sgemm
 * (backends/native/gemm.ts SKINNY_F32_ROWS), and the bits do not depend on the thread count.
 */
const GROUP_MIN_ROWS = 4;

/**
 * Attention whose five products per tile run on `matmul` (the native backend: BLAS) and whose softmax, exp
 * and dS run in the wasm module on the same resident memory (`tiles`). Without a key mask only; each
 * function returns false, having done nothing, when an array is not resident (the caller falls back).
 */
export function makeTiledAttention(
  matmul: Matmul,
  tiles: AttentionTiles,
  tileElements = TILE_ELEMENTS,
  groupThreads: AttentionGroupThreads | null = null,
): {
  forward(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    out: Float32Array,
    lse: Float32Array,
    s: AttentionShape,
  ): boolean;
  backward(
    q: Float32Array,
    k: Float32Array,
    v: Float32Array,
    out: Float32Array,
    lse: Float32Array,
    dOut: Float32Array,
    dq: Float32Array,
    dk: Float32Array,
    dv: Float32Array,
    s: AttentionShape,
  ): boolean;
} {
  const blockRows = (s: AttentionShape) =>
    Math.max(1, Math.min(s.tq, Math.max(BLOCK, Math.floor(tileElements / Math.max(1, s.tk)))));
  /** Row r of a block starting at query i0 sees keys j < vis0 + r (the wasm side clamps to [0, end]). */
  const firstVisible = (i0: number, s: AttentionShape, end: number) => (s.causal ? i0 + (s.tk - s.tq) + 1 : end);
  /** The (batch, head, query block) tiles of one call, in the order the products run. */
  const tilesOf = (s: AttentionShape) => {
    const { batch, heads, kvHeads, tq, headDim: d } = s;
    const group = heads / kvHeads;
    const blk = blockRows(s);
    const list: { kOff: number; qOff: number; row: number; rows: number; end: number; vis0: number }[] = [];
    for (let b = 0; b < batch; b++)
      for (let h = 0; h < heads; h++) {
        const kOff = (b * kvHeads + Math.floor(h / group)) * s.tk * d;
        for (let i0 = 0; i0 < tq; i0 += blk) {
          const rows = Math.min(blk, tq - i0);
          const end = keyEnd(i0 + rows - 1, s);
          list.push({
            kOff,
            qOff: ((b * heads + h) * tq + i0) * d,
            row: (b * heads + h) * tq + i0,
            rows,
            end,
            vis0: firstVisible(i0, s, end),
          });
        }
      }
    return { list, blk };
  };
  /**
   * With two or more (batch, kv head) groups and free workers: the groups shared out between the caller and the
   * workers, each thread running its groups' tiles one after another (wasm/attention-groups.ts). Returns false
   * (nothing done) where that does not apply.
   */
  const byGroups = (
    backward: boolean,
    arrays: { q: Float32Array; k: Float32Array; v: Float32Array; out: Float32Array; lse: Float32Array },
    grads: { dOut: Float32Array; dq: Float32Array; dk: Float32Array; dv: Float32Array } | null,
    s: AttentionShape,
  ): boolean => {
    const groups = s.batch * s.kvHeads;
    if (!groupThreads || groups < 2 || !groupThreads.free()) return false;
    const { list, blk } = tilesOf(s);
    if (list.some((t) => t.end > 0 && (t.rows < GROUP_MIN_ROWS || t.end < GROUP_MIN_ROWS))) return false;
    const parts = Math.min(groups, groupThreads.workers + 1);
    const scratch = Array.from({ length: parts }, () => [tiles.scratch(blk * s.tk), tiles.scratch(blk * s.tk)]);
    const waits: (() => void)[] = [];
    let failure: unknown = null;
    try {
      if (grads) {
        tiles.zero(grads.dk);
        tiles.zero(grads.dv);
      }
      const job = (t: number) =>
        groupJobArgs({
          ...s,
          backward,
          q: arrays.q.byteOffset,
          k: arrays.k.byteOffset,
          v: arrays.v.byteOffset,
          out: arrays.out.byteOffset,
          lse: arrays.lse.byteOffset,
          dOut: grads?.dOut.byteOffset ?? 0,
          dq: grads?.dq.byteOffset ?? 0,
          dk: grads?.dk.byteOffset ?? 0,
          dv: grads?.dv.byteOffset ?? 0,
          blockRows: blk,
          group0: Math.floor((t * groups) / parts),
          group1: Math.floor(((t + 1) * groups) / parts),
          P: scratch[t][0].byteOffset,
          dP: scratch[t][1].byteOffset,
        });
      for (let t = 1; t < parts; t++) waits.push(groupThreads.start(t - 1, job(t)));
      tiles.groups(job(0), groupThreads.sgemm());
    } catch (err) {
      failure = err;
    }
    // Every started job is waited for, also after an error: they write into the outputs and the scratch.
    for (const wait of waits) {
      try {
        wait();
      } catch (err) {
        failure ??= err;
      }
    }
    for (const [P, dP] of scratch.reverse()) {
      tiles.release(dP);
      tiles.release(P);
    }
    if (failure) throw failure;
    return true;
  };
  // The softmax-side work of tile i runs on a worker (tiles.start) while this thread runs BLAS products of the
  // tiles next to it, with two score buffers in turn; every product and every accumulation into dk/dv runs in
  // the same order as one tile after the other, so the results do not depend on the thread count.
  return {
    forward(q, k, v, out, lse, s) {
      if (!tiles.owns(q, k, v, out, lse)) return false;
      if (byGroups(false, { q, k, v, out, lse }, null, s)) return true;
      const { headDim: d, scale } = s;
      const { list, blk } = tilesOf(s);
      const buffers = [tiles.scratch(blk * s.tk), tiles.scratch(blk * s.tk)];
      /** The tile whose softmax is running, its buffer and the wait for it. */
      let running: { i: number; wait: () => void } | null = null;
      const finish = (r: { i: number; wait: () => void }) => {
        r.wait();
        const t = list[r.i];
        matmul(
          buffers[r.i & 1].subarray(0, t.rows * t.end),
          v.subarray(t.kOff, t.kOff + t.end * d),
          out.subarray(t.qOff, t.qOff + t.rows * d),
          {
            batch: 1,
            m: t.rows,
            n: d,
            k: t.end,
          },
        );
      };
      try {
        for (let i = 0; i < list.length; i++) {
          const t = list[i];
          if (t.end <= 0) {
            out.fill(0, t.qOff, t.qOff + t.rows * d);
            lse.fill(Number.NEGATIVE_INFINITY, t.row, t.row + t.rows);
            continue;
          }
          const S = buffers[i & 1].subarray(0, t.rows * t.end);
          matmul(q.subarray(t.qOff, t.qOff + t.rows * d), k.subarray(t.kOff, t.kOff + t.end * d), S, {
            batch: 1,
            m: t.rows,
            n: t.end,
            k: d,
            transB: true,
          });
          const previous = running;
          previous?.wait();
          running = {
            i,
            wait: tiles.start.softmax(S, t.rows, t.end, scale, t.vis0, lse.subarray(t.row, t.row + t.rows)),
          };
          if (previous) finish(previous);
        }
        if (running) finish(running);
      } finally {
        running?.wait();
        tiles.release(buffers[1]);
        tiles.release(buffers[0]);
      }
      return true;
    },

    backward(q, k, v, out, lse, dOut, dq, dk, dv, s) {
      if (!tiles.owns(q, k, v, out, lse, dOut, dq, dk, dv)) return false;
      if (byGroups(true, { q, k, v, out, lse }, { dOut, dq, dk, dv }, s)) return true;
      const { headDim: d, scale } = s;
      const { list, blk } = tilesOf(s);
      const P = [tiles.scratch(blk * s.tk), tiles.scratch(blk * s.tk)];
      const dP = [tiles.scratch(blk * s.tk), tiles.scratch(blk * s.tk)];
      tiles.zero(dk);
      tiles.zero(dv);
      /** The tile whose dS is being computed and the wait for it. */
      let running: { i: number; wait: () => void } | null = null;
      let wait: (() => void) | null = null;
      // dQ = dS·K and dK += dSᵀ·Q of a tile once its dS is done.
      const finish = (r: { i: number; wait: () => void }) => {
        r.wait();
        const t = list[r.i];
        const dS = dP[r.i & 1].subarray(0, t.rows * t.end);
        matmul(dS, k.subarray(t.kOff, t.kOff + t.end * d), dq.subarray(t.qOff, t.qOff + t.rows * d), {
          batch: 1,
          m: t.rows,
          n: d,
          k: t.end,
        });
        matmul(dS, q.subarray(t.qOff, t.qOff + t.rows * d), dk.subarray(t.kOff, t.kOff + t.end * d), {
          batch: 1,
          m: t.end,
          n: d,
          k: t.rows,
          transA: true,
          accumulate: true,
        });
      };
      try {
        for (let i = 0; i < list.length; i++) {
          const t = list[i];
          if (t.end <= 0) {
            dq.fill(0, t.qOff, t.qOff + t.rows * d);
            continue;
          }
          const Pt = P[i & 1].subarray(0, t.rows * t.end);
          const dPt = dP[i & 1].subarray(0, t.rows * t.end);
          const qBlk = q.subarray(t.qOff, t.qOff + t.rows * d);
          const dOBlk = dOut.subarray(t.qOff, t.qOff + t.rows * d);
          const kSlice = k.subarray(t.kOff, t.kOff + t.end * d);
          const vSlice = v.subarray(t.kOff, t.kOff + t.end * d);
          matmul(qBlk, kSlice, Pt, { batch: 1, m: t.rows, n: t.end, k: d, transB: true });
          // Starting the exp waits for the previous tile's dS (one worker job at a time).
          const previous = running;
          previous?.wait();
          wait = tiles.start.probs(Pt, t.rows, t.end, scale, t.vis0, lse.subarray(t.row, t.row + t.rows));
          matmul(dOBlk, vSlice, dPt, { batch: 1, m: t.rows, n: t.end, k: d, transB: true });
          if (previous) finish(previous);
          running = null;
          wait();
          wait = null;
          matmul(Pt, dOBlk, dv.subarray(t.kOff, t.kOff + t.end * d), {
            batch: 1,
            m: t.end,
            n: d,
            k: t.rows,
            transA: true,
            accumulate: true,
          });
          running = {
            i,
            wait: tiles.start.dscores(
              Pt,
              dPt,
              dOBlk,
              out.subarray(t.qOff, t.qOff + t.rows * d),
              t.rows,
              t.end,
              d,
              scale,
            ),
          };
        }
        if (running) finish(running);
        running = null;
      } finally {
        wait?.();
        running?.wait();
        tiles.release(dP[1]);
        tiles.release(dP[0]);
        tiles.release(P[1]);
        tiles.release(P[0]);
      }
      return true;
    },
  };
}

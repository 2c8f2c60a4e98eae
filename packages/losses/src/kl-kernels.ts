// Forward and reverse KL over the full vocabulary through the tensor backend's fused softmax
// cross-entropy kernels (`crossEntropyForward` gives each row's logsumexp, `crossEntropyBackward`
// writes g·softmax − g·onehot). Every exp runs inside those kernels, so the divergence is as fast
// as the active backend's cross-entropy (the wasm SIMD kernels when that backend is selected);
// what is left here are exp-free passes. Rows go through in chunks: besides the logits and their
// gradient, only a few [chunk × V] scratch buffers exist.
//
// forward KL(P‖S): loss_r = Σ P·(ẑ_t − ẑ_s) − lse_t + lse_s, ∂/∂z_s = (S − P)/T
// reverse KL(S‖P): loss_r = Σ S·(ẑ_s − ẑ_t) − lse_s + lse_t, ∂/∂z_s = S·(s − p − KL)/T
// with ẑ = z/T. The kernels subtract g at the row's target; target 0 is used and element 0 is
// recomputed exactly afterwards (adding the onehot back would cancel catastrophically).
import { kernel } from "@kiln/tensor";

export interface KlRows {
  /** Per-row divergence (0 on masked-out rows). */
  out: Float32Array;
  lseS: Float32Array;
  lseT: Float32Array;
}

interface Plan {
  reverse: boolean;
  zs: Float32Array;
  zt: Float32Array;
  map: Int32Array;
  mask: Uint8Array;
  rows: number;
  V: number;
  invT: number;
  chunk: number;
}

/** Rows [r0, r1) of the student (scaled by 1/T) and of the mapped teacher rows, as contiguous views. */
function chunkInputs(p: Plan, r0: number, r1: number, scratchS: Float32Array | null, scratchT: Float32Array | null) {
  const { zs, zt, map, V, invT } = p;
  let s = zs.subarray(r0 * V, r1 * V);
  if (invT !== 1 && scratchS) {
    const dst = scratchS.subarray(0, (r1 - r0) * V);
    for (let i = 0; i < dst.length; i++) dst[i] = s[i] * invT;
    s = dst;
  }
  let identity = true;
  for (let r = r0; r < r1; r++) if (map[r] !== r) identity = false;
  let t: Float32Array;
  if (identity && invT === 1) t = zt.subarray(r0 * V, r1 * V);
  else {
    t = (scratchT as Float32Array).subarray(0, (r1 - r0) * V);
    for (let r = r0; r < r1; r++) {
      const src = zt.subarray(map[r] * V, (map[r] + 1) * V);
      const o = (r - r0) * V;
      if (invT === 1) t.set(src, o);
      else for (let j = 0; j < V; j++) t[o + j] = src[j] * invT;
    }
  }
  return { s, t };
}

function scratch(p: Plan): { s: Float32Array | null; t: Float32Array | null; prob: Float32Array } {
  const n = Math.min(p.chunk, p.rows) * p.V;
  let needT = p.invT !== 1;
  for (let r = 0; r < p.rows && !needT; r++) if (p.map[r] !== r) needT = true;
  return {
    s: p.invT !== 1 ? new Float32Array(n) : null,
    t: needT ? new Float32Array(n) : null,
    prob: new Float32Array(n),
  };
}

export function klForwardRows(p: Plan): KlRows {
  const { rows, V, mask, reverse } = p;
  const out = new Float32Array(rows);
  const lseS = new Float32Array(rows);
  const lseT = new Float32Array(rows);
  const fwd = kernel("crossEntropyForward");
  const bwd = kernel("crossEntropyBackward");
  const buf = scratch(p);
  const lossScratch = new Float32Array(p.chunk);
  for (let r0 = 0; r0 < rows; r0 += p.chunk) {
    const r1 = Math.min(rows, r0 + p.chunk);
    const n = r1 - r0;
    let any = false;
    for (let r = r0; r < r1; r++) if (mask[r]) any = true;
    if (!any) continue;
    const { s, t } = chunkInputs(p, r0, r1, buf.s, buf.t);
    const targets = new Int32Array(n); // all 0 (never the ignore index −1)
    const ones = new Float32Array(n).fill(1);
    fwd(s, targets, lossScratch.subarray(0, n), lseS.subarray(r0, r1), n, V, -1);
    fwd(t, targets, lossScratch.subarray(0, n), lseT.subarray(r0, r1), n, V, -1);
    // probabilities of the distribution that weighs the sum: P (forward) or S (reverse)
    const prob = buf.prob.subarray(0, n * V);
    bwd(reverse ? s : t, targets, reverse ? lseS.subarray(r0, r1) : lseT.subarray(r0, r1), ones, prob, n, V, -1);
    for (let i = 0; i < n; i++) {
      const r = r0 + i;
      if (!mask[r]) continue;
      const o = i * V;
      const ls = lseS[r];
      const lt = lseT[r];
      const a = reverse ? s : t; // weighted by exp(a − lse_a)
      const b = reverse ? t : s;
      prob[o] = Math.exp(a[o] - (reverse ? ls : lt));
      const acc = weightedDifference(prob, a, b, o, V);
      out[r] = reverse ? acc - ls + lt : acc - lt + ls;
    }
  }
  return { out, lseS, lseT };
}

/** Gradient w.r.t. the student logits for per-row output gradients `g` (rows × V, fresh buffer). */
export function klBackwardRows(p: Plan, k: KlRows, g: Float32Array): Float32Array {
  const { rows, V, mask, reverse, invT } = p;
  const dz = new Float32Array(rows * V);
  const bwd = kernel("crossEntropyBackward");
  const buf = scratch(p);
  for (let r0 = 0; r0 < rows; r0 += p.chunk) {
    const r1 = Math.min(rows, r0 + p.chunk);
    const n = r1 - r0;
    const gs = new Float32Array(n);
    let any = false;
    for (let i = 0; i < n; i++) {
      if (mask[r0 + i] && g[r0 + i] !== 0) {
        gs[i] = g[r0 + i] * invT;
        any = true;
      }
    }
    if (!any) continue;
    const { s, t } = chunkInputs(p, r0, r1, buf.s, buf.t);
    const targets = new Int32Array(n);
    const d = dz.subarray(r0 * V, r1 * V);
    bwd(s, targets, k.lseS.subarray(r0, r1), gs, d, n, V, -1); // g'·S − g'·e0
    if (!reverse) {
      const prob = buf.prob.subarray(0, n * V);
      bwd(t, targets, k.lseT.subarray(r0, r1), gs, prob, n, V, -1); // g'·P − g'·e0
      subtractInPlace(d, prob); // the onehot terms cancel
    }
    for (let i = 0; i < n; i++) {
      const r = r0 + i;
      const o = i * V;
      if (gs[i] === 0) {
        d.fill(0, o, o + V);
        continue;
      }
      const ls = k.lseS[r];
      const lt = k.lseT[r];
      const S0 = Math.exp(s[o] - ls);
      if (!reverse) {
        d[o] = gs[i] * (S0 - Math.exp(t[o] - lt));
        continue;
      }
      // d holds g'·S; scale by (s − p − KL) with s − p = ẑ_s − ẑ_t − lse_s + lse_t
      d[o] = gs[i] * S0;
      scaleByDifference(d, s, t, o, V, -ls + lt - k.out[r]);
    }
  }
  return dz;
}

// Small monomorphic loops, kept apart so the engine optimises each hot loop on its own.

/** Σ_j w_j·(a_j − b_j) over [o, o+V), skipping zero weights (0·∞ would be NaN). */
function weightedDifference(w: Float32Array, a: Float32Array, b: Float32Array, o: number, V: number): number {
  let acc = 0;
  for (let j = o; j < o + V; j++) {
    const x = w[j];
    if (x !== 0) acc += x * (a[j] - b[j]);
  }
  return acc;
}

function subtractInPlace(d: Float32Array, x: Float32Array): void {
  for (let i = 0; i < d.length; i++) d[i] -= x[i];
}

/** d_j ← d_j·(a_j − b_j + c) over [o, o+V). */
function scaleByDifference(d: Float32Array, a: Float32Array, b: Float32Array, o: number, V: number, c: number): void {
  for (let j = o; j < o + V; j++) d[j] *= a[j] - b[j] + c;
}

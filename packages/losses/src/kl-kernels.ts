// Forward and reverse KL over the full vocabulary through the tensor backend's row kernels:
// `klDivergenceRows` (divergence, logsumexps and, in training, the gradient's direction) for the
// forward; the backward only rescales that direction per row. Every exp runs inside the kernels,
// so the divergence is as fast as the active backend (the wasm SIMD kernels when selected). A
// second backward through a retained graph rebuilds the gradient with the cross-entropy kernels.
// Rows go through in chunks: besides the logits and their gradient, a backend holds at most a
// few [chunk × V] scratch buffers.
//
// forward KL(P‖S): loss_r = Σ P·(ẑ_t − ẑ_s) − lse_t + lse_s, ∂/∂z_s = (S − P)/T
// reverse KL(S‖P): loss_r = Σ S·(ẑ_s − ẑ_t) − lse_s + lse_t, ∂/∂z_s = S·(s − p − KL)/T
// with ẑ = z/T. The kernels subtract g at the row's target; target 0 is used and element 0 is
// recomputed exactly afterwards (adding the onehot back would cancel catastrophically).
import { kernel } from "@kiln/tensor";
import { scaleRow } from "./row-ops.js";

export interface KlRows {
  /** Per-row divergence (0 on masked-out rows). */
  out: Float32Array;
  lseS: Float32Array;
  lseT: Float32Array;
  /** Gradient direction kept by the forward, row r scaled by rowScale[r]; handed over (and cleared) by the first backward. */
  grad: Float32Array | null;
  rowScale: Float32Array | null;
}

export interface Plan {
  reverse: boolean;
  zs: Float32Array;
  zt: Float32Array;
  map: Int32Array;
  mask: Uint8Array;
  rows: number;
  V: number;
  invT: number;
  chunk: number;
  /** Per-row gradient the output is expected to receive (see TokenDivergenceOptions.expectedGradient). */
  expected: Float32Array | null;
}

/** The chunks [r0, r1) of `p.chunk` rows that hold at least one unmasked row; the others need no work. */
export function* activeChunks(p: Plan): Generator<[number, number]> {
  for (let r0 = 0; r0 < p.rows; r0 += p.chunk) {
    const r1 = Math.min(p.rows, r0 + p.chunk);
    for (let r = r0; r < r1; r++)
      if (p.mask[r]) {
        yield [r0, r1];
        break;
      }
  }
}

/** Rows [r0, r1) of the student (scaled by 1/T) and of the mapped teacher rows, as contiguous views. */
export function chunkInputs(
  p: Plan,
  r0: number,
  r1: number,
  scratchS: Float32Array | null,
  scratchT: Float32Array | null,
) {
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

/** Chunk buffers for scaled / gathered inputs and, unless `withProb` is false, one probability chunk. */
export function scratch(
  p: Plan,
  withProb = true,
): { s: Float32Array | null; t: Float32Array | null; prob: Float32Array } {
  const n = Math.min(p.chunk, p.rows) * p.V;
  let needT = p.invT !== 1;
  for (let r = 0; r < p.rows && !needT; r++) if (p.map[r] !== r) needT = true;
  return {
    s: p.invT !== 1 ? new Float32Array(n) : null,
    t: needT ? new Float32Array(n) : null,
    prob: new Float32Array(withProb ? n : 0),
  };
}

/**
 * Per-row divergence. With `keepGradient`, also the direction of its gradient w.r.t. the scaled
 * student logits (before the per-row factor g/T): forward KL S − P, reverse KL S·(s − p − KL),
 * written by the backend's `klDivergenceRows` kernel while each chunk is in cache (two exps per
 * logit in all, teacher rows gathered by the kernel, temperature applied on the fly).
 */
export function klForwardRows(p: Plan, keepGradient: boolean): KlRows {
  const { rows, V, mask, reverse, map, invT } = p;
  const out = new Float32Array(rows);
  const lseS = new Float32Array(rows);
  const lseT = new Float32Array(rows);
  const grad = keepGradient ? new Float32Array(rows * V) : null;
  // With an expected gradient e the rows are stored already multiplied by e/T, the factor the
  // backward would apply, so a backward that receives e has nothing left to do.
  let rowScale: Float32Array | null = null;
  if (grad && p.expected) {
    rowScale = new Float32Array(rows);
    for (let r = 0; r < rows; r++) rowScale[r] = p.expected[r] * invT;
  }
  const kl = kernel("klDivergenceRows");
  let identity = true;
  for (let r = 0; r < rows; r++) if (map[r] !== r) identity = false;
  for (const [r0, r1] of activeChunks(p)) {
    kl(
      p.zs.subarray(r0 * V, r1 * V),
      identity ? p.zt.subarray(r0 * V, r1 * V) : p.zt,
      identity ? null : map.subarray(r0, r1),
      grad ? grad.subarray(r0 * V, r1 * V) : null,
      out.subarray(r0, r1),
      lseS.subarray(r0, r1),
      lseT.subarray(r0, r1),
      { rows: r1 - r0, vocab: V, scale: invT, reverse },
      rowScale ? rowScale.subarray(r0, r1) : null,
    );
    for (let r = r0; r < r1; r++) {
      if (mask[r]) continue;
      out[r] = 0;
      if (grad) grad.fill(0, r * V, (r + 1) * V);
    }
  }
  return { out, lseS, lseT, grad, rowScale };
}

/**
 * S = softmax(student/T) per row into a fresh [rows × V] buffer (masked-out rows left zero) and
 * the logsumexps of both scaled distributions, through the backend's kernels in chunks. The
 * top-k distillation mode builds its gradient on S in place.
 */
export function studentSoftmaxRows(p: Plan): { S: Float32Array; lseS: Float32Array; lseT: Float32Array } {
  const { rows, V, mask } = p;
  const S = new Float32Array(rows * V);
  const lseS = new Float32Array(rows);
  const lseT = new Float32Array(rows);
  const softmax = kernel("softmaxRows");
  const stats = kernel("crossEntropyForward");
  const buf = scratch(p, false);
  const lossScratch = new Float32Array(p.chunk);
  const zeroTargets = new Int32Array(p.chunk); // never the ignore index −1
  for (const [r0, r1] of activeChunks(p)) {
    const n = r1 - r0;
    const { s, t } = chunkInputs(p, r0, r1, buf.s, buf.t);
    softmax(s, S.subarray(r0 * V, r1 * V), lseS.subarray(r0, r1), n, V);
    stats(t, zeroTargets.subarray(0, n), lossScratch.subarray(0, n), lseT.subarray(r0, r1), n, V, -1);
    for (let r = r0; r < r1; r++) if (!mask[r]) S.fill(0, r * V, (r + 1) * V);
  }
  return { S, lseS, lseT };
}

/** Gradient w.r.t. the student logits for per-row output gradients `g` (rows × V). */
export function klBackwardRows(p: Plan, k: KlRows, g: Float32Array): Float32Array {
  return takeStoredGradient(p, k, g) ?? klRecomputedGradient(p, k, g);
}

/**
 * The gradient the forward stored (direction × rowScale), rescaled per row to g/T; null when there
 * is none (a second backward) or a row stored as zeros now needs a gradient.
 */
export function takeStoredGradient(
  p: Plan,
  k: { grad: Float32Array | null; rowScale: Float32Array | null },
  g: Float32Array,
): Float32Array | null {
  const { rows, V, mask, invT, expected } = p;
  const d = k.grad;
  if (d === null) return null;
  const stored = k.rowScale;
  for (let r = 0; r < rows; r++)
    if (mask[r] && g[r] !== 0 && stored && stored[r] === 0 && !(expected && g[r] === expected[r])) return null;
  k.grad = null; // the buffer becomes the caller's gradient
  for (let r = 0; r < rows; r++) {
    if (!mask[r]) continue; // stored as zeros
    if (expected && g[r] === expected[r]) continue; // stored exactly as needed
    const c = (g[r] * invT) / (stored ? stored[r] : 1);
    if (c === 0) d.fill(0, r * V, (r + 1) * V);
    else if (c !== 1) scaleRow(d, r * V, V, c);
  }
  return d;
}

/** The gradient rebuilt from the logits and the saved row statistics (2–3 exps per logit). */
function klRecomputedGradient(p: Plan, k: KlRows, g: Float32Array): Float32Array {
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

function subtractInPlace(d: Float32Array, x: Float32Array): void {
  for (let i = 0; i < d.length; i++) d[i] -= x[i];
}

/** d_j ← d_j·(a_j − b_j + c) over [o, o+V). */
function scaleByDifference(d: Float32Array, a: Float32Array, b: Float32Array, o: number, V: number, c: number): void {
  for (let j = o; j < o + V; j++) d[j] *= a[j] - b[j] + c;
}

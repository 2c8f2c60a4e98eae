// Full-vocabulary generalized JSD (0 < β < 1) in training. S and P come from the backend's
// softmaxRows kernel (the wasm SIMD exps when that backend is active), so the log of the mixture
// is the only transcendental left here, one Math.log per logit; the gradient's direction
// (1−β)·S·(s − m − KL(S‖M)) is written while each chunk is in cache and pre-scaled like the KL
// rows (kl-kernels.ts), so the backward is a per-row rescale at most. Formulas: divergence.ts.
import { kernel } from "@kiln/tensor";
import { type Plan, activeChunks, chunkInputs, scratch } from "./kl-kernels.js";

export interface JsdRows {
  out: Float32Array;
  lseS: Float32Array;
  lseT: Float32Array;
  /** KL(S‖M) per row: the row constant of the gradient. */
  klSM: Float64Array;
  grad: Float32Array | null;
  rowScale: Float32Array | null;
}

export function jsdForwardRows(p: Plan, beta: number): JsdRows {
  const { rows, V, mask, invT, expected } = p;
  const out = new Float32Array(rows);
  const lseS = new Float32Array(rows);
  const lseT = new Float32Array(rows);
  const klSM = new Float64Array(rows);
  const grad = new Float32Array(rows * V);
  let rowScale: Float32Array | null = null;
  if (expected) {
    rowScale = new Float32Array(rows);
    for (let r = 0; r < rows; r++) rowScale[r] = expected[r] * invT;
  }
  const softmax = kernel("softmaxRows");
  const buf = scratch(p);
  const S = new Float32Array(Math.min(p.chunk, rows) * V);
  const stats = new Float64Array(2);
  for (const [r0, r1] of activeChunks(p)) {
    const n = r1 - r0;
    const { s, t } = chunkInputs(p, r0, r1, buf.s, buf.t);
    const P = buf.prob.subarray(0, n * V);
    softmax(s, S.subarray(0, n * V), lseS.subarray(r0, r1), n, V);
    softmax(t, P, lseT.subarray(r0, r1), n, V);
    const d = grad.subarray(r0 * V, r1 * V);
    for (let i = 0; i < n; i++) {
      const r = r0 + i;
      const o = i * V;
      if (!mask[r]) {
        d.fill(0, o, o + V);
        continue;
      }
      jsdRow(S, P, s, t, d, o, V, lseS[r], lseT[r], beta, stats);
      out[r] = beta * stats[1] + (1 - beta) * stats[0];
      klSM[r] = stats[0];
      scaleDirection(d, S, o, V, (1 - beta) * (rowScale ? rowScale[r] : 1), stats[0]);
    }
  }
  return { out, lseS, lseT, klSM, grad, rowScale };
}

/**
 * One row: stats ← [KL(S‖M), KL(P‖M)] with m = log((1−β)S + βP), skipping zero weights
 * (0·log 0 = 0); d ← s − m where S > 0, else 0.
 */
function jsdRow(
  S: Float32Array,
  P: Float32Array,
  s: Float32Array,
  t: Float32Array,
  d: Float32Array,
  o: number,
  V: number,
  ls: number,
  lt: number,
  beta: number,
  stats: Float64Array,
): void {
  let sm = 0;
  let pm = 0;
  const a = 1 - beta;
  for (let j = o; j < o + V; j++) {
    const Sj = S[j];
    const Pj = P[j];
    const mix = a * Sj + beta * Pj;
    if (mix === 0) {
      d[j] = 0;
      continue;
    }
    const m = Math.log(mix);
    if (Sj > 0) {
      const x = s[j] - ls - m;
      sm += Sj * x;
      d[j] = x;
    } else d[j] = 0;
    if (Pj > 0) pm += Pj * (t[j] - lt - m);
  }
  stats[0] = sm;
  stats[1] = pm;
}

/** d ← f·S·(d − c) over one row. */
function scaleDirection(d: Float32Array, S: Float32Array, o: number, V: number, f: number, c: number): void {
  for (let j = o; j < o + V; j++) d[j] = f * S[j] * (d[j] - c);
}

// Token-level distillation over the full vocabulary (TRL GKD generalized_jsd_loss, SDFT/SDPO
// full_logits and topk_logits modes; docs/NUMERICS.md §3.3). One fused op, and no [tokens × vocab]
// temporary exists besides the gradient: in training, forward / reverse KL (kl-kernels.ts) and
// the full-vocabulary JSD (jsd-rows.ts) write the gradient in the forward; top-k, and a second
// backward through a retained graph, keep per-row statistics and rebuild it row by row.
// Forward / reverse KL over the full vocabulary run through the backend's softmax kernels in
// row chunks (kl-kernels.ts); JSD and top-k stream row by row here.
//
// Per row, with S = softmax(z_s/T), P = softmax(z_t/T), s = log S, p = log P:
//   forward KL(P‖S) = Σ P (p − s)           ∂/∂z_s = (S − P)/T
//   reverse KL(S‖P) = Σ S (s − p)           ∂/∂z_s = S (s − p − KL)/T
//   JSD_β = β KL(P‖M) + (1−β) KL(S‖M), M = (1−β)S + βP
//                                           ∂/∂z_s = (1−β) S (s − m − KL(S‖M))/T
// (the JSD derivative follows from ∂JSD/∂S_v = (1−β)(s_v − m_v); ours, checked by finite
// differences). β = 0 and β = 1 are the exact forward / reverse KL, as in TRL, not the limit of
// the mixture formula (which tends to 0 at both ends).
import { Tensor, embedding, isGradEnabled, noGrad, record, reshape } from "@kiln/tensor";
import { type ChunkedLogits, type Logits, isChunkedLogits, logitsLayout, mapLogitChunks } from "./chunked-logits.js";
import { LossInputError, LossOptionError } from "./errors.js";
import { checkPositiveInt, defaultChunkRows, expectedGradientRows, fmt, logitRows, maskValues } from "./inputs.js";
import { scaleRow } from "./row-ops.js";
import { jsdForwardRows, type JsdRows } from "./jsd-rows.js";
import { klBackwardRows, klForwardRows, studentSoftmaxRows, takeStoredGradient } from "./kl-kernels.js";
import type { MaskLike } from "./result.js";

export type DivergenceKind = "forward_kl" | "reverse_kl" | "jsd";

export interface TokenDivergenceOptions {
  /**
   * "jsd" (default, TRL GKD) with `beta`; "forward_kl" = KL(teacher‖student);
   * "reverse_kl" = KL(student‖teacher).
   */
  kind?: DivergenceKind;
  /** Mixture weight β of the generalized JSD (TRL `beta`, SDFT `distillation_alpha`). Default 0.5. */
  beta?: number;
  /** Both logits are divided by T before the softmax (TRL GKD; no T² factor). Default 1. */
  temperature?: number;
  /** Rows of the student to score (others get 0 and no gradient). Default all. */
  mask?: MaskLike | Tensor;
  /**
   * Student row r is compared with teacher row teacherRows[r]. Lets the teacher's logits come from
   * the same model run on a different prompt (OEL: memory in the system prompt) without copying.
   * Default: the identity (teacher has the student's shape).
   */
  teacherRows?: ArrayLike<number>;
  /**
   * Restrict to the student's top-k tokens (teacher gathered at the same ids) plus one tail
   * bucket holding the remaining mass of each distribution (SDFT topk_logits with the tail,
   * after SDPO). Default: full vocabulary.
   */
  topK?: number;
  /**
   * Rows per chunk for forward / reverse KL over the full vocabulary, which run through the
   * backend's fused softmax kernels (default: about 16 MiB of logits per chunk).
   */
  chunkRows?: number;
  /**
   * The gradient the per-token output is expected to receive in the backward, per row or one
   * number for all rows (the reduction weights, as `distillationLoss` passes). Full-vocabulary
   * forward / reverse KL then store the gradient already scaled by it in the forward, so a
   * backward that receives exactly this needs no pass over the vocabulary; any other gradient is
   * still exact.
   */
  expectedGradient?: number | ArrayLike<number>;
}

interface Resolved {
  mode: 0 | 1 | 2; // forward, reverse, jsd
  beta: number;
  invT: number;
}

function resolve(op: string, options: TokenDivergenceOptions): Resolved {
  const kind = options.kind ?? "jsd";
  const beta = options.beta ?? 0.5;
  const temperature = options.temperature ?? 1;
  if (!(temperature > 0) || !Number.isFinite(temperature))
    throw new LossOptionError(`${op}: temperature must be positive and finite, got ${temperature}`);
  if (kind === "forward_kl") return { mode: 0, beta: 0, invT: 1 / temperature };
  if (kind === "reverse_kl") return { mode: 1, beta: 1, invT: 1 / temperature };
  if (kind !== "jsd")
    throw new LossOptionError(`${op}: kind must be forward_kl, reverse_kl or jsd; got ${String(kind)}`);
  if (!(beta >= 0 && beta <= 1)) throw new LossOptionError(`${op}: beta must be in [0, 1], got ${beta}`);
  // TRL special-cases the ends (test_generalized_jsd_loss_edge_cases).
  if (beta === 0) return { mode: 0, beta, invT: 1 / temperature };
  if (beta === 1) return { mode: 1, beta, invT: 1 / temperature };
  return { mode: 2, beta, invT: 1 / temperature };
}

/** log(a·e^x + b·e^y) with la = log a, lb = log b, stable. */
function logMix(la: number, x: number, lb: number, y: number): number {
  const u = la + x;
  const v = lb + y;
  if (u === Number.NEGATIVE_INFINITY) return v;
  if (v === Number.NEGATIVE_INFINITY) return u;
  return u > v ? u + Math.log1p(Math.exp(v - u)) : v + Math.log1p(Math.exp(u - v));
}

/** Divergence between bucket distributions given by log-probs (x log x with 0 log 0 = 0). */
function bucketLoss(mode: number, beta: number, s: number, p: number, m: number): number {
  const S = Math.exp(s);
  const P = Math.exp(p);
  if (mode === 0) return P > 0 ? P * (p - s) : 0;
  if (mode === 1) return S > 0 ? S * (s - p) : 0;
  return (P > 0 ? beta * P * (p - m) : 0) + (S > 0 ? (1 - beta) * S * (s - m) : 0);
}

// SDPO / TRL SDFT add_tail: log Σ_topk is clamped to ≤ −1e-7 before log(1 − e^x), so the tail
// bucket keeps at least ~1e-7 of mass (and stops carrying gradient once clamped).
const TAIL_LOG_MASS_MAX = -1e-7;
const TAIL_MASS_MAX = Math.exp(TAIL_LOG_MASS_MAX);

/** log(1 − mass) of the tail bucket with the reference's clamp. */
function tailLog(mass: number): number {
  return Math.log(-Math.expm1(Math.min(Math.log(mass), TAIL_LOG_MASS_MAX)));
}

/** Row logsumexp of z·invT over [o, o+V) with its max; returns [max, lse]. */
function rowLse(z: Float32Array, o: number, V: number, invT: number): number {
  let mx = Number.NEGATIVE_INFINITY;
  for (let j = 0; j < V; j++) if (z[o + j] > mx) mx = z[o + j];
  const m = mx * invT;
  let s = 0;
  for (let j = 0; j < V; j++) s += Math.exp(z[o + j] * invT - m);
  return m + Math.log(s);
}

/** Indices of the k largest entries of z[o..o+V) (ties: lower index first), descending. */
function topKIndices(z: Float32Array, o: number, V: number, k: number, out: Int32Array, ok: number): void {
  // Insertion into a sorted buffer; after the first k elements most candidates fail the
  // threshold test, so this is ~one comparison per element for realistic logits.
  let n = 0;
  for (let j = 0; j < V; j++) {
    const v = z[o + j];
    if (n === k && v <= z[o + out[ok + k - 1]]) continue;
    let pos = n < k ? n : k - 1;
    while (pos > 0 && z[o + out[ok + pos - 1]] < v) {
      out[ok + pos] = out[ok + pos - 1];
      pos--;
    }
    out[ok + pos] = j;
    if (n < k) n++;
  }
}

/** Student row r → teacher row: `teacherRows`, or the identity when the teacher has the student's rows. */
function teacherRowMap(
  op: string,
  options: TokenDivergenceOptions,
  rows: number,
  tRows: number,
  describe: () => string,
): Int32Array {
  if (options.teacherRows) {
    if (options.teacherRows.length !== rows)
      throw new LossInputError(
        `${op}: teacherRows has ${options.teacherRows.length} entries, expected one per student row (${rows})`,
      );
    return Int32Array.from(options.teacherRows);
  }
  if (tRows !== rows) throw new LossInputError(`${op}: ${describe()}; pass teacherRows to align them`);
  return Int32Array.from({ length: rows }, (_, r) => r);
}

/**
 * The teacher's logits for the masked rows of `map` only, as [M, V] under no gradient, and the
 * row map into them (unmasked rows point at row 0 and are never read).
 */
function projectTeacherRows(
  op: string,
  teacher: ChunkedLogits,
  teacherFlat: Tensor,
  map: Int32Array,
  mask: Uint8Array,
): { logits: Tensor; rows: Int32Array } | null {
  const tRows = teacherFlat.shape[0];
  const picked: number[] = [];
  const rows = new Int32Array(map.length);
  for (let r = 0; r < map.length; r++) {
    if (!mask[r]) continue;
    const t = map[r];
    if (!(Number.isInteger(t) && t >= 0 && t < tRows))
      throw new LossInputError(`${op}: teacherRows[${r}] = ${t} is outside [0, ${tRows})`);
    rows[r] = picked.length;
    picked.push(t);
  }
  if (picked.length === 0) return null;
  const logits = noGrad(() => {
    const hidden = embedding(teacherFlat, new Tensor(Int32Array.from(picked), [picked.length], "i32"));
    return teacher.project(hidden);
  });
  if (logits.rank !== 2 || logits.shape[0] !== picked.length || logits.shape[1] !== teacher.vocab)
    throw new LossInputError(
      `${op}: the teacher's project() turned ${picked.length} hidden rows into ${fmt(logits.shape)}, expected [${picked.length}, ${teacher.vocab}]`,
    );
  return { logits, rows };
}

/**
 * Per-token divergence between student logits [..., V] and teacher logits, shaped like the
 * student's rows ([...]); 0 on masked-out rows. Gradients flow to the student only (the teacher
 * is a constant, as in TRL where it runs under no_grad).
 *
 * Either side may be `ChunkedLogits` (hidden states + head). A chunked teacher is projected only
 * at the teacher rows of masked student rows, one student chunk at a time, and projected again in
 * the backward instead of being kept: no more than one chunk of teacher logits is alive, where
 * teacher chunks held for the backward would add up to [rows, V]. The price is one more teacher
 * head product per chunk.
 */
export function tokenDivergence(student: Logits, teacher: Logits, options: TokenDivergenceOptions = {}): Tensor {
  const op = "tokenDivergence";
  if (isChunkedLogits(teacher)) {
    const { rows, lead, vocab } = logitsLayout(op, "student logits", student);
    const { rows: tRows, vocab: tV } = logitsLayout(op, "teacher logits", teacher);
    if (tV !== vocab) throw new LossInputError(`${op}: teacher vocabulary ${tV} differs from the student's ${vocab}`);
    const mask = maskValues(op, "mask", options.mask, rows);
    const map = teacherRowMap(
      op,
      options,
      rows,
      tRows,
      () => `teacher has ${tRows} rows, student ${fmt([...lead, vocab])} ${rows}`,
    );
    const D = teacher.hidden.shape[teacher.hidden.rank - 1];
    const teacherFlat = reshape(teacher.hidden, [tRows, D]);
    const expected = expectedGradientRows(op, options.expectedGradient, rows);
    const onRows = (studentRows: Tensor, s: number, e: number): Tensor => {
      const t = projectTeacherRows(op, teacher, teacherFlat, map.subarray(s, e), mask.subarray(s, e));
      // No masked row here: a one-row teacher keeps the result on the tape with a zero gradient.
      const teacherLogits = t ? t.logits : Tensor.zeros([1, vocab]);
      const v = tokenDivergence(studentRows, teacherLogits, {
        ...options,
        mask: mask.subarray(s, e),
        teacherRows: t ? t.rows : new Int32Array(e - s),
        expectedGradient: expected ? expected.subarray(s, e) : undefined,
      });
      // Freed now, or by the backward once it has read them: not left for the garbage collector.
      if (v.node) v.node = { ...v.node, temporaries: [...(v.node.temporaries ?? []), teacherLogits] };
      else teacherLogits.dispose();
      return v;
    };
    if (isChunkedLogits(student)) return reshape(mapLogitChunks(op, student, onRows), lead);
    return reshape(onRows(reshape(student, [rows, vocab]), 0, rows), lead);
  }
  if (isChunkedLogits(student)) {
    // Chunk by student rows; each chunk reads its teacher rows through teacherRows.
    const { rows, lead } = logitsLayout(op, "student logits", student);
    const mask = maskValues(op, "mask", options.mask, rows);
    let map: Int32Array;
    if (options.teacherRows) {
      if (options.teacherRows.length !== rows)
        throw new LossInputError(
          `${op}: teacherRows has ${options.teacherRows.length} entries, expected one per student row (${rows})`,
        );
      map = Int32Array.from(options.teacherRows);
    } else {
      const { rows: tRows } = logitRows(op, "teacher logits", teacher);
      if (tRows !== rows)
        throw new LossInputError(
          `${op}: teacher ${fmt(teacher.shape)} has ${tRows} rows, student ${fmt([...lead, student.vocab])} ${rows}; pass teacherRows to align them`,
        );
      map = Int32Array.from({ length: rows }, (_, r) => r);
    }
    const expected = expectedGradientRows(op, options.expectedGradient, rows);
    const values = mapLogitChunks(op, student, (chunk, s, e) =>
      tokenDivergence(chunk, teacher, {
        ...options,
        mask: mask.subarray(s, e),
        teacherRows: map.subarray(s, e),
        expectedGradient: expected ? expected.subarray(s, e) : undefined,
      }),
    );
    return reshape(values, lead);
  }
  const { mode, beta, invT } = resolve(op, options);
  const { rows, vocab: V } = logitRows(op, "student logits", student);
  const { rows: tRows, vocab: tV } = logitRows(op, "teacher logits", teacher);
  if (tV !== V)
    throw new LossInputError(
      `${op}: teacher vocabulary ${tV} ${fmt(teacher.shape)} differs from the student's ${V} ${fmt(student.shape)}`,
    );
  const mask = maskValues(op, "mask", options.mask, rows);
  const map = new Int32Array(rows);
  if (options.teacherRows) {
    if (options.teacherRows.length !== rows)
      throw new LossInputError(
        `${op}: teacherRows has ${options.teacherRows.length} entries, expected one per student row (${rows})`,
      );
    for (let r = 0; r < rows; r++) {
      const t = options.teacherRows[r];
      if (mask[r] && !(Number.isInteger(t) && t >= 0 && t < tRows))
        throw new LossInputError(`${op}: teacherRows[${r}] = ${t} is outside [0, ${tRows})`);
      map[r] = t;
    }
  } else {
    if (tRows !== rows)
      throw new LossInputError(
        `${op}: teacher ${fmt(teacher.shape)} has ${tRows} rows, student ${fmt(student.shape)} ${rows}; pass teacherRows to align them`,
      );
    for (let r = 0; r < rows; r++) map[r] = r;
  }
  const k = options.topK ?? 0;
  if (options.topK !== undefined) {
    checkPositiveInt(op, "topK", k);
    if (k >= V)
      throw new LossOptionError(
        `${op}: topK ${k} must be smaller than the vocabulary ${V} (use the full-vocabulary mode)`,
      );
  }
  const zs = student.dataSync() as Float32Array;
  const zt = teacher.dataSync() as Float32Array;
  const opName = `divergence_${mode === 0 ? "fkl" : mode === 1 ? "rkl" : "jsd"}`;
  const outShape = student.shape.slice(0, -1);
  if (k === 0 && mode !== 2) {
    const chunk = options.chunkRows ?? defaultChunkRows(V);
    checkPositiveInt(op, "chunkRows", chunk);
    const expected = expectedGradientRows(op, options.expectedGradient, rows);
    const plan = { reverse: mode === 1, zs, zt, map, mask, rows, V, invT, chunk, expected };
    const rowsOut = klForwardRows(plan, isGradEnabled() && student.requiresGrad);
    return record(new Tensor(rowsOut.out, outShape), opName, [student], (g) => [
      new Tensor(klBackwardRows(plan, rowsOut, g.dataSync() as Float32Array), student.shape),
    ]);
  }
  const lseS = new Float64Array(rows);
  const lseT = new Float64Array(rows);
  // Full vocabulary: per-row constant of the gradient (the KL term). Top-k: per bucket dL/dq_b
  // and the row constant Σ_b q_b·G_b.
  const rowConst = new Float64Array(rows);
  const topIdx = k > 0 ? new Int32Array(rows * k) : null;
  const bucketG = k > 0 ? new Float64Array(rows * (k + 1)) : null;
  const out = new Float32Array(rows);
  const la = Math.log(1 - beta);
  const lb = Math.log(beta);
  // Training with the full vocabulary: softmax kernels, gradient stored in the forward (jsd-rows.ts).
  let stored: JsdRows | { grad: Float32Array | null; rowScale: Float32Array | null } | null = null;
  const plan = {
    reverse: false,
    zs,
    zt,
    map,
    mask,
    rows,
    V,
    invT,
    chunk: options.chunkRows ?? defaultChunkRows(V),
    expected: expectedGradientRows(op, options.expectedGradient, rows),
  };
  if (k === 0 && isGradEnabled() && student.requiresGrad) {
    checkPositiveInt(op, "chunkRows", plan.chunk);
    const jsd = jsdForwardRows(plan, beta);
    stored = jsd;
    out.set(jsd.out);
    lseS.set(jsd.lseS);
    lseT.set(jsd.lseT);
    rowConst.set(jsd.klSM);
  } else {
    // Top-k in training: S and both logsumexps from the backend's kernels; each row's gradient is
    // then written on S in place (tail members S·(G_tail − c), top-k members q_b·(G_b − c)).
    let topS: Float32Array | null = null;
    let rowScale: Float32Array | null = null;
    if (k > 0 && isGradEnabled() && student.requiresGrad) {
      checkPositiveInt(op, "chunkRows", plan.chunk);
      const sm = studentSoftmaxRows(plan);
      topS = sm.S;
      lseS.set(sm.lseS);
      lseT.set(sm.lseT);
      if (plan.expected) {
        rowScale = new Float32Array(rows);
        for (let r = 0; r < rows; r++) rowScale[r] = plan.expected[r] * invT;
      }
      stored = { grad: topS, rowScale };
    }
    const topQ = new Float64Array(Math.max(k, 1));
    for (let r = 0; r < rows; r++) {
      if (!mask[r]) continue;
      const os = r * V;
      const ot = map[r] * V;
      const ls = topS ? lseS[r] : rowLse(zs, os, V, invT);
      const lt = topS ? lseT[r] : rowLse(zt, ot, V, invT);
      lseS[r] = ls;
      lseT[r] = lt;
      if (topIdx && bucketG) {
        const ok = r * k;
        topKIndices(zs, os, V, k, topIdx, ok);
        let massS = 0;
        let massT = 0;
        let loss = 0;
        let c = 0;
        const ob = r * (k + 1);
        for (let b = 0; b <= k; b++) {
          let s: number;
          let p: number;
          if (b < k) {
            const j = topIdx[ok + b];
            s = zs[os + j] * invT - ls;
            p = zt[ot + j] * invT - lt;
            massS += Math.exp(s);
            massT += Math.exp(p);
          } else {
            s = tailLog(massS);
            p = tailLog(massT);
          }
          const m = mode === 2 ? logMix(la, s, lb, p) : 0;
          loss += bucketLoss(mode, beta, s, p, m);
          const q = Math.exp(s);
          // G_b = ∂L/∂q_b; q_b·G_b is what the softmax chain rule needs. A clamped student tail
          // is a constant (no gradient through it), as in the reference.
          let g: number;
          if (b === k && massS >= TAIL_MASS_MAX) g = 0;
          else if (mode === 0) g = q > 0 ? -Math.exp(p) / q : 0;
          else if (mode === 1) g = q > 0 ? s - p + 1 : 0;
          else g = q > 0 ? (1 - beta) * (s - m) : 0;
          bucketG[ob + b] = g;
          c += q * g;
          if (b < k) topQ[b] = q;
        }
        rowConst[r] = c;
        out[r] = loss;
        if (topS) {
          const f = rowScale ? rowScale[r] : 1;
          scaleRow(topS, os, V, f * (bucketG[ob + k] - c));
          for (let b = 0; b < k; b++) topS[os + topIdx[ok + b]] = f * topQ[b] * (bucketG[ob + b] - c);
        }
        continue;
      }
      // Full-vocabulary JSD (forward / reverse KL took the kernel path above).
      let klSM = 0;
      let klPM = 0;
      for (let j = 0; j < V; j++) {
        const s = zs[os + j] * invT - ls;
        const p = zt[ot + j] * invT - lt;
        const m = logMix(la, s, lb, p);
        const S = Math.exp(s);
        const P = Math.exp(p);
        if (S > 0) klSM += S * (s - m);
        if (P > 0) klPM += P * (p - m);
      }
      const loss = beta * klPM + (1 - beta) * klSM;
      rowConst[r] = klSM;
      out[r] = loss;
    }
  }
  return record(new Tensor(out, outShape), opName, [student], (g) => {
    const gd = g.dataSync() as Float32Array;
    const kept = stored ? takeStoredGradient(plan, stored, gd) : null;
    if (kept) return [new Tensor(kept, student.shape)];
    const dz = new Float32Array(rows * V);
    for (let r = 0; r < rows; r++) {
      if (!mask[r] || gd[r] === 0) continue;
      const scale = gd[r] * invT;
      const os = r * V;
      const ot = map[r] * V;
      const ls = lseS[r];
      const lt = lseT[r];
      const c = rowConst[r];
      if (topIdx && bucketG) {
        const ok = r * k;
        const ob = r * (k + 1);
        const gTail = bucketG[ob + k];
        // Tail members: S_j·(G_tail − c); then overwrite the top-k members with their own bucket.
        for (let j = 0; j < V; j++) dz[os + j] = scale * Math.exp(zs[os + j] * invT - ls) * (gTail - c);
        for (let b = 0; b < k; b++) {
          const j = topIdx[ok + b];
          dz[os + j] = scale * Math.exp(zs[os + j] * invT - ls) * (bucketG[ob + b] - c);
        }
        continue;
      }
      const w = scale * (1 - beta);
      for (let j = 0; j < V; j++) {
        const s = zs[os + j] * invT - ls;
        const S = Math.exp(s);
        if (S === 0) continue;
        const m = logMix(la, s, lb, zt[ot + j] * invT - lt);
        dz[os + j] = w * S * (s - m - c);
      }
    }
    return [new Tensor(dz, student.shape)];
  });
}

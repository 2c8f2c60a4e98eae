// Token-level divergence to a teacher known only by its top-k log-probs per position (what a
// scoring server returns: vLLM `prompt_logprobs: k`, OpenAI `top_logprobs`), with one tail bucket
// holding the rest of each distribution (the SDFT/SDPO topk_logits + tail construction of
// docs/NUMERICS.md §3.3, but on the *teacher's* k ids, since the teacher's logits are not at hand).
// On-policy with the student's own samples this is GKD with λ = 1 (docs/NUMERICS.md §3.3): the full-
// distribution form of OPD's per-token reverse KL, whose sampled estimate −(log q − log p) only
// moves the one sampled token per position (docs/NUMERICS.md §4).
//
// Per row, student log-softmax s over V, buckets B = the k teacher ids and the tail:
//   S_B = Σ_{v∈B} e^{s_v},  P_B = e^{p_B} (tail: 1 − Σ_k P_k, floored like tailLog in divergence.ts)
//   reverse KL(S‖P) = Σ_B S_B (log S_B − log P_B)     ∂/∂z_v = S_v (log S_B(v) − log P_B(v) − KL)
//   forward KL(P‖S) = Σ_B P_B (log P_B − log S_B)     ∂/∂z_v = S_v − P_B(v) S_v / S_B(v)
// (ours: ∂S_B/∂z_v = S_v[v∈B] − S_B S_v and Σ_B S_B = 1; checked by finite differences).
import { Tensor, isGradEnabled, record, reshape } from "@kiln/tensor";
import { type Logits, isChunkedLogits, logitsLayout, mapLogitChunks } from "./chunked-logits.js";
import { LossInputError, LossOptionError } from "./errors.js";
import { checkPositiveInt, logitRows, maskValues } from "./inputs.js";
import type { MaskLike } from "./result.js";

/** The teacher's k best tokens per student row: ids and log-probs, row-major [rows, k]. */
export interface TeacherTopK {
  k: number;
  /** Token ids, rows × k; −1 pads a row whose teacher listed fewer than k tokens. */
  ids: ArrayLike<number>;
  /** Log-probs of those tokens under the teacher (≤ 0), rows × k. */
  logprobs: ArrayLike<number>;
}

export interface TeacherTopKOptions {
  /** "reverse_kl" (default) = KL(student‖teacher), OPD's direction; "forward_kl" = KL(teacher‖student). */
  kind?: "reverse_kl" | "forward_kl";
  /** Rows to score (others give 0 and no gradient). Default all. */
  mask?: MaskLike | Tensor;
}

// The tail keeps at least this much teacher mass (divergence.ts's TAIL_LOG_MASS_MAX: e^−1e-7 ≈ 1 − 1e-7).
const MIN_TAIL_MASS = 1e-7;

/**
 * Per-row divergence between the student's logits [..., V] (or ChunkedLogits) and a teacher given
 * by its top-k tokens, shaped like the student's rows; 0 on masked-out rows. Gradient to the
 * student only.
 */
export function teacherTopKDivergence(student: Logits, teacher: TeacherTopK, options: TeacherTopKOptions = {}): Tensor {
  const op = "teacherTopKDivergence";
  const kind = options.kind ?? "reverse_kl";
  if (kind !== "reverse_kl" && kind !== "forward_kl")
    throw new LossOptionError(`${op}: kind must be reverse_kl or forward_kl, got ${String(kind)}`);
  checkPositiveInt(op, "k", teacher.k);
  const { rows, lead, vocab: V } = logitsLayout(op, "student logits", student);
  const k = teacher.k;
  if (teacher.ids.length !== rows * k || teacher.logprobs.length !== rows * k)
    throw new LossInputError(
      `${op}: teacher has ${teacher.ids.length} ids and ${teacher.logprobs.length} log-probs, expected rows × k = ${rows} × ${k}`,
    );
  const mask = maskValues(op, "mask", options.mask, rows);
  const ids = Int32Array.from(teacher.ids);
  const lp = Float64Array.from(teacher.logprobs);
  for (let r = 0; r < rows; r++) {
    if (!mask[r]) continue;
    let mass = 0;
    for (let j = 0; j < k; j++) {
      const id = ids[r * k + j];
      if (id === -1) continue;
      if (!(Number.isInteger(id) && id >= 0 && id < V))
        throw new LossInputError(`${op}: row ${r}: teacher token ${id} is outside [0, ${V})`);
      for (let i = 0; i < j; i++)
        if (ids[r * k + i] === id) throw new LossInputError(`${op}: row ${r}: teacher token ${id} is listed twice`);
      const v = lp[r * k + j];
      if (!(v <= 0) || !Number.isFinite(v))
        throw new LossInputError(`${op}: row ${r}: teacher log-prob ${v} of token ${id} is not a finite value ≤ 0`);
      mass += Math.exp(v);
    }
    if (mass > 1 + 1e-3)
      throw new LossInputError(`${op}: row ${r}: the teacher's top-k probabilities add up to ${mass} > 1`);
  }
  const reverse = kind === "reverse_kl";
  if (isChunkedLogits(student)) {
    const values = mapLogitChunks(op, student, (chunk, s, e) =>
      dense(op, chunk, ids.subarray(s * k, e * k), lp.subarray(s * k, e * k), k, mask.subarray(s, e), reverse),
    );
    return reshape(values, lead);
  }
  const flat = reshape(student, [rows, V]);
  return reshape(dense(op, flat, ids, lp, k, mask, reverse), lead);
}

function dense(
  op: string,
  student: Tensor,
  ids: Int32Array,
  lp: Float64Array,
  k: number,
  mask: Uint8Array,
  reverse: boolean,
): Tensor {
  const { rows, vocab: V } = logitRows(op, "student logits", student);
  const z = student.dataSync() as Float32Array;
  const out = new Float32Array(rows);
  const keepGrad = isGradEnabled() && student.requiresGrad;
  const grad = keepGrad ? new Float32Array(rows * V) : null;
  // Bucket of each vocabulary entry for the current row: j < k, or k for the tail.
  const bucket = new Int32Array(V).fill(k);
  const sB = new Float64Array(k + 1); // log S_B
  const pB = new Float64Array(k + 1); // log P_B
  const d = new Float64Array(k + 1); // reverse: log S_B − log P_B; forward: P_B / S_B
  for (let r = 0; r < rows; r++) {
    if (!mask[r]) continue;
    const o = r * V;
    let mx = Number.NEGATIVE_INFINITY;
    for (let v = 0; v < V; v++) if (z[o + v] > mx) mx = z[o + v];
    let sum = 0;
    for (let v = 0; v < V; v++) sum += Math.exp(z[o + v] - mx);
    const lse = mx + Math.log(sum);
    let teacherMass = 0;
    let listed = 0; // distinct ids (checked), so listed = V means there is no tail
    let tailSum = 0; // Σ over tail tokens of e^{z − mx}, summed directly (no 1 − Σ cancellation)
    for (let j = 0; j < k; j++) {
      const id = ids[r * k + j];
      if (id >= 0) bucket[id] = j;
    }
    for (let v = 0; v < V; v++) if (bucket[v] === k) tailSum += Math.exp(z[o + v] - mx);
    for (let j = 0; j < k; j++) {
      const id = ids[r * k + j];
      if (id < 0) {
        sB[j] = Number.NEGATIVE_INFINITY;
        pB[j] = Number.NEGATIVE_INFINITY;
        continue;
      }
      listed++;
      sB[j] = z[o + id] - lse;
      pB[j] = lp[r * k + j];
      teacherMass += Math.exp(pB[j]);
    }
    sB[k] = tailSum > 0 ? mx + Math.log(tailSum) - lse : Number.NEGATIVE_INFINITY;
    pB[k] = Math.log(Math.max(1 - teacherMass, MIN_TAIL_MASS));
    let loss = 0;
    // Every token listed: there is no tail bucket (its floored teacher mass would face S = 0).
    const buckets = listed === V ? k : k + 1;
    for (let b = 0; b < buckets; b++) {
      if (b < k && ids[r * k + b] < 0) continue;
      const S = Math.exp(sB[b]);
      const P = Math.exp(pB[b]);
      if (reverse) {
        d[b] = sB[b] - pB[b];
        if (S > 0) loss += S * d[b];
      } else {
        d[b] = S > 0 ? Math.exp(pB[b] - sB[b]) : 0;
        if (P > 0) loss += P * (pB[b] - sB[b]);
      }
    }
    out[r] = loss;
    if (grad) {
      for (let v = 0; v < V; v++) {
        const Sv = Math.exp(z[o + v] - lse);
        const b = bucket[v];
        grad[o + v] = reverse ? Sv * (d[b] - loss) : Sv - Sv * d[b];
      }
    }
    for (let j = 0; j < k; j++) {
      const id = ids[r * k + j];
      if (id >= 0) bucket[id] = k;
    }
  }
  const values = new Tensor(out, [rows]);
  if (!grad) return values;
  return record(values, reverse ? "teacher_top_k_rkl" : "teacher_top_k_fkl", [student], (g) => {
    const gd = g.dataSync() as Float32Array;
    const gz = new Float32Array(rows * V);
    for (let r = 0; r < rows; r++) {
      const c = gd[r];
      if (c === 0 || !mask[r]) continue;
      for (let v = 0; v < V; v++) gz[r * V + v] = grad[r * V + v] * c;
    }
    return [new Tensor(gz, [rows, V])];
  });
}

import type { KlRowsShape } from "../../kernel-contract.js";

/** Per row: lse = logsumexp(logits); loss = lse − logits[target]; ignored rows: loss 0 (lse still stored). */
export function crossEntropyForwardJs(
  logits: Float32Array,
  targets: Int32Array,
  loss: Float32Array,
  lse: Float32Array,
  rows: number,
  vocab: number,
  ignoreIndex: number,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * vocab;
    let max = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < vocab; j++) if (logits[o + j] > max) max = logits[o + j];
    let sum = 0;
    for (let j = 0; j < vocab; j++) sum += Math.exp(logits[o + j] - max);
    const l = max + Math.log(sum);
    lse[r] = l;
    const t = targets[r];
    loss[r] = t === ignoreIndex ? 0 : l - logits[o + t];
  }
}

/** dlogits = (softmax − onehot(target))·gradLoss per row, recomputing softmax from the saved lse. */
export function crossEntropyBackwardJs(
  logits: Float32Array,
  targets: Int32Array,
  lse: Float32Array,
  gradLoss: Float32Array,
  dlogits: Float32Array,
  rows: number,
  vocab: number,
  ignoreIndex: number,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * vocab;
    const t = targets[r];
    if (t === ignoreIndex) {
      dlogits.fill(0, o, o + vocab);
      continue;
    }
    const g = gradLoss[r];
    const l = lse[r];
    for (let j = 0; j < vocab; j++) dlogits[o + j] = Math.exp(logits[o + j] - l) * g;
    dlogits[o + t] -= g;
  }
}

/** probs = softmax(logits)·rowScale[r], lse = logsumexp(logits) per row; `probs` may alias `logits`. */
export function softmaxRowsJs(
  logits: Float32Array,
  probs: Float32Array,
  lse: Float32Array,
  rows: number,
  vocab: number,
  rowScale?: Float32Array | null,
): void {
  for (let r = 0; r < rows; r++) {
    const o = r * vocab;
    let max = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < vocab; j++) if (logits[o + j] > max) max = logits[o + j];
    let sum = 0;
    for (let j = 0; j < vocab; j++) {
      const e = Math.exp(logits[o + j] - max);
      probs[o + j] = e;
      sum += e;
    }
    lse[r] = max + Math.log(sum);
    const inv = (rowScale ? rowScale[r] : 1) / sum;
    for (let j = 0; j < vocab; j++) probs[o + j] *= inv;
  }
}

/** Reference for `klDivergenceRows` (see kernel-contract.ts): float64 sums, zero weights skipped (0·log 0 = 0). */
export function klDivergenceRowsJs(
  student: Float32Array,
  teacher: Float32Array,
  teacherRows: Int32Array | null,
  grad: Float32Array | null,
  loss: Float32Array,
  lseS: Float32Array,
  lseT: Float32Array,
  shape: KlRowsShape,
  gradRowScale?: Float32Array | null,
): void {
  const { rows, vocab, scale: c, reverse } = shape;
  for (let r = 0; r < rows; r++) {
    const os = r * vocab;
    const ot = (teacherRows ? teacherRows[r] : r) * vocab;
    let ms = Number.NEGATIVE_INFINITY;
    let mt = Number.NEGATIVE_INFINITY;
    for (let j = 0; j < vocab; j++) {
      if (student[os + j] * c > ms) ms = student[os + j] * c;
      if (teacher[ot + j] * c > mt) mt = teacher[ot + j] * c;
    }
    let ss = 0;
    let st = 0;
    for (let j = 0; j < vocab; j++) {
      ss += Math.exp(student[os + j] * c - ms);
      st += Math.exp(teacher[ot + j] * c - mt);
    }
    const ls = ms + Math.log(ss);
    const lt = mt + Math.log(st);
    let kl = 0;
    for (let j = 0; j < vocab; j++) {
      const s = student[os + j] * c - ls;
      const p = teacher[ot + j] * c - lt;
      const w = Math.exp(reverse ? s : p);
      if (w !== 0) kl += w * (reverse ? s - p : p - s);
    }
    loss[r] = kl;
    lseS[r] = ls;
    lseT[r] = lt;
    if (!grad) continue;
    const g = gradRowScale ? gradRowScale[r] : 1;
    for (let j = 0; j < vocab; j++) {
      const s = student[os + j] * c - ls;
      const p = teacher[ot + j] * c - lt;
      grad[os + j] = g * (reverse ? Math.exp(s) * (s - p - kl) : Math.exp(s) - Math.exp(p));
    }
  }
}

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

/** probs = softmax(logits), lse = logsumexp(logits) per row; `probs` may alias `logits`. */
export function softmaxRowsJs(
  logits: Float32Array,
  probs: Float32Array,
  lse: Float32Array,
  rows: number,
  vocab: number,
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
    const inv = 1 / sum;
    for (let j = 0; j < vocab; j++) probs[o + j] *= inv;
  }
}

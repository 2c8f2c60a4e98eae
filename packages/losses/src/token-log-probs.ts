// Fused, chunked log p(target) per row. When a gradient will be needed, the forward writes
// softmax (chunk by chunk, one exp per logit) into the buffer that the backward rescales in
// place and hands over as the logits' gradient; otherwise it keeps only each row's logsumexp.
// No [N × V] log-softmax tensor is ever held, so peak memory beyond the logits is one
// [N × V] buffer (PyTorch holds the log-softmax and the gradient).
import { Tensor, isGradEnabled, kernel, narrow, record, reshape } from "@kiln/tensor";
import { type Logits, isChunkedLogits, logitsLayout, mapLogitChunks } from "./chunked-logits.js";
import { LossInputError } from "./errors.js";
import { checkPositiveInt, defaultChunkRows, expectedGradientRows, indexData, logitRows } from "./inputs.js";
import { scaleRow } from "./row-ops.js";

export interface TokenLogProbsOptions {
  /** Targets equal to this get log-prob 0 and no gradient (transformers: −100). */
  ignoreIndex?: number;
  /** Rows per kernel call (default: about 16 MiB of logits). Bounds a backend's scratch copy. */
  chunkRows?: number;
  /**
   * The gradient the output is expected to receive in the backward, per row or one number for
   * all rows (−1/N below a mean of −log p, as in `sftLoss`). The forward then stores the softmax
   * already scaled by it, and a backward that receives exactly this gradient skips the pass over
   * the vocabulary. Any other gradient is still exact (the rows are rescaled or rebuilt).
   */
  expectedGradient?: number | ArrayLike<number>;
}

/**
 * log softmax(logits)[target] for every row of `logits` [..., V] with `targets` [...] (i32),
 * shaped like `targets`; 0 where the target is `ignoreIndex`. `logits` may be `ChunkedLogits`
 * (hidden states + head): then no more than one chunk of logits ever exists.
 * Same values as `@kiln/tensor`'s `tokenLogProbs`, and a number in place of the options is taken
 * as the ignore index, so a call written for either one works with both.
 */
export function tokenLogProbs(
  logits: Logits,
  targets: Tensor,
  optionsOrIgnoreIndex: TokenLogProbsOptions | number = {},
): Tensor {
  const op = "tokenLogProbs";
  const options: TokenLogProbsOptions =
    typeof optionsOrIgnoreIndex === "number" ? { ignoreIndex: optionsOrIgnoreIndex } : optionsOrIgnoreIndex;
  const ignoreIndex = options.ignoreIndex ?? -100;
  if (isChunkedLogits(logits)) {
    const { rows } = logitsLayout(op, "logits", logits);
    indexData(op, "targets", targets, rows);
    const expected = expectedGradientRows(op, options.expectedGradient, rows);
    const flatTargets = reshape(targets, [rows]);
    const values = mapLogitChunks(op, logits, (chunk, s, e) =>
      tokenLogProbs(chunk, narrow(flatTargets, 0, s, e), {
        ignoreIndex,
        chunkRows: options.chunkRows,
        expectedGradient: expected ? expected.subarray(s, e) : undefined,
      }),
    );
    return reshape(values, targets.shape);
  }
  const { rows, vocab } = logitRows(op, "logits", logits);
  const td = indexData(op, "targets", targets, rows);
  for (let i = 0; i < rows; i++) {
    const t = td[i];
    if (t !== ignoreIndex && (t < 0 || t >= vocab || !Number.isInteger(t))) {
      throw new LossInputError(
        `${op}: target ${t} at row ${i} is outside [0, ${vocab}) and is not the ignore index ${ignoreIndex}`,
      );
    }
  }
  const chunk = options.chunkRows ?? defaultChunkRows(vocab);
  checkPositiveInt(op, "chunkRows", chunk);
  const ld = logits.dataSync() as Float32Array;
  const out = new Float32Array(rows);
  const lse = new Float32Array(rows);
  if (isGradEnabled() && logits.requiresGrad) {
    // Training: the forward writes −e·softmax (e: the expected gradient, −1 without a hint) into the
    // buffer that becomes the gradient, so every logit is exponentiated once and the backward only
    // adds g at each target (and rescales rows whose gradient differs from e).
    // without a hint the rows hold softmax itself, i.e. e = −1
    const expected = expectedGradientRows(op, options.expectedGradient, rows) ?? new Float32Array(rows).fill(-1);
    const rowScale = new Float32Array(rows);
    for (let i = 0; i < rows; i++) rowScale[i] = td[i] === ignoreIndex ? 0 : -expected[i];
    const probs = new Float32Array(rows * vocab);
    const softmax = kernel("softmaxRows");
    // Runs of rows with a target, at most `chunk` rows per call: ignored rows (prompt tokens under a
    // completion mask, often most of a batch) cost nothing and keep a zero gradient.
    for (let r0 = 0; r0 < rows; ) {
      if (td[r0] === ignoreIndex) {
        r0++;
        continue;
      }
      let r1 = r0 + 1;
      while (r1 < rows && r1 - r0 < chunk && td[r1] !== ignoreIndex) r1++;
      softmax(
        ld.subarray(r0 * vocab, r1 * vocab),
        probs.subarray(r0 * vocab, r1 * vocab),
        lse.subarray(r0, r1),
        r1 - r0,
        vocab,
        rowScale.subarray(r0, r1),
      );
      r0 = r1;
    }
    for (let i = 0; i < rows; i++) out[i] = td[i] === ignoreIndex ? 0 : ld[i * vocab + td[i]] - lse[i];
    let saved: Float32Array | null = probs;
    return record(new Tensor(out, targets.shape), op, [logits], (g) => {
      const gd = g.dataSync() as Float32Array;
      if (saved === null) return [recomputedGradient(ld, td, lse, gd, rows, vocab, chunk, ignoreIndex, logits.shape)];
      // d(log p_t)/dlogits = g·(onehot − softmax); the row holds −e·softmax. Handed over as the gradient.
      const d = saved;
      saved = null;
      for (let i = 0; i < rows; i++) {
        const t = td[i];
        const c = gd[i];
        if (t === ignoreIndex) continue; // never written: zeros
        const o = i * vocab;
        if (c !== expected[i]) {
          if (expected[i] !== 0) scaleRow(d, o, vocab, c / expected[i]);
          else rebuildRow(d, ld, o, vocab, lse[i], c);
        }
        d[o + t] += c;
      }
      return [new Tensor(d, logits.shape)];
    });
  }
  const forward = kernel("crossEntropyForward");
  const loss = new Float32Array(rows);
  for (let r0 = 0; r0 < rows; r0 += chunk) {
    const r1 = Math.min(rows, r0 + chunk);
    forward(
      ld.subarray(r0 * vocab, r1 * vocab),
      td.subarray(r0, r1),
      loss.subarray(r0, r1),
      lse.subarray(r0, r1),
      r1 - r0,
      vocab,
      ignoreIndex,
    );
  }
  for (let i = 0; i < rows; i++) out[i] = 0 - loss[i];
  return record(new Tensor(out, targets.shape), op, [logits], (g) => [
    recomputedGradient(ld, td, lse, g.dataSync() as Float32Array, rows, vocab, chunk, ignoreIndex, logits.shape),
  ]);
}

/** d = −c·softmax over one row, from the logits and the row's logsumexp. */
function rebuildRow(d: Float32Array, ld: Float32Array, o: number, n: number, lse: number, c: number): void {
  for (let j = o; j < o + n; j++) d[j] = -c * Math.exp(ld[j] - lse);
}

/** The gradient rebuilt from the logits and saved logsumexps (a second backward, or no saved softmax). */
function recomputedGradient(
  ld: Float32Array,
  td: Int32Array,
  lse: Float32Array,
  gd: Float32Array,
  rows: number,
  vocab: number,
  chunk: number,
  ignoreIndex: number,
  shape: readonly number[],
): Tensor {
  // d(−loss)/dlogits = onehot − softmax: the CE kernel's gradient with gradLoss = −g.
  const gradLoss = new Float32Array(rows);
  for (let i = 0; i < rows; i++) gradLoss[i] = -gd[i];
  const dlogits = new Float32Array(rows * vocab);
  const backward = kernel("crossEntropyBackward");
  for (let r0 = 0; r0 < rows; r0 += chunk) {
    const r1 = Math.min(rows, r0 + chunk);
    let any = false;
    for (let i = r0; i < r1; i++) if (gradLoss[i] !== 0 && td[i] !== ignoreIndex) any = true;
    if (!any) continue; // the buffer is already zero
    backward(
      ld.subarray(r0 * vocab, r1 * vocab),
      td.subarray(r0, r1),
      lse.subarray(r0, r1),
      gradLoss.subarray(r0, r1),
      dlogits.subarray(r0 * vocab, r1 * vocab),
      r1 - r0,
      vocab,
      ignoreIndex,
    );
  }
  return new Tensor(dlogits, shape);
}

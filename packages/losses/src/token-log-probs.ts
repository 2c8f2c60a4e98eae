// Fused, chunked log p(target) per row: the forward keeps only each row's logsumexp
// (N floats); the backward rebuilds softmax from it chunk by chunk straight into the
// gradient buffer. No [N × V] log-softmax or probability tensor is ever held, so peak
// memory beyond the logits is their gradient alone (PyTorch keeps the log-softmax too).
import { Tensor, kernel, record } from "@kiln/tensor";
import { LossInputError } from "./errors.js";
import { checkPositiveInt, defaultChunkRows, indexData, logitRows } from "./inputs.js";

export interface TokenLogProbsOptions {
  /** Targets equal to this get log-prob 0 and no gradient (transformers: −100). */
  ignoreIndex?: number;
  /** Rows per kernel call (default: about 16 MiB of logits). Bounds a backend's scratch copy. */
  chunkRows?: number;
}

/**
 * log softmax(logits)[target] for every row of `logits` [..., V] with `targets` [...] (i32),
 * shaped like `targets`; 0 where the target is `ignoreIndex`.
 */
export function tokenLogProbs(logits: Tensor, targets: Tensor, options: TokenLogProbsOptions = {}): Tensor {
  const op = "tokenLogProbs";
  const ignoreIndex = options.ignoreIndex ?? -100;
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
  const ld = logits.data as Float32Array;
  const loss = new Float32Array(rows);
  const lse = new Float32Array(rows);
  const forward = kernel("crossEntropyForward");
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
  const out = new Float32Array(rows);
  for (let i = 0; i < rows; i++) out[i] = 0 - loss[i];
  return record(new Tensor(out, targets.shape), op, [logits], (g) => {
    const gd = g.data as Float32Array;
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
    return [new Tensor(dlogits, logits.shape)];
  });
}

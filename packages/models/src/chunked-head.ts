// The vocabulary projection fused with the per-token log-probability, row-chunked: at most
// `chunkRows × V` logits exist at any time, in the forward and in the backward (which recomputes
// each chunk's logits instead of keeping them). One 2,048-token row at V = 151,936 would be
// 1.2 GB of logits plus as much gradient; here it is `chunkRows / 2,048` of that.
import {
  Tensor,
  backwardMany,
  concat,
  isGradEnabled,
  narrow,
  noGrad,
  reshape,
  takeGrad,
  tokenLogProbs,
  withGrad,
} from "@kiln/tensor";
import { GenerationError } from "./errors.js";
import type { Linear } from "./linear.js";

export interface HeadLogProbsOptions {
  /** Targets equal to this get log-prob 0 and no gradient. Default −100. */
  ignoreIndex?: number;
  /** Rows per chunk. Default: about 4 Mi logits per chunk (16 MiB in f32), at least 1 row. */
  chunkRows?: number;
}

/** Rows per chunk so that one chunk of logits holds about `budget` values. */
export function defaultHeadChunkRows(vocab: number, budget = 4 * 1024 * 1024): number {
  return Math.max(1, Math.floor(budget / Math.max(vocab, 1)));
}

/**
 * log softmax(head(hidden))[target] for every row of `hidden` [..., D] with `targets` [...] (i32),
 * shaped like `targets`; 0 where the target is `ignoreIndex`. Gradients reach `hidden` and
 * whatever the head trains (its weight when it requires grad, LoRA adapters on it).
 */
export function headTokenLogProbs(
  head: Linear,
  hidden: Tensor,
  targets: Tensor,
  options: HeadLogProbsOptions = {},
): Tensor {
  const D = hidden.shape[hidden.rank - 1];
  if (D !== head.inFeatures) {
    throw new GenerationError(
      `headTokenLogProbs: hidden [${hidden.shape.join(", ")}] has ${D} features, the head expects ${head.inFeatures}`,
    );
  }
  const N = hidden.size / D;
  if (targets.dtype !== "i32" || targets.size !== N) {
    throw new GenerationError(
      `headTokenLogProbs: targets ${targets.dtype} [${targets.shape.join(", ")}] must be i32 with one target per hidden row (${N})`,
    );
  }
  const ignoreIndex = options.ignoreIndex ?? -100;
  const rows = options.chunkRows ?? defaultHeadChunkRows(head.outFeatures);
  if (!(Number.isInteger(rows) && rows >= 1))
    throw new GenerationError(`headTokenLogProbs: chunkRows ${rows} must be a positive integer`);
  const flatHidden = reshape(hidden, [N, D]);
  const flatTargets = reshape(targets, [N]);
  const starts: number[] = [];
  for (let r = 0; r < N; r += rows) starts.push(r);
  const chunkLogProbs = (h: Tensor, r: number) =>
    tokenLogProbs(head.forward(h), narrow(flatTargets, 0, r, Math.min(r + rows, N)), ignoreIndex);
  const values = noGrad(() => {
    const parts = starts.map((r) => chunkLogProbs(narrow(flatHidden, 0, r, Math.min(r + rows, N)), r));
    return parts.length === 1 ? parts[0] : concat(parts, 0);
  });
  const result = reshape(values, targets.shape);
  if (!isGradEnabled()) return result;
  // On the tape even when `hidden` needs no gradient: the head itself may train (as in checkpoint()).
  result.requiresGrad = true;
  result.node = {
    op: "headTokenLogProbs",
    inputs: [hidden],
    backward: (g) => {
      const flatGrad = reshape(g, [N]);
      const base = flatHidden.detach();
      const grads: Tensor[] = [];
      for (const r of starts) {
        const end = Math.min(r + rows, N);
        const h = narrow(base, 0, r, end).detach();
        h.requiresGrad = hidden.requiresGrad;
        const lp = withGrad(() => chunkLogProbs(h, r));
        if (lp.requiresGrad) backwardMany([lp], [narrow(flatGrad, 0, r, end)]);
        const hg = takeGrad(h);
        if (hidden.requiresGrad) grads.push(hg ?? Tensor.zeros([end - r, D]));
      }
      if (!hidden.requiresGrad) return [null];
      return [reshape(grads.length === 1 ? grads[0] : concat(grads, 0), hidden.shape)];
    },
  };
  return result;
}

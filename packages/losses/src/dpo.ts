// DPO family (TRL dpo_trainer ≥ v0.29; docs/NUMERICS.md §3.2). One fused op per batch: the
// per-pair loss and its derivative with respect to the policy log-probs are closed forms, so
// no intermediate tensors are recorded. Reference log-probs are constants.
import { Tensor, narrow, noGrad, record } from "@kiln/tensor";
import { LossInputError, LossOptionError } from "./errors.js";
import { fmt, maskValues } from "./inputs.js";
import type { LossResult } from "./result.js";
import { sequenceLogProbs } from "./sequence-log-probs.js";
import { type Logits, forEachLogitChunk, isChunkedLogits, logitsLayout } from "./chunked-logits.js";

export type DpoLossType = "sigmoid" | "robust" | "hinge" | "ipo";

export interface DpoOptions {
  /** β, the KL-penalty temperature. Default 0.1 (TRL DPOConfig). */
  beta?: number;
  /** Default "sigmoid". */
  lossType?: DpoLossType;
  /** ε ∈ [0, 0.5) for `robust` only; `sigmoid` ignores it since TRL v0.29. Default 0. */
  labelSmoothing?: number;
}

export interface DpoInputs {
  /** [P] summed policy log-probs of the chosen completions (requires grad). */
  policyChosenLogps: Tensor;
  policyRejectedLogps: Tensor;
  /** [P] reference log-probs (precomputed, or from the adapter-off model under noGrad). */
  refChosenLogps: Tensor;
  refRejectedLogps: Tensor;
  /** Completion token counts per pair: required by `ipo`, which averages log-ratios per token. */
  chosenTokens?: ArrayLike<number>;
  rejectedTokens?: ArrayLike<number>;
}

function softplus(x: number): number {
  return x > 0 ? x + Math.log1p(Math.exp(-x)) : Math.log1p(Math.exp(x));
}

function sigmoid(x: number): number {
  return x >= 0 ? 1 / (1 + Math.exp(-x)) : Math.exp(x) / (1 + Math.exp(x));
}

function values(op: string, name: string, t: Tensor, n: number): Float32Array {
  if (t.dtype !== "f32" || t.size !== n)
    throw new LossInputError(`${op}: ${name} must be f32 with ${n} elements, got ${t.dtype} ${fmt(t.shape)}`);
  return t.dataSync() as Float32Array;
}

/**
 * DPO-family loss over P preference pairs, mean over pairs. With ρ = log πθ − log πref and
 * Δ = ρ_chosen − ρ_rejected:
 * - sigmoid: −log σ(βΔ)
 * - robust: [−(1−ε) log σ(βΔ) + ε log σ(−βΔ)] / (1 − 2ε)
 * - hinge: max(0, 1 − βΔ)
 * - ipo: (Δ̄ − 1/(2β))², Δ̄ from per-token-averaged log-ratios
 * Metrics (from the summed log-ratios, whatever the loss): rewards/chosen, rewards/rejected,
 * rewards/accuracies, rewards/margins, logps/chosen, logps/rejected.
 */
export function dpoLoss(inputs: DpoInputs, options: DpoOptions = {}): LossResult {
  const op = "dpoLoss";
  const beta = options.beta ?? 0.1;
  const lossType = options.lossType ?? "sigmoid";
  const eps = options.labelSmoothing ?? 0;
  if (!(beta > 0) || !Number.isFinite(beta))
    throw new LossOptionError(`${op}: beta must be a positive finite number, got ${beta}`);
  if (!["sigmoid", "robust", "hinge", "ipo"].includes(lossType)) {
    throw new LossOptionError(`${op}: lossType must be one of sigmoid, robust, hinge, ipo; got ${String(lossType)}`);
  }
  if (!(eps >= 0 && eps < 0.5)) throw new LossOptionError(`${op}: labelSmoothing must be in [0, 0.5), got ${eps}`);
  const { policyChosenLogps: pcT, policyRejectedLogps: prT } = inputs;
  const P = pcT.size;
  if (P === 0) throw new LossInputError(`${op}: no preference pairs (policyChosenLogps is empty)`);
  const pc = values(op, "policyChosenLogps", pcT, P);
  const pr = values(op, "policyRejectedLogps", prT, P);
  const rc = values(op, "refChosenLogps", inputs.refChosenLogps, P);
  const rr = values(op, "refRejectedLogps", inputs.refRejectedLogps, P);
  let nc: ArrayLike<number> | undefined;
  let nr: ArrayLike<number> | undefined;
  if (lossType === "ipo") {
    nc = inputs.chosenTokens;
    nr = inputs.rejectedTokens;
    if (!nc || !nr || nc.length !== P || nr.length !== P) {
      throw new LossInputError(`${op}: lossType "ipo" needs chosenTokens and rejectedTokens with ${P} counts each`);
    }
    for (let i = 0; i < P; i++) {
      if (!(nc[i] > 0) || !(nr[i] > 0))
        throw new LossInputError(`${op}: pair ${i} has a completion with no tokens (ipo averages per token)`);
    }
  }
  // Per pair: loss ℓ_i and its derivatives w.r.t. the policy chosen / rejected log-probs.
  const dChosen = new Float64Array(P);
  const dRejected = new Float64Array(P);
  let total = 0;
  let rewardsChosen = 0;
  let rewardsRejected = 0;
  let accuracies = 0;
  let logpsChosen = 0;
  let logpsRejected = 0;
  for (let i = 0; i < P; i++) {
    const rhoC = pc[i] - rc[i];
    const rhoR = pr[i] - rr[i];
    const delta = rhoC - rhoR;
    const z = beta * delta;
    let l: number;
    let dz: number; // dℓ/dz, z = βΔ (not used by ipo)
    if (lossType === "sigmoid") {
      l = softplus(-z);
      dz = -sigmoid(-z);
    } else if (lossType === "robust") {
      l = ((1 - eps) * softplus(-z) - eps * softplus(z)) / (1 - 2 * eps);
      dz = (-(1 - eps) * sigmoid(-z) - eps * sigmoid(z)) / (1 - 2 * eps);
    } else if (lossType === "hinge") {
      l = Math.max(0, 1 - z);
      dz = z < 1 ? -1 : 0;
    } else {
      const ncI = (nc as ArrayLike<number>)[i];
      const nrI = (nr as ArrayLike<number>)[i];
      const dbar = rhoC / ncI - rhoR / nrI;
      const u = dbar - 1 / (2 * beta);
      l = u * u;
      dChosen[i] = (2 * u) / ncI / P;
      dRejected[i] = (-2 * u) / nrI / P;
      dz = 0;
    }
    if (lossType !== "ipo") {
      dChosen[i] = (dz * beta) / P;
      dRejected[i] = (-dz * beta) / P;
    }
    total += l;
    rewardsChosen += beta * rhoC;
    rewardsRejected += beta * rhoR;
    if (beta * rhoC > beta * rhoR) accuracies++;
    logpsChosen += pc[i];
    logpsRejected += pr[i];
  }
  const loss = record(new Tensor(Float32Array.of(total / P), []), `dpo_${lossType}`, [pcT, prT], (g) => {
    const s = (g.dataSync() as Float32Array)[0];
    return [
      new Tensor(
        Float32Array.from(dChosen, (d) => d * s),
        pcT.shape,
      ),
      new Tensor(
        Float32Array.from(dRejected, (d) => d * s),
        prT.shape,
      ),
    ];
  });
  const metrics = {
    loss: total / P,
    "rewards/chosen": rewardsChosen / P,
    "rewards/rejected": rewardsRejected / P,
    "rewards/accuracies": accuracies / P,
    "rewards/margins": (rewardsChosen - rewardsRejected) / P,
    "logps/chosen": logpsChosen / P,
    "logps/rejected": logpsRejected / P,
  };
  return { loss, metrics };
}

export interface DpoBatch {
  /**
   * [2P, T, V] policy logits; rows 0..P−1 are prompt+chosen, rows P..2P−1 prompt+rejected (TRL layout).
   * `ChunkedLogits` (hidden [2P, T, D] + head) keep the full logits from ever existing.
   */
  policyLogits: Logits;
  /** [2P, T] token ids. */
  inputIds: Tensor;
  /** [2P, T] 1 on completion tokens. */
  completionMask: Tensor;
  /**
   * Reference: precomputed summed log-probs [2P] (same layout), or a function returning reference
   * logits [2P, T, V] — e.g. the same model with its adapter disabled. It runs under noGrad.
   */
  reference: { logps: Tensor } | { logits: () => Logits };
  chunkRows?: number;
}

/** DPO from logits: per-sequence log-probs of policy and reference, then `dpoLoss`. Adds `num_tokens`. */
export function dpoLossFromLogits(batch: DpoBatch, options: DpoOptions = {}): LossResult {
  const op = "dpoLossFromLogits";
  const { policyLogits } = batch;
  const layout = logitsLayout(op, "policyLogits", policyLogits);
  const shape = [...layout.lead, layout.vocab];
  if (shape.length !== 3 || shape[0] % 2 !== 0) {
    throw new LossInputError(
      `${op}: policyLogits must be [2P, T, V] (chosen rows then rejected rows), got ${fmt(shape)}`,
    );
  }
  const P = shape[0] / 2;
  const policy = sequenceLogProbs(policyLogits, batch.inputIds, batch.completionMask, { chunkRows: batch.chunkRows });
  const ref = noGrad(() => {
    if ("logps" in batch.reference) {
      const r = batch.reference.logps;
      if (r.size !== 2 * P)
        throw new LossInputError(`${op}: reference logps ${fmt(r.shape)} must have ${2 * P} values`);
      return r.detach();
    }
    const logits = batch.reference.logits();
    const ref = logitsLayout(op, "reference logits", logits);
    const refShape = [...ref.lead, ref.vocab];
    if (refShape.length !== 3 || refShape[0] !== 2 * P || refShape[1] !== shape[1]) {
      throw new LossInputError(`${op}: reference logits ${fmt(refShape)} must match policy logits ${fmt(shape)}`);
    }
    return sequenceLogProbs(logits, batch.inputIds, batch.completionMask, { chunkRows: batch.chunkRows }).logps;
  });
  const pc = narrow(policy.logps, 0, 0, P);
  const pr = narrow(policy.logps, 0, P, 2 * P);
  const refData = ref.dataSync() as Float32Array;
  const result = dpoLoss(
    {
      policyChosenLogps: pc,
      policyRejectedLogps: pr,
      refChosenLogps: new Tensor(refData.slice(0, P), [P]),
      refRejectedLogps: new Tensor(refData.slice(P, 2 * P), [P]),
      chosenTokens: policy.tokens.subarray(0, P),
      rejectedTokens: policy.tokens.subarray(P),
    },
    options,
  );
  let n = 0;
  for (const c of policy.tokens) n += c;
  result.metrics.num_tokens = n;
  // TRL logits/chosen|rejected: mean logit over the positions that score completion tokens.
  const [meanChosen, meanRejected] = meanCompletionLogits(policyLogits, batch.completionMask, P);
  result.metrics["logits/chosen"] = meanChosen;
  result.metrics["logits/rejected"] = meanRejected;
  return result;
}

function meanCompletionLogits(logits: Logits, completionMask: Tensor, P: number): [number, number] {
  const op = "dpoLossFromLogits";
  const { lead, vocab: V } = logitsLayout(op, "policyLogits", logits);
  const [B, T] = lead;
  const mask = maskValues(op, "completionMask", completionMask, B * T);
  const sums = [0, 0];
  const counts = [0, 0];
  // Rows [start, end) of the flat [B·T, V] logits, with `d` holding exactly those rows.
  const addRows = (d: Float32Array, start: number, end: number) => {
    for (let r = start; r < end; r++) {
      const b = Math.floor(r / T);
      const t = r % T;
      if (t + 1 >= T || !mask[b * T + t + 1]) continue;
      const half = b < P ? 0 : 1;
      const o = (r - start) * V;
      let s = 0;
      for (let j = 0; j < V; j++) s += d[o + j];
      sums[half] += s;
      counts[half] += V;
    }
  };
  if (isChunkedLogits(logits))
    forEachLogitChunk(op, logits, (chunk, s, e) => addRows(chunk.dataSync() as Float32Array, s, e));
  else addRows(logits.dataSync() as Float32Array, 0, B * T);
  return [sums[0] / counts[0], sums[1] / counts[1]];
}

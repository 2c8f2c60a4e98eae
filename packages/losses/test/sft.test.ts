import { Tensor, backward, tensor, tokenLogProbs as tensorTokenLogProbs } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import {
  LossInputError,
  LossOptionError,
  countTargetTokens,
  labelsFromMask,
  sftLoss,
  shiftLabels,
  tokenAccuracy,
  tokenEntropy,
  tokenLogProbs,
} from "../src/index.js";
import { expectClose, logSoftmax, numericGrad, randomArray, rng, rowsOf } from "./reference.js";

function batch(B: number, T: number, V: number, seed: number) {
  const logits = randomArray(B * T * V, seed, 2);
  const r = rng(seed + 1);
  const labels = new Int32Array(B * T);
  for (let i = 0; i < labels.length; i++) labels[i] = r() < 0.3 ? -100 : Math.floor(r() * V);
  return { logits, labels };
}

/** float64 reference: shifted, masked CE summed, and its count. */
function refCe(logits: ArrayLike<number>, labels: Int32Array, B: number, T: number, V: number) {
  const rows = rowsOf(logits, V);
  let total = 0;
  let count = 0;
  for (let b = 0; b < B; b++)
    for (let t = 0; t + 1 < T; t++) {
      const y = labels[b * T + t + 1];
      if (y === -100) continue;
      total -= logSoftmax(rows[b * T + t])[y];
      count++;
    }
  return { total, count };
}

describe("tokenLogProbs (fused, chunked)", () => {
  it("matches float64 log-softmax at the targets and is chunk-size independent", () => {
    const V = 37;
    const logits = randomArray(9 * V, 3, 3);
    const targets = new Int32Array([0, 36, 5, -100, 7, 7, 20, 1, 30]);
    const rows = rowsOf(logits, V);
    const expected = Array.from(targets, (t, i) => (t === -100 ? 0 : logSoftmax(rows[i])[t]));
    for (const chunkRows of [1, 2, 4, 100]) {
      const lp = tokenLogProbs(tensor(logits, [9, V]), tensor(targets, [9], "i32"), { chunkRows });
      expectClose(lp.dataSync() as Float32Array, expected, 2e-6, 2e-6);
    }
  });

  it("takes @kiln/tensor's call form (ignore index as a number) and agrees with @kiln/tensor's tokenLogProbs", () => {
    const V = 11;
    const logits = randomArray(6 * V, 31, 3);
    const targets = new Int32Array([3, -1, 10, 0, -1, 5]);
    const rows = rowsOf(logits, V);
    const expected = Array.from(targets, (t, i) => (t === -1 ? 0 : logSoftmax(rows[i])[t]));
    const l = () => tensor(logits, [6, V]);
    const t = () => tensor(targets, [6], "i32");
    const positional = tokenLogProbs(l(), t(), -1).dataSync() as Float32Array;
    expectClose(positional, expected, 2e-6, 2e-6);
    expectClose(tokenLogProbs(l(), t(), { ignoreIndex: -1 }).dataSync() as Float32Array, expected, 2e-6, 2e-6);
    expectClose(tensorTokenLogProbs(l(), t(), -1).dataSync() as Float32Array, positional, 2e-6, 2e-6);
    expectClose(tensorTokenLogProbs(l(), t(), { ignoreIndex: -1 }).dataSync() as Float32Array, expected, 2e-6, 2e-6);
  });

  it("backward equals onehot − softmax per row, zero on ignored rows", () => {
    const V = 11;
    const logits = tensor(randomArray(4 * V, 5), [4, V]).requireGrad();
    const targets = tensor(new Int32Array([3, -100, 10, 0]), [4], "i32");
    const weights = [0.5, 2, -1, 3];
    const lp = tokenLogProbs(logits, targets, { chunkRows: 3 });
    const loss = (lp.dataSync() as Float32Array).reduce((a, v, i) => a + v * weights[i], 0);
    expect(Number.isFinite(loss)).toBe(true);
    backward(lp, tensor(Float32Array.from(weights), [4]));
    const rows = rowsOf(logits.dataSync() as Float32Array, V);
    const expected: number[] = [];
    for (let r = 0; r < 4; r++) {
      const t = (targets.dataSync() as Int32Array)[r];
      const ls = logSoftmax(rows[r]);
      for (let j = 0; j < V; j++) expected.push(t === -100 ? 0 : weights[r] * ((j === t ? 1 : 0) - Math.exp(ls[j])));
    }
    expectClose(logits.grad?.dataSync() as Float32Array, expected, 1e-6, 1e-5);
  });

  it("rejects targets outside the vocabulary with a typed error", () => {
    expect(() =>
      tokenLogProbs(tensor(new Float32Array(6), [2, 3]), tensor(new Int32Array([0, 3]), [2], "i32")),
    ).toThrow(LossInputError);
  });
});

describe("sftLoss", () => {
  const B = 3;
  const T = 6;
  const V = 13;

  it("mean over target tokens equals the float64 reference; accuracy and entropy too", () => {
    const { logits, labels } = batch(B, T, V, 7);
    const { loss, metrics } = sftLoss(tensor(logits, [B, T, V]), tensor(labels, [B, T], "i32"), { entropy: true });
    const ref = refCe(logits, labels, B, T, V);
    expect(loss.item()).toBeCloseTo(ref.total / ref.count, 5);
    expect(metrics.num_tokens).toBe(ref.count);
    // accuracy / entropy reference
    const rows = rowsOf(logits, V);
    let correct = 0;
    let ent = 0;
    for (let b = 0; b < B; b++)
      for (let t = 0; t + 1 < T; t++) {
        const y = labels[b * T + t + 1];
        if (y === -100) continue;
        const row = rows[b * T + t];
        if (row.indexOf(Math.max(...row)) === y) correct++;
        const ls = logSoftmax(row);
        ent -= ls.reduce((a, v) => a + Math.exp(v) * v, 0);
      }
    expect(metrics.mean_token_accuracy).toBeCloseTo(correct / ref.count, 10);
    expect(metrics.entropy).toBeCloseTo(ent / ref.count, 5);
  });

  it("gradient matches finite differences of the float64 loss", () => {
    const b = 1;
    const t = 4;
    const v = 5;
    const { logits, labels } = batch(b, t, v, 11);
    labels[1] = 2; // at least one target
    const x = tensor(logits, [b, t, v]).requireGrad();
    backward(sftLoss(x, tensor(labels, [b, t], "i32")).loss);
    const f = (vals: number[]) => {
      const r = refCe(vals, labels, b, t, v);
      return r.total / r.count;
    };
    expectClose(x.grad?.dataSync() as Float32Array, numericGrad(f, Array.from(logits)), 1e-5, 1e-3);
  });

  it("a batch with no target token is a no-op: loss +0, zero gradient, num_tokens 0, no NaN", () => {
    const { logits } = batch(B, T, V, 23);
    // all −100, and one where the only target sits at position 0, which the shift drops
    const onlyFirst = new Array(B * T).fill(-100);
    onlyFirst[0] = 4;
    for (const labels of [new Array(B * T).fill(-100), onlyFirst]) {
      for (const reduction of ["mean", "sum"] as const) {
        const x = tensor(logits, [B, T, V]).requireGrad();
        const { loss, metrics } = sftLoss(x, tensor(labels, [B, T], "i32"), { reduction, entropy: true });
        expect(Object.is(loss.item(), 0)).toBe(true);
        expect(metrics.num_tokens).toBe(0);
        for (const value of Object.values(metrics)) expect(Number.isNaN(value)).toBe(false);
        backward(loss);
        const grad = x.grad?.dataSync() as Float32Array;
        expect(grad.length).toBe(B * T * V);
        expect(grad.every((g) => g === 0)).toBe(true);
      }
    }
  });

  it("gradient accumulation with numItemsInBatch equals one large batch", () => {
    const { logits, labels } = batch(4, T, V, 21);
    const full = tensor(logits, [4, T, V]).requireGrad();
    backward(sftLoss(full, tensor(labels, [4, T], "i32")).loss);
    const halves = [0, 1].map((h) => ({
      logits: logits.slice(h * 2 * T * V, (h + 1) * 2 * T * V),
      labels: tensor(labels.slice(h * 2 * T, (h + 1) * 2 * T), [2, T], "i32"),
    }));
    const numItems = halves.reduce((a, h) => a + countTargetTokens(h.labels), 0);
    const grads: Float32Array[] = [];
    let total = 0;
    for (const h of halves) {
      const x = tensor(h.logits, [2, T, V]).requireGrad();
      const { loss } = sftLoss(x, h.labels, { numItemsInBatch: numItems });
      total += loss.item();
      backward(loss);
      grads.push(x.grad?.dataSync() as Float32Array);
    }
    const { loss: fullLoss } = sftLoss(tensor(logits, [4, T, V]), tensor(labels, [4, T], "i32"));
    expect(total).toBeCloseTo(fullLoss.item(), 5);
    const accumulated = new Float32Array(logits.length);
    accumulated.set(grads[0], 0);
    accumulated.set(grads[1], grads[0].length);
    expectClose(accumulated, full.grad?.dataSync() as Float32Array, 1e-7, 1e-4);
    // plain per-micro-batch means would not add up to the large batch
    const perBatchMean = halves.reduce((a, h) => a + sftLoss(tensor(h.logits, [2, T, V]), h.labels).loss.item(), 0);
    expect(Math.abs(perBatchMean - fullLoss.item())).toBeGreaterThan(1e-3);
  });

  it("sum reduction and pre-shifted labels", () => {
    const { logits, labels } = batch(B, T, V, 31);
    const ref = refCe(logits, labels, B, T, V);
    const sum = sftLoss(tensor(logits, [B, T, V]), tensor(labels, [B, T], "i32"), { reduction: "sum" });
    expect(sum.loss.item()).toBeCloseTo(ref.total, 4);
    const pre = sftLoss(tensor(logits, [B, T, V]), shiftLabels(tensor(labels, [B, T], "i32")), {
      shift: false,
      reduction: "sum",
    });
    expect(pre.loss.item()).toBeCloseTo(ref.total, 4);
  });

  it("rejects bad options and mismatched labels", () => {
    const x = tensor(new Float32Array(2 * 3 * 4), [2, 3, 4]);
    expect(() => sftLoss(x, tensor(new Int32Array(5), [5], "i32"))).toThrow(LossInputError);
    expect(() => sftLoss(x, tensor(new Int32Array(6), [2, 3], "i32"), { numItemsInBatch: 0 })).toThrow(LossOptionError);
  });
});

describe("label helpers and stats", () => {
  it("shiftLabels, labelsFromMask and countTargetTokens", () => {
    const ids = tensor(new Int32Array([5, 6, 7, 8, 1, 2, 3, 4]), [2, 4], "i32");
    const labels = labelsFromMask(ids, [0, 0, 1, 1, 0, 1, 1, 0]);
    expect(Array.from(labels.dataSync())).toEqual([-100, -100, 7, 8, -100, 2, 3, -100]);
    expect(Array.from(shiftLabels(labels).dataSync())).toEqual([-100, 7, 8, -100, 2, 3, -100, -100]);
    expect(countTargetTokens(labels)).toBe(4);
    expect(countTargetTokens(tensor(new Int32Array([9, 9, -100]), [3], "i32"), { shift: false })).toBe(2);
  });

  it("tokenAccuracy equals argmax == target on rows where half the targets are the argmax", () => {
    const V = 17;
    const N = 40;
    const logits = randomArray(N * V, 77, 1);
    for (let r = 0; r < N; r += 5) logits[r * V + 3] = logits[r * V + 9] = 9; // ties: argmax is 3
    const rows = rowsOf(logits, V);
    const argmax = rows.map((row) => row.indexOf(Math.max(...row)));
    const targets = Int32Array.from(argmax, (a, i) => (i % 2 === 0 ? a : i % 3 === 0 ? 9 : (a + 1) % V));
    targets[7] = -100;
    const expected = Array.from(targets).filter((t, i) => t !== -100 && t === argmax[i]).length;
    const acc = tokenAccuracy(tensor(logits, [N, V]), tensor(targets, [N], "i32"));
    expect(acc.total).toBe(N - 1);
    expect(acc.correct).toBe(expected);
    expect(expected).toBeGreaterThan(15);
    expect(() => tokenAccuracy(tensor(logits, [N, V]), tensor(new Int32Array(N).fill(V), [N], "i32"))).toThrow(
      LossInputError,
    );
  });

  it("tokenAccuracy breaks ties towards the lowest id, tokenEntropy of a uniform row is log V", () => {
    const logits = new Tensor(Float32Array.from([1, 1, 0, 0, 0, 0, 0, 0]), [2, 4]);
    const acc = tokenAccuracy(logits, tensor(new Int32Array([0, 1]), [2], "i32"));
    expect(acc).toEqual({ correct: 1, total: 2, accuracy: 0.5 });
    const ent = tokenEntropy(logits, { mask: [0, 1] });
    expect(ent.perToken[0]).toBe(0);
    expect(ent.mean).toBeCloseTo(Math.log(4), 6);
  });
});

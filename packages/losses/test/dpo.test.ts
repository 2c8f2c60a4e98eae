import { backward, tensor } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import {
  type DpoLossType,
  LossInputError,
  LossOptionError,
  dpoLoss,
  dpoLossFromLogits,
  sequenceLogProbs,
} from "../src/index.js";
import { expectClose, logSigmoid, logSoftmax, numericGrad, randomArray, rowsOf } from "./reference.js";

const P = 5;

function pairs(seed: number) {
  const v = randomArray(4 * P, seed, 3);
  return {
    pc: Array.from(v.subarray(0, P), (x) => x - 20),
    pr: Array.from(v.subarray(P, 2 * P), (x) => x - 22),
    rc: Array.from(v.subarray(2 * P, 3 * P), (x) => x - 21),
    rr: Array.from(v.subarray(3 * P, 4 * P), (x) => x - 21),
    nc: [3, 7, 1, 4, 9],
    nr: [5, 2, 6, 4, 1],
  };
}

/** float64 transcription of TRL's per-pair losses (docs/NUMERICS.md §3.2). */
function refLoss(
  type: DpoLossType,
  beta: number,
  eps: number,
  pc: number[],
  pr: number[],
  rc: number[],
  rr: number[],
  nc: number[],
  nr: number[],
) {
  let total = 0;
  for (let i = 0; i < pc.length; i++) {
    const d = pc[i] - rc[i] - (pr[i] - rr[i]);
    if (type === "sigmoid") total += -logSigmoid(beta * d);
    else if (type === "robust")
      total += (-(1 - eps) * logSigmoid(beta * d) + eps * logSigmoid(-beta * d)) / (1 - 2 * eps);
    else if (type === "hinge") total += Math.max(0, 1 - beta * d);
    else total += ((pc[i] - rc[i]) / nc[i] - (pr[i] - rr[i]) / nr[i] - 1 / (2 * beta)) ** 2;
  }
  return total / pc.length;
}

describe("dpoLoss", () => {
  const cases: [DpoLossType, number, number][] = [
    ["sigmoid", 0.1, 0],
    ["sigmoid", 0.5, 0.3], // ε is ignored by sigmoid since TRL v0.29
    ["robust", 0.1, 0.2],
    ["hinge", 0.3, 0],
    ["ipo", 0.1, 0],
  ];
  for (const [type, beta, eps] of cases) {
    it(`${type} (β=${beta}, ε=${eps}): value and gradient vs float64 finite differences`, () => {
      const d = pairs(beta * 100 + eps * 10 + type.length);
      const pcT = tensor(Float32Array.from(d.pc)).requireGrad();
      const prT = tensor(Float32Array.from(d.pr)).requireGrad();
      const { loss } = dpoLoss(
        {
          policyChosenLogps: pcT,
          policyRejectedLogps: prT,
          refChosenLogps: tensor(Float32Array.from(d.rc)),
          refRejectedLogps: tensor(Float32Array.from(d.rr)),
          chosenTokens: d.nc,
          rejectedTokens: d.nr,
        },
        { beta, lossType: type, labelSmoothing: eps },
      );
      // use the f32-rounded inputs in the reference
      const pc = Array.from(pcT.dataSync());
      const pr = Array.from(prT.dataSync());
      const rc = Array.from(Float32Array.from(d.rc));
      const rr = Array.from(Float32Array.from(d.rr));
      const e = type === "sigmoid" ? 0 : eps;
      expect(loss.item()).toBeCloseTo(refLoss(type, beta, e, pc, pr, rc, rr, d.nc, d.nr), 5);
      backward(loss);
      const gc = numericGrad((x) => refLoss(type, beta, e, x, pr, rc, rr, d.nc, d.nr), pc);
      const gr = numericGrad((x) => refLoss(type, beta, e, pc, x, rc, rr, d.nc, d.nr), pr);
      expectClose(pcT.grad?.dataSync() as Float32Array, gc, 1e-6, 1e-4);
      expectClose(prT.grad?.dataSync() as Float32Array, gr, 1e-6, 1e-4);
    });
  }

  it("policy = reference ⇒ sigmoid loss is ln 2 (TRL invariant) and rewards are 0", () => {
    const lp = tensor(Float32Array.from([-12.5, -3, -40, -7]));
    const lr = tensor(Float32Array.from([-8, -9.25, -1, -30]));
    const { loss, metrics } = dpoLoss({
      policyChosenLogps: lp,
      policyRejectedLogps: lr,
      refChosenLogps: lp,
      refRejectedLogps: lr,
    });
    expect(loss.item()).toBe(Math.fround(Math.LN2));
    expect(loss.item()).toBeCloseTo(0.6931471824645996, 7);
    expect(metrics["rewards/margins"]).toBe(0);
    expect(metrics["rewards/accuracies"]).toBe(0); // strict >
  });

  it("metrics use the summed log ratios (TRL names)", () => {
    const d = pairs(3);
    const { metrics } = dpoLoss(
      {
        policyChosenLogps: tensor(Float32Array.from(d.pc)),
        policyRejectedLogps: tensor(Float32Array.from(d.pr)),
        refChosenLogps: tensor(Float32Array.from(d.rc)),
        refRejectedLogps: tensor(Float32Array.from(d.rr)),
        chosenTokens: d.nc,
        rejectedTokens: d.nr,
      },
      { beta: 0.2, lossType: "ipo" },
    );
    const f = (a: number[]) => a.map((v) => Math.fround(v));
    const [pc, pr, rc, rr] = [f(d.pc), f(d.pr), f(d.rc), f(d.rr)];
    const mean = (a: number[]) => a.reduce((x, y) => x + y, 0) / a.length;
    const chosen = pc.map((v, i) => 0.2 * (v - rc[i]));
    const rejected = pr.map((v, i) => 0.2 * (v - rr[i]));
    expect(metrics["rewards/chosen"]).toBeCloseTo(mean(chosen), 5);
    expect(metrics["rewards/rejected"]).toBeCloseTo(mean(rejected), 5);
    expect(metrics["rewards/margins"]).toBeCloseTo(mean(chosen) - mean(rejected), 5);
    expect(metrics["rewards/accuracies"]).toBe(chosen.filter((c, i) => c > rejected[i]).length / P);
    expect(metrics["logps/chosen"]).toBeCloseTo(mean(pc), 4);
    expect(metrics["logps/rejected"]).toBeCloseTo(mean(pr), 4);
  });

  it("validates options and inputs", () => {
    const t = tensor(Float32Array.from([1, 2]));
    const base = { policyChosenLogps: t, policyRejectedLogps: t, refChosenLogps: t, refRejectedLogps: t };
    expect(() => dpoLoss(base, { beta: 0 })).toThrow(LossOptionError);
    expect(() => dpoLoss(base, { lossType: "robust", labelSmoothing: 0.5 })).toThrow(LossOptionError);
    expect(() => dpoLoss(base, { lossType: "ipo" })).toThrow(LossInputError);
    expect(() => dpoLoss({ ...base, refRejectedLogps: tensor(Float32Array.from([1])) })).toThrow(LossInputError);
  });
});

describe("sequenceLogProbs and dpoLossFromLogits", () => {
  const T = 5;
  const V = 7;
  const ids = new Int32Array([1, 2, 3, 4, 0, 1, 2, 5, 6, 6, 3, 3, 1, 0, 0, 3, 3, 2, 2, 2]);
  const mask = [0, 0, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0, 0, 1, 1, 1];

  function refSeq(logits: ArrayLike<number>, average: boolean): number[] {
    const rows = rowsOf(logits, V);
    const out: number[] = [];
    for (let b = 0; b < 4; b++) {
      let s = 0;
      let n = 0;
      for (let t = 0; t + 1 < T; t++) {
        if (!mask[b * T + t + 1]) continue;
        s += logSoftmax(rows[b * T + t])[ids[b * T + t + 1]];
        n++;
      }
      out.push(average ? s / n : s);
    }
    return out;
  }

  it("sums (or averages) shifted completion-token log-probs", () => {
    const logits = randomArray(4 * T * V, 41, 2);
    const x = tensor(logits, [4, T, V]);
    const { logps, tokens } = sequenceLogProbs(x, tensor(ids, [4, T], "i32"), mask);
    expectClose(logps.dataSync() as Float32Array, refSeq(logits, false), 1e-5, 1e-5);
    expect(Array.from(tokens)).toEqual([2, 4, 2, 3]);
    const avg = sequenceLogProbs(x, tensor(ids, [4, T], "i32"), mask, { average: true });
    expectClose(avg.logps.dataSync() as Float32Array, refSeq(logits, true), 1e-5, 1e-5);
  });

  it("from logits: reference from a function (adapter-off model) or precomputed give the same loss; gradient vs finite differences", () => {
    const logits = randomArray(4 * T * V, 43, 2);
    const refLogits = randomArray(4 * T * V, 44, 2);
    const x = tensor(logits, [4, T, V]).requireGrad();
    const inputIds = tensor(ids, [4, T], "i32");
    const completionMask = tensor(Float32Array.from(mask), [4, T]);
    const a = dpoLossFromLogits(
      { policyLogits: x, inputIds, completionMask, reference: { logits: () => tensor(refLogits, [4, T, V]) } },
      { beta: 0.3 },
    );
    const refLogps = sequenceLogProbs(tensor(refLogits, [4, T, V]), inputIds, completionMask).logps;
    const b = dpoLossFromLogits(
      { policyLogits: tensor(logits, [4, T, V]), inputIds, completionMask, reference: { logps: refLogps } },
      { beta: 0.3 },
    );
    expect(a.loss.item()).toBeCloseTo(b.loss.item(), 6);
    expect(a.metrics.num_tokens).toBe(11);
    // logits/chosen: mean over the rows that score a completion token (rows t with mask[t+1] = 1)
    const rowMean = (b: number) => {
      let s = 0;
      let n = 0;
      for (let t = 0; t + 1 < T; t++) {
        if (!mask[b * T + t + 1]) continue;
        for (let j = 0; j < V; j++) s += logits[(b * T + t) * V + j];
        n += V;
      }
      return [s, n];
    };
    const [s0, n0] = rowMean(0);
    const [s1, n1] = rowMean(1);
    expect(a.metrics["logits/chosen"]).toBeCloseTo((s0 + s1) / (n0 + n1), 6);
    const ref = refSeq(refLogits, false);
    const f = (vals: number[]) => {
      const s = refSeq(vals, false);
      return refLoss("sigmoid", 0.3, 0, s.slice(0, 2), s.slice(2), ref.slice(0, 2), ref.slice(2), [], []);
    };
    expect(a.loss.item()).toBeCloseTo(f(Array.from(logits)), 5);
    backward(a.loss);
    expectClose(x.grad?.dataSync() as Float32Array, numericGrad(f, Array.from(logits)), 1e-6, 1e-3);
  });
});

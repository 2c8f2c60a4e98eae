import { backward, tensor } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import {
  LossInputError,
  LossOptionError,
  type PolicyObjective,
  opdAdvantages,
  opdLoss,
  policyGradientLoss,
} from "../src/index.js";
import { expectClose, numericGrad, randomArray } from "./reference.js";

const N = 12;
const mask = [1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 1, 1];

function data(seed: number) {
  const q = Array.from(randomArray(N, seed, 1), (v) => v - 2);
  const p = Array.from(randomArray(N, seed + 1, 2), (v) => v - 3);
  const lp = Array.from(randomArray(N, seed + 2, 0.3), (v, i) => q[i] + v);
  return {
    q: Array.from(Float32Array.from(q)),
    p: Array.from(Float32Array.from(p)),
    lp: Array.from(Float32Array.from(lp)),
  };
}

/** float64 transcription of the Tinker objectives (docs/NUMERICS.md §4). */
function refPg(
  obj: PolicyObjective,
  lp: number[],
  q: number[],
  A: number[],
  epsLow = 0.2,
  epsHigh = 0.2,
  lo = 0,
  hi = 4,
) {
  let total = 0;
  for (let i = 0; i < lp.length; i++) {
    if (!mask[i]) continue;
    const r = Math.exp(lp[i] - q[i]);
    if (obj === "importance_sampling") total -= r * A[i];
    else if (obj === "ppo") total -= Math.min(r * A[i], Math.min(Math.max(r, 1 - epsLow), 1 + epsHigh) * A[i]);
    else total -= Math.min(Math.max(r, lo), hi) * A[i] * lp[i];
  }
  return total;
}

describe("opdAdvantages", () => {
  it("A = −(log q − log p) on masked tokens, teacher_kl unclamped, clamp then turn weights", () => {
    const { q, p } = data(1);
    const turns = [0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3];
    const plain = opdAdvantages({
      samplerLogps: tensor(Float32Array.from(q)),
      teacherLogps: tensor(Float32Array.from(p)),
      mask,
    });
    const expected = q.map((v, i) => (mask[i] ? -(v - p[i]) : 0));
    expectClose(plain.advantages.dataSync() as Float32Array, expected, 1e-6);
    const kl = q.reduce((a, v, i) => a + (mask[i] ? v - p[i] : 0), 0) / 10;
    expect(plain.metrics.teacher_kl).toBeCloseTo(kl, 6);
    const weighted = opdAdvantages(
      {
        samplerLogps: tensor(Float32Array.from(q)),
        teacherLogps: tensor(Float32Array.from(p)),
        mask,
        turnIndex: turns,
      },
      { clamp: 1, turnWeights: [1.5, 1.5] },
    );
    const exp2 = expected.map((a, i) => (mask[i] ? Math.max(-1, Math.min(1, a)) * (turns[i] < 2 ? 1.5 : 1) : 0));
    expectClose(weighted.advantages.dataSync() as Float32Array, exp2, 1e-6);
    expect(weighted.metrics.teacher_kl).toBeCloseTo(kl, 6);
    const clampedCount = expected.filter((a, i) => mask[i] && Math.abs(a) > 1).length;
    expect(clampedCount).toBeGreaterThan(0);
    expect(weighted.metrics["advantage/clamp_fraction"]).toBeCloseTo(clampedCount / 10, 10);
    expect(weighted.metrics["advantage/max"]).toBeCloseTo(Math.max(...exp2.filter((_, i) => mask[i])), 6);
  });

  it("kl discount γ sums γ^k·x_{t+k} within each sequence; masked positions keep it unless zeroMaskedAfterDiscount", () => {
    const q = [-1, -2, -0.5, -3, -1, -1.25, -0.75, -2, -1.5];
    const p = [-2, -2.5, -0.5, -1, -4, -2, -0.25, -3, -1];
    const m = [1, 1, 1, 1, 0, 1, 0, 1, 0];
    const run = (zeroMaskedAfterDiscount?: boolean) =>
      opdAdvantages(
        {
          samplerLogps: tensor(Float32Array.from(q), [3, 3]),
          teacherLogps: tensor(Float32Array.from(p), [3, 3]),
          mask: m,
        },
        { discount: 0.5, zeroMaskedAfterDiscount },
      );
    // float64 hand computation of docs/NUMERICS.md §4.1 step 4: x = −λ·mask·rkl, then γ-sums per row of 3
    const x = q.map((v, i) => (m[i] ? p[i] - v : 0));
    const tinker = [
      x[0] + 0.5 * x[1] + 0.25 * x[2],
      x[1] + 0.5 * x[2],
      x[2],
      x[3] + 0.5 * x[4] + 0.25 * x[5],
      x[4] + 0.5 * x[5], // masked, non-zero: the reference does not re-mask
      x[5],
      x[6] + 0.5 * x[7] + 0.25 * x[8],
      x[7] + 0.5 * x[8],
      x[8],
    ];
    expect(tinker[4]).not.toBe(0);
    expect(tinker[6]).not.toBe(0);
    const reference = run();
    expectClose(reference.advantages.dataSync() as Float32Array, tinker, 1e-6);
    expectClose(run(false).advantages.dataSync() as Float32Array, tinker, 1e-6);
    const zeroed = run(true);
    expectClose(
      zeroed.advantages.dataSync() as Float32Array,
      tinker.map((v, i) => (m[i] ? v : 0)),
      1e-6,
    );
    // metrics are over the mask in both settings
    expect(zeroed.metrics).toEqual(reference.metrics);
    expect(() =>
      opdAdvantages(
        { samplerLogps: tensor(Float32Array.from(q)), teacherLogps: tensor(Float32Array.from(p)) },
        { discount: 1 },
      ),
    ).toThrow(LossOptionError);
  });

  it("rejects a non-positive clamp and turn weights without turn indices", () => {
    const t = tensor(Float32Array.from([0, 0]));
    expect(() => opdAdvantages({ samplerLogps: t, teacherLogps: t }, { clamp: 0 })).toThrow(LossOptionError);
    expect(() => opdAdvantages({ samplerLogps: t, teacherLogps: t }, { turnWeights: [1.5] })).toThrow(LossInputError);
  });
});

describe("policyGradientLoss", () => {
  const objectives: PolicyObjective[] = ["importance_sampling", "ppo", "cispo"];
  for (const objective of objectives) {
    for (const reduction of ["sum", "mean"] as const) {
      it(`${objective} (${reduction}): value and gradient vs float64 finite differences`, () => {
        const { q, p, lp } = data(objective.length * 7 + reduction.length);
        const A = q.map((v, i) => p[i] - v);
        const x = tensor(Float32Array.from(lp)).requireGrad();
        const { loss, metrics } = policyGradientLoss(
          {
            policyLogps: x,
            samplerLogps: tensor(Float32Array.from(q)),
            advantages: tensor(Float32Array.from(A)),
            mask,
          },
          { objective, reduction, cispoBounds: [0.9, 1.1] },
        );
        const denom = reduction === "mean" ? 10 : 1;
        const f = (v: number[]) => refPg(objective, v, q, A, 0.2, 0.2, 0.9, 1.1) / denom;
        expect(loss.item()).toBeCloseTo(f(lp), 5);
        backward(loss);
        if (objective === "cispo") {
          // CISPO's gradient treats the clipped ratio as a constant: −sg(clip(r))·A.
          const expected = lp.map((v, i) =>
            mask[i] ? (-Math.min(Math.max(Math.exp(v - q[i]), 0.9), 1.1) * A[i]) / denom : 0,
          );
          expectClose(x.grad?.dataSync() as Float32Array, expected, 1e-6, 1e-5);
        } else expectClose(x.grad?.dataSync() as Float32Array, numericGrad(f, lp, 1e-6), 1e-5, 1e-4);
        const ratios = lp.map((v, i) => Math.exp(v - q[i])).filter((_, i) => mask[i]);
        expect(metrics["ratio/max"]).toBeCloseTo(Math.max(...ratios), 5);
        expect(metrics["ratio/min"]).toBeCloseTo(Math.min(...ratios), 5);
      });
    }
  }

  it("PPO clip: zero gradient outside the trust region on the correct side only", () => {
    const q = [0, 0, 0, 0, 0, 0, 0, 0];
    // ratios: 1.5 and 0.5 with A > 0, then with A < 0, and inside the region.
    const lp = [
      Math.log(1.5),
      Math.log(0.5),
      Math.log(1.5),
      Math.log(0.5),
      Math.log(1.1),
      Math.log(0.9),
      Math.log(1.1),
      Math.log(0.9),
    ];
    const A = [1, 1, -1, -1, 2, 2, -2, -2];
    const x = tensor(Float32Array.from(lp)).requireGrad();
    const { loss, metrics } = policyGradientLoss(
      { policyLogps: x, samplerLogps: tensor(Float32Array.from(q)), advantages: tensor(Float32Array.from(A)) },
      { objective: "ppo" },
    );
    backward(loss);
    const g = Array.from(x.grad?.dataSync() as Float32Array);
    expect(g[0]).toBe(0); // A > 0, r > 1+ε: clipped, no push further up
    expect(g[1]).toBeCloseTo(-0.5, 6); // A > 0, r < 1−ε: unclipped side, gradient −r·A
    expect(g[2]).toBeCloseTo(1.5, 6); // A < 0, r > 1+ε: unclipped side
    expect(g[3]).toBe(0); // A < 0, r < 1−ε: clipped
    expectClose(g.slice(4), [-2.2, -1.8, 2.2, 1.8], 1e-5);
    expect(metrics.clip_fraction).toBeCloseTo(2 / 8, 10);
    expect(metrics["clip_fraction/high"]).toBeCloseTo(1 / 8, 10);
    // loss value: clipped tokens contribute −clip(r)·A
    expect(loss.item()).toBeCloseTo(-(1.2 + 0.5 + 1.5 * -1 + 0.8 * -1 + 2.2 + 1.8 - 2.2 - 1.8), 5);
  });

  it("asymmetric ε_low / ε_high bound the ratio on each side", () => {
    const x = tensor(Float32Array.from([Math.log(1.25), Math.log(1.25)])).requireGrad();
    const { loss } = policyGradientLoss(
      {
        policyLogps: x,
        samplerLogps: tensor(Float32Array.from([0, 0])),
        advantages: tensor(Float32Array.from([1, 1])),
      },
      { objective: "ppo", clipLow: 0.2, clipHigh: 0.28 },
    );
    backward(loss);
    expectClose(x.grad?.dataSync() as Float32Array, [-1.25, -1.25], 1e-6);
  });

  it("opdLoss merges advantage and objective metrics; numItems divides the sum", () => {
    const { q, p, lp } = data(5);
    const x = tensor(Float32Array.from(lp)).requireGrad();
    const { loss, metrics } = opdLoss(
      { policyLogps: x, samplerLogps: tensor(Float32Array.from(q)), teacherLogps: tensor(Float32Array.from(p)), mask },
      { objective: "ppo", numItems: 40 },
    );
    const A = q.map((v, i) => p[i] - v);
    expect(loss.item()).toBeCloseTo(refPg("ppo", lp, q, A) / 40, 6);
    const on = mask.map((m, i) => (m ? i : -1)).filter((i) => i >= 0);
    const kl = on.reduce((acc, i) => acc + (q[i] - p[i]), 0) / on.length;
    expect(metrics.teacher_kl).toBeCloseTo(kl, 5);
    const clipped = on.filter((i) => {
      const r = Math.exp(lp[i] - q[i]);
      return (A[i] > 0 && r > 1.2) || (A[i] < 0 && r < 0.8);
    }).length;
    expect(metrics.clip_fraction).toBeCloseTo(clipped / on.length, 6);
  });

  it("rejects unknown objectives and bad clip ranges", () => {
    const t = tensor(Float32Array.from([0]));
    const inputs = { policyLogps: t, samplerLogps: t, advantages: t };
    expect(() => policyGradientLoss(inputs, { objective: "grpo" as PolicyObjective })).toThrow(LossOptionError);
    expect(() => policyGradientLoss(inputs, { clipLow: 1.5 })).toThrow(LossOptionError);
  });
});

import { describe, expect, it } from "vitest";
import {
  Tau2Error,
  binomial,
  meanAndStderr,
  passHatKForTask,
  summarizePassHatK,
  upstreamTrialSeeds,
} from "../../src/tau2/index.js";

describe("pass^k", () => {
  it("binomial coefficients", () => {
    expect([binomial(3, 0), binomial(3, 1), binomial(3, 2), binomial(3, 3), binomial(2, 3)]).toEqual([1, 3, 3, 1, 0]);
    expect(binomial(10, 5)).toBe(252);
  });

  it("C(c,k)/C(n,k) per task", () => {
    expect(passHatKForTask(2, 3, 1)).toBeCloseTo(2 / 3, 12);
    expect(passHatKForTask(2, 3, 2)).toBeCloseTo(1 / 3, 12);
    expect(passHatKForTask(2, 3, 3)).toBe(0);
    expect(passHatKForTask(3, 4, 2)).toBeCloseTo(3 / 6, 12);
    expect(() => passHatKForTask(4, 3, 1)).toThrow(Tau2Error);
    expect(() => passHatKForTask(1, 3, 4)).toThrow(/k=4 must be in \[1, trials=3\]/);
  });

  it("mean over tasks with standard errors, against hand-computed values", () => {
    // Tasks with 3/3, 2/3, 0/3 and 1/3 successes.
    const succ: Record<string, number> = { a: 3, b: 2, c: 0, d: 1 };
    const outcomes = Object.entries(succ).flatMap(([taskId, c]) =>
      [0, 1, 2].map((i) => ({ taskId, success: i < c, reward: i < c ? 1 : 0 })),
    );
    const s = summarizePassHatK(outcomes);
    expect(s.numTasks).toBe(4);
    expect(s.maxK).toBe(3);
    // pass^1 = (1 + 2/3 + 0 + 1/3)/4; pass^2 = (1 + 1/3)/4; pass^3 = 1/4.
    expect(s.passHatK.map((p) => p.value)).toEqual([
      expect.closeTo(0.5, 12),
      expect.closeTo(1 / 3, 12),
      expect.closeTo(0.25, 12),
    ]);
    // SE of pass^1: deviations ±1/2, ±1/6 → sample variance (1/2)(5/9)/... = 5/27; SE = sqrt(5/27/4).
    expect(s.passHatK[0].stderr).toBeCloseTo(Math.sqrt(5 / 108), 12);
    // pass^3 values [1,0,0,0]: sample sd = 1/2, SE = 1/4.
    expect(s.passHatK[2].stderr).toBeCloseTo(0.25, 12);
    expect(s.avgReward).toBeCloseTo(0.5, 12);
    expect(s.perTask.find((r) => r.taskId === "b")).toMatchObject({ trials: 3, successes: 2 });
    expect(s.warnings).toEqual([]);
  });

  it("uses the smallest trial count as max k, with a warning", () => {
    const s = summarizePassHatK([
      { taskId: "a", success: true, reward: 1 },
      { taskId: "a", success: true, reward: 1 },
      { taskId: "b", success: false, reward: 0 },
    ]);
    expect(s.maxK).toBe(1);
    expect(s.passHatK).toHaveLength(1);
    expect(s.passHatK[0].value).toBe(0.5);
    expect(s.warnings[0]).toMatch(/between 1 and 2 trials/);
  });

  it("standard error helper", () => {
    expect(meanAndStderr([1])).toEqual({ mean: 1, stderr: 0 });
    expect(meanAndStderr([0, 1]).stderr).toBeCloseTo(0.5, 12);
  });
});

describe("trial seeds", () => {
  it("reproduce upstream's random.seed(300); randint(0, 10**6)", () => {
    expect(upstreamTrialSeeds(4)).toEqual([626729, 373753, 361454, 1567]);
  });
});

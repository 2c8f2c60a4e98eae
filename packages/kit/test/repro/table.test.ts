// The table maths against hand-computed numbers on fresh random inputs: mean, SE = s / √n with
// the n − 1 sample variance, the paired Δ over shared instances only, and the formatting.
import { describe, expect, it } from "vitest";
import { beyondSe, fmtDelta, markdownTable, summarizeScores } from "../../src/repro/table.js";

function rng(seed: number) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

describe("repro table maths", () => {
  it("mean and SE of per-instance values match a float64 hand computation", () => {
    const r = rng(Date.now() % 100_000);
    const n = 7 + Math.floor(r() * 20);
    const scores: Record<string, number> = {};
    const xs: number[] = [];
    for (let i = 0; i < n; i++) {
      const x = r() * 10 - 3;
      xs.push(x);
      scores[`i${i}`] = x;
    }
    const mean = xs.reduce((a, b) => a + b, 0) / n;
    const variance = xs.reduce((a, x) => a + (x - mean) ** 2, 0) / (n - 1);
    const s = summarizeScores(scores);
    expect(s.n).toBe(n);
    expect(s.score.mean).toBeCloseTo(mean, 12);
    expect(s.score.se).toBeCloseTo(Math.sqrt(variance / n), 12);
    expect(s.delta).toBeUndefined();
  });

  it("paired Δ ± SE uses the per-instance differences of the instances both evaluated", () => {
    const r = rng(12345 + (Date.now() % 1000));
    const base: Record<string, number> = {};
    const after: Record<string, number> = {};
    const diffs: number[] = [];
    for (let i = 0; i < 15; i++) {
      const difficulty = r() * 5;
      base[`k${i}`] = difficulty;
      // Correlated with the base: the paired SE is far below the unpaired one.
      after[`k${i}`] = difficulty + 0.5 + (r() - 0.5) * 0.2;
      diffs.push(after[`k${i}`] - base[`k${i}`]);
    }
    after.onlyAfter = 100; // unpaired: ignored
    base.onlyBase = -100;
    const s = summarizeScores(after, base);
    const d = s.delta!;
    const mean = diffs.reduce((a, b) => a + b, 0) / diffs.length;
    const se = Math.sqrt(diffs.reduce((a, x) => a + (x - mean) ** 2, 0) / (diffs.length - 1) / diffs.length);
    expect(d.n).toBe(15);
    expect(d.mean).toBeCloseTo(mean, 12);
    expect(d.se).toBeCloseTo(se, 12);
    expect(d.se).toBeLessThan(s.score.se);
    expect(beyondSe(d, 2)).toBe(true);
    expect(fmtDelta(d)).toBe(`+${mean.toFixed(3)} ± ${se.toFixed(3)}`);
  });

  it("hand-computed small case: Δ = mean(1, 0, −1, 2) = 0.5, SE = √(1.6667 / 4)", () => {
    const s = summarizeScores({ a: 2, b: 1, c: 0, d: 3 }, { a: 1, b: 1, c: 1, d: 1 });
    expect(s.delta!.mean).toBe(0.5);
    expect(s.delta!.se).toBeCloseTo(Math.sqrt(5 / 3 / 4), 12);
    expect(beyondSe(s.delta, 2)).toBe(false);
    expect(fmtDelta({ ...s.delta!, mean: -0.25 })).toBe(`−0.250 ± ${s.delta!.se.toFixed(3)}`);
  });

  it("renders a Markdown table with a header, a separator and escaped cells", () => {
    const md = markdownTable({ title: "T", header: ["a", "b"], rows: [["x|y", "1"]], notes: ["note"] });
    expect(md.split("\n")).toEqual(["### T", "", "| a | b |", "|---|---|", "| x\\|y | 1 |", "", "note"]);
  });
});

// The report pages as a reader meets them, parsed: the run report's phase chart, its line for every
// stage (skipped and 1-step ones saying why), its curves with tick marks and units, the configuration
// folded away; the repro page's bars (one per row, ± SE, Δ vs base); and nothing either page would
// fetch (no http(s) URL, script, stylesheet link or external font).
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { meanSe, pairedDelta } from "@kiln/rollout";
import { afterAll, describe, expect, it } from "vitest";
import type { PhaseEval } from "../../src/recipes/recipe-run.js";
import { formatTick, formatTicks, niceTicks } from "../../src/report-svg.js";
import { reportHtml } from "../../src/report.js";
import { type ReproResult, reproReportHtml } from "../../src/repro/output.js";
import { scoreBar } from "../../src/repro/table.js";
import { RunDir } from "../../src/run-dir.js";
import { tmpRoot } from "../recipes/helpers.js";
import { type HtmlNode, findAll, hasClass, parseHtml, textOf } from "./html.js";

const root = tmpRoot();
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Writes the page under KILN_REPORT_OUT (to look at it in a browser), else nothing. */
function keep(name: string, html: string): void {
  if (process.env.KILN_REPORT_OUT) writeFileSync(join(process.env.KILN_REPORT_OUT, name), html);
}

function phase(name: string, scores: number[], base?: PhaseEval): PhaseEval {
  const byId = Object.fromEntries(scores.map((s, i) => [`ep-${i}`, s]));
  return {
    phase: name,
    n: scores.length,
    score: meanSe(scores),
    success: meanSe(scores.map((s) => (s >= 1 ? 1 : 0))),
    scores: byId,
    errors: [],
    delta: base ? pairedDelta(byId, base.scores) : undefined,
  };
}

function offline(html: string): void {
  expect(html).not.toMatch(/https?:\/\//i);
  expect(html).not.toMatch(/<script|<link|<iframe|<img|@import|@font-face|url\(/i);
  expect(html).not.toMatch(/\ssrc=/i);
}

/** Tick labels of one axis of a chart, as numbers (every label must be one). */
function tickValues(svg: HtmlNode, axis: "x" | "y"): number[] {
  return findAll(svg, (n) => n.tag === "text" && hasClass(n, "tick-label") && hasClass(n, axis)).map((t) => {
    const v = Number(textOf(t));
    expect(Number.isFinite(v), `tick label "${textOf(t)}"`).toBe(true);
    return v;
  });
}

describe("niceTicks and formatTick", () => {
  it("round steps of 1, 2, 5 × 10^k enclosing the data; integer steps for training steps", () => {
    expect(niceTicks(0, 0.93).ticks).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(1, 37, 5, true)).toEqual({ ticks: [0, 10, 20, 30, 40], step: 10 });
    expect(niceTicks(1, 2, 5, true).step).toBe(1);
    // Values equal but for rounding noise (a mean of equal scores) are one value, not 10^15 ticks.
    expect(niceTicks(12, 12 + 2e-15).ticks).toEqual(niceTicks(12, 12).ticks);
    expect(niceTicks(12, 12 + 2e-15).ticks.length).toBeLessThan(10);
    expect(niceTicks(0.7, 0.7).ticks.length).toBeGreaterThanOrEqual(2);
    const lr = niceTicks(0, 2e-5);
    expect(lr.ticks[0]).toBe(0);
    expect(lr.ticks[lr.ticks.length - 1]).toBeGreaterThanOrEqual(2e-5);
    expect(formatTick(0.4, 0.2)).toBe("0.4");
    expect(formatTick(20, 10)).toBe("20");
    expect(formatTick(2e-5, 5e-6)).toMatch(/^2(\.0+)?e-5$/);
    // One notation per axis: 0.0005 beside 0.0010 is not written "5e-4".
    expect(formatTicks([0, 5e-4, 1e-3, 1.5e-3], 5e-4)).toEqual(["0", "0.0005", "0.0010", "0.0015"]);
    expect(formatTicks([0, 1e-5, 2e-5], 1e-5)).toEqual(["0", "1e-5", "2e-5"]);
  });
});

describe("run report.html", async () => {
  const run = await RunDir.create(root, "arp", { lr: 1e-4, note: "x".repeat(50) });
  // SFT: 30 steps (warmup then cosine), held-out loss every 10; B1 skipped (no pairs); B2 one step.
  run.logMetrics({ stage: "eval-base", phase: "base", n: 4, score_mean: 0.25 });
  for (let step = 1; step <= 30; step++) {
    const lr = step <= 3 ? ((step - 1) / 3) * 1e-4 : 1e-4 * 0.5 * (1 + Math.cos((Math.PI * (step - 3)) / 27));
    run.logMetrics({ stage: "sft", step, loss: 3 / Math.sqrt(step), lr, grad_norm: 2 / step + 0.1 });
    if (step % 10 === 0) run.logMetrics({ stage: "sft", step, eval: true, holdout_loss: 3.2 / Math.sqrt(step) });
  }
  run.logMetrics({ stage: "eval-sft", phase: "sft", n: 4, score_mean: 0.5 });
  run.logMetrics({ stage: "turn-dpo-1-data", diagnosed: 0, pairs: 0 });
  run.logMetrics({ stage: "eval-turn-dpo-1", phase: "turn-dpo-1", n: 4, score_mean: 0.5 });
  run.logMetrics({ stage: "turn-dpo-2-data", diagnosed: 3, pairs: 1 });
  run.logMetrics({ stage: "turn-dpo-2", step: 1, loss: 0.7, lr: 0, grad_norm: 1.5 });
  run.logMetrics({ stage: "merge", scale: 0.85 });
  const base = phase("base", [0, 0, 0.5, 0.5]);
  const phases = [base, phase("sft", [0.5, 0.5, 1, 0], base), phase("final", [1, 1, 1, 0.5], base)];
  const html = reportHtml(run, {
    title: "ARP run arp",
    phases,
    stages: [
      { stage: "sft", examples: 12, steps: 30 },
      { stage: "turn-dpo-1", examples: 0, steps: 0, note: "no preference pairs" },
      { stage: "turn-dpo-2", examples: 1, steps: 1 },
    ],
    config: { lr: 1e-4, stages: ["sft", "turn-dpo-1"] },
  });
  keep("run-report.html", html);
  const doc = parseHtml(html);

  it("renders offline: no URL, script, stylesheet link or font is referenced", () => offline(html));

  it("a phase chart: one bar per phase with its ± SE whisker, Δ vs base beside every phase but the base", () => {
    const charts = findAll(doc, (n) => n.tag === "figure" && hasClass(n, "bars"));
    expect(charts).toHaveLength(1);
    const chart = charts[0];
    expect(findAll(chart, (n) => n.tag === "rect" && hasClass(n, "bar"))).toHaveLength(3);
    expect(findAll(chart, (n) => hasClass(n, "se"))).toHaveLength(3);
    const labels = findAll(chart, (n) => hasClass(n, "bar-label")).map(textOf);
    expect(labels).toEqual(["base", "sft", "final"]);
    const deltas = findAll(chart, (n) => hasClass(n, "bar-delta")).map(textOf);
    expect(deltas[0]).toBe("base");
    expect(deltas[2]).toBe("Δ +0.625 ± 0.239");
    expect(tickValues(chart, "x").length).toBeGreaterThanOrEqual(3);
  });

  it("lists every stage in the order it ran, the skipped and 1-step ones saying why", () => {
    const table = findAll(doc, (n) => n.tag === "table" && hasClass(n, "stages"))[0];
    const rows = findAll(table, (n) => n.tag === "tr")
      .slice(1)
      .map((r) => findAll(r, (n) => n.tag === "td").map(textOf));
    expect(rows.map((r) => r[0])).toEqual([
      "eval-base",
      "sft",
      "eval-sft",
      "turn-dpo-1-data",
      "turn-dpo-1",
      "eval-turn-dpo-1",
      "turn-dpo-2-data",
      "turn-dpo-2",
      "merge",
    ]);
    const what = Object.fromEntries(rows.map((r) => [r[0], r[2]]));
    expect(what["turn-dpo-1"]).toBe("skipped: no preference pairs");
    expect(what["turn-dpo-2"]).toMatch(/^1 example; 1 step: one point, no curve \(loss 0\.7, lr 0, grad_norm 1\.5\)/);
    expect(what["turn-dpo-2"]).toMatch(/learning rate was 0/);
    expect(what.sft).toMatch(/^12 examples; 30 steps; loss 3 → 0\.5477; held-out loss 1\.012 → 0\.5842$/);
    expect(what["turn-dpo-1-data"]).toBe("diagnosed 0, pairs 0");
  });

  it("curves of loss (with the held-out points), lr and grad norm, with ticks on both axes and units", () => {
    const charts = findAll(doc, (n) => n.tag === "figure" && hasClass(n, "line"));
    const titles = charts.map((c) => findAll(c, (n) => n.tag === "svg")[0].attrs["aria-label"]);
    expect(titles).toEqual(["sft: loss", "sft: lr", "sft: grad_norm"]);
    for (const c of charts) {
      const svg = findAll(c, (n) => n.tag === "svg")[0];
      const xs = tickValues(svg, "x");
      const ys = tickValues(svg, "y");
      expect(xs.length).toBeGreaterThanOrEqual(3);
      expect(ys.length).toBeGreaterThanOrEqual(3);
      // Ticks ascend and enclose the steps 1 … 30.
      expect([...xs].sort((a, b) => a - b)).toEqual(xs);
      expect(xs[0]).toBeLessThanOrEqual(1);
      expect(xs[xs.length - 1]).toBeGreaterThanOrEqual(30);
      expect(findAll(svg, (n) => n.tag === "line" && hasClass(n, "tick"))).toHaveLength(xs.length + ys.length);
      expect(textOf(findAll(svg, (n) => hasClass(n, "axis-title") && hasClass(n, "x"))[0])).toBe("step");
    }
    const yTitles = charts.map((c) => textOf(findAll(c, (n) => hasClass(n, "axis-title") && hasClass(n, "y"))[0]));
    expect(yTitles).toEqual(["loss (nats)", "learning rate", "grad norm (L2, pre-clip)"]);
    // The held-out losses are markers beside the training curve, with a legend.
    expect(findAll(charts[0], (n) => n.tag === "circle")).toHaveLength(3);
    expect(textOf(charts[0])).toContain("held-out loss");
  });

  it("the configuration and metadata are folded away in closed <details>", () => {
    const details = findAll(doc, (n) => n.tag === "details");
    expect(details).toHaveLength(2);
    for (const d of details) expect("open" in d.attrs).toBe(false);
    const pres = findAll(doc, (n) => n.tag === "pre");
    expect(pres).toHaveLength(2);
    expect(JSON.parse(textOf(pres[0]).replaceAll("&quot;", '"'))).toEqual({ lr: 1e-4, stages: ["sft", "turn-dpo-1"] });
  });
});

describe("run report.html of one-step rounds (OPD)", async () => {
  const run = await RunDir.create(root, "opd", { rounds: 3 });
  for (let round = 1; round <= 3; round++) {
    run.logMetrics({ stage: `round-${round}-samples`, episodes: 1, samples: 7 });
    run.logMetrics({
      stage: `round-${round}`,
      step: 1,
      loss: 0.2 / round,
      lr: 1e-3,
      grad_norm: 0.1,
      teacher_kl: 0.5 / round,
    });
  }
  const html = reportHtml(run, { title: "OPD run opd", config: {} });
  keep("opd-report.html", html);
  const doc = parseHtml(html);

  it("each round is a 1-step stage without a curve, and the rounds together are drawn against the round", () => {
    const rows = findAll(doc, (n) => n.tag === "tr")
      .slice(1)
      .map((r) => findAll(r, (n) => n.tag === "td").map(textOf));
    expect(rows.map((r) => r[0])).toEqual([
      "round-1-samples",
      "round-1",
      "round-2-samples",
      "round-2",
      "round-3-samples",
      "round-3",
    ]);
    expect(rows[0][1]).toBe("data");
    expect(rows[1][2]).toMatch(/^1 step: one point, no curve/);
    const charts = findAll(doc, (n) => n.tag === "figure" && hasClass(n, "line"));
    const titles = charts.map((c) => findAll(c, (n) => n.tag === "svg")[0].attrs["aria-label"]);
    expect(titles).toContain("rounds: loss");
    expect(titles).toContain("rounds: teacher_kl");
    const loss = charts[titles.indexOf("rounds: loss")];
    expect(textOf(findAll(loss, (n) => hasClass(n, "axis-title") && hasClass(n, "x"))[0])).toBe("round");
    const xs = tickValues(loss, "x");
    expect(xs[0]).toBeLessThanOrEqual(1);
    expect(xs[xs.length - 1]).toBeGreaterThanOrEqual(3);
  });
});

describe("repro report.html", () => {
  const base = phase("base", [0, 0.5, 0.5, 0, 1]);
  const sft = phase("A  SFT", [0.5, 0.5, 1, 0.5, 1], base);
  const worse = phase("B1 turn-DPO", [0, 0, 0, 0, 0.5], base);
  const result: ReproResult = {
    recipe: "arp",
    dir: join(root, "repro-arp"),
    tables: [
      {
        title: "ARP on guess-number (seed 42)",
        header: ["phase", "n", "score ± SE"],
        rows: [base, sft, worse].map((p) => [p.phase, String(p.n), `${p.score.mean}`]),
        notes: ["Held-out episodes."],
        chart: {
          xLabel: "score per held-out episode, mean ± SE",
          bars: [base, sft, worse].map((p, i) => scoreBar(p.phase, p.score, p.n, i ? p.delta : undefined)),
        },
      },
      { title: "Per-stage wall table", header: ["stage", "passed"], rows: [["1", "3/5"]] },
    ],
    seconds: { base: 1.5, "A  SFT": 2 },
    totalSeconds: 3.5,
    details: {},
  };
  const html = reproReportHtml(result, { seed: 42, arp: { sft: { lr: 1e-4 } } }, "kiln repro arp --quick");
  keep("repro-report.html", html);
  const doc = parseHtml(html);

  it("renders offline", () => offline(html));

  it("a phase chart per scored table: one bar per row, ticks on the score axis, Δ vs base", () => {
    const charts = findAll(doc, (n) => n.tag === "figure" && hasClass(n, "bars"));
    expect(charts).toHaveLength(1);
    expect(findAll(charts[0], (n) => n.tag === "rect" && hasClass(n, "bar"))).toHaveLength(3);
    const ticks = tickValues(charts[0], "x");
    expect(ticks[0]).toBeLessThanOrEqual(0);
    expect(ticks[ticks.length - 1]).toBeGreaterThanOrEqual(0.8);
    expect(textOf(findAll(charts[0], (n) => hasClass(n, "axis-title"))[0])).toBe(
      "score per held-out episode, mean ± SE",
    );
    const deltas = findAll(charts[0], (n) => hasClass(n, "bar-delta"));
    expect(deltas.map(textOf)).toEqual(["base", "Δ +0.300 ± 0.122", "Δ −0.300 ± 0.122"]);
    // Both beyond 2 SE (0.300 > 2 × 0.122): green for the gain, red for the regression.
    expect(deltas.map((d) => d.attrs.fill)).toEqual(["#555", "#1e8449", "#a93226"]);
  });

  it("the tables stay (numbers to copy), the configuration is folded away", () => {
    expect(findAll(doc, (n) => n.tag === "table")).toHaveLength(3); // two tables + wall time
    const details = findAll(doc, (n) => n.tag === "details");
    expect(details).toHaveLength(1);
    expect(textOf(details[0])).toMatch(/^Configuration \(\d+ lines of JSON\)/);
  });
});

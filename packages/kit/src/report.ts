// report.html: one self-contained page per run (no scripts, no external files, no fonts: it renders
// offline). Top to bottom: the phase chart (score ± SE per phase, Δ vs base) and its table; a line for
// every stage in the order it ran (training steps, data counts, evaluations, merges; a stage that was
// skipped or ran a single step says so and why); per training stage, curves of loss, learning rate,
// grad norm and the stage's own metrics with tick marks and units; extra tables (e.g. OPD's wall
// table); the configuration and the metadata folded away.
import { formatMeanSe } from "@kiln/rollout";
import type { RunDir } from "./run-dir.js";
import type { PhaseEval } from "./phase-eval.js";
import { type ScoreBar, type Series, barChart, esc, lineChart } from "./report-svg.js";

/** Metrics drawn per training stage, in this order, with their axis titles (units). */
const CURVES: [key: string, axis: string][] = [
  ["loss", "loss (nats)"],
  ["lr", "learning rate"],
  ["grad_norm", "grad norm (L2, pre-clip)"],
  ["rewards/margins", "reward margin (nats)"],
  ["rewards/accuracies", "pairs ranked right (fraction)"],
  ["teacher_kl", "KL to teacher (nats/token)"],
  ["divergence", "divergence (nats/token)"],
  ["entropy", "entropy (nats/token)"],
  ["mean_token_accuracy", "token accuracy (fraction)"],
];

/** A line chart of (step, value) points as an inline SVG, with ticks on both axes. */
export function svgCurve(title: string, points: readonly [number, number][], width = 380, height = 240): string {
  return lineChart({ title, xLabel: "step", yLabel: title, series: [{ name: title, points }], width, height });
}

/** A training stage the recipe ran or skipped: the report lists it even when no metric line exists. */
export interface StageLine {
  stage: string;
  /** Training examples (pairs, turns, conversations) the stage had. */
  examples?: number;
  steps: number;
  /** Why it was skipped or short, in words ("no preference pairs: …"). */
  note?: string;
}

export interface ReportContent {
  title: string;
  phases?: readonly PhaseEval[];
  /** The recipe's training stages, skipped ones included (metrics.jsonl has no line for those). */
  stages?: readonly StageLine[];
  /** Extra tables: caption → rows (first row = header). */
  tables?: Record<string, (string | number)[][]>;
  config: unknown;
}

function htmlTable(rows: (string | number)[][]): string {
  const [head, ...body] = rows;
  return `<table><thead><tr>${head.map((h) => `<th>${esc(String(h))}</th>`).join("")}</tr></thead><tbody>${body
    .map((r) => `<tr>${r.map((c) => `<td>${esc(String(c))}</td>`).join("")}</tr>`)
    .join("")}</tbody></table>`;
}

/** 4 significant digits, or the value as text. */
function num(v: unknown): string {
  if (typeof v !== "number") return String(v);
  if (Number.isInteger(v)) return String(v);
  return Math.abs(v) < 1e-3 && v !== 0 ? v.toExponential(2) : Number(v.toPrecision(4)).toString();
}

/** The numeric fields of a metrics line other than its bookkeeping, as "key value" pairs. */
function fields(r: Record<string, unknown>): string {
  return Object.entries(r)
    .filter(
      ([k, v]) =>
        !["time", "stage", "step", "eval", "phase"].includes(k) && (typeof v === "number" || typeof v === "string"),
    )
    .map(([k, v]) => `${k} ${num(v)}`)
    .join(", ");
}

interface StageRecord {
  stage: string;
  /** Training steps (lines with a step and no eval flag). */
  steps: Record<string, unknown>[];
  /** The trainer's evaluations during the stage (eval: true), e.g. held-out loss. */
  evals: Record<string, unknown>[];
  /** Lines without a step: data counts, evaluations of a phase, merges. */
  other: Record<string, unknown>[];
  declared?: StageLine;
}

/** Every stage in the order it ran; declared stages without metrics are placed beside their data/eval stages. */
export function collectStages(
  metrics: readonly Record<string, unknown>[],
  declared: readonly StageLine[] = [],
): StageRecord[] {
  const byName = new Map<string, StageRecord>();
  const order: StageRecord[] = [];
  for (const r of metrics) {
    if (typeof r.stage !== "string") continue;
    let rec = byName.get(r.stage);
    if (!rec) {
      rec = { stage: r.stage, steps: [], evals: [], other: [] };
      byName.set(r.stage, rec);
      order.push(rec);
    }
    if (r.eval === true) rec.evals.push(r);
    else if (typeof r.step === "number") rec.steps.push(r);
    else rec.other.push(r);
  }
  let previous = -1;
  for (const d of declared) {
    const found = byName.get(d.stage);
    if (found) {
      found.declared = d;
      previous = order.indexOf(found);
      continue;
    }
    const rec: StageRecord = { stage: d.stage, steps: [], evals: [], other: [], declared: d };
    const data = order.findIndex((x) => x.stage === `${d.stage}-data`);
    const ev = order.findIndex((x) => x.stage === `eval-${d.stage}`);
    const at = data >= 0 ? data + 1 : ev >= 0 ? ev : previous + 1;
    order.splice(at, 0, rec);
    byName.set(d.stage, rec);
    previous = at;
  }
  return order;
}

/** What a stage did, in one line: steps and loss, or why there is no curve, or its counts. */
export function describeStage(s: StageRecord): { kind: string; what: string } {
  const d = s.declared;
  const examples = d?.examples !== undefined ? `${d.examples} example${d.examples === 1 ? "" : "s"}; ` : "";
  if (s.steps.length === 0 && d) {
    return { kind: "training", what: `skipped: ${d.note ?? `no training examples (${d.examples ?? 0})`}` };
  }
  if (s.steps.length === 1) {
    const r = s.steps[0];
    const idle =
      r.lr === 0 ? " The learning rate was 0 at that step (the warmup's first step), so the weights did not move." : "";
    return {
      kind: "training",
      what: `${examples}1 step: one point, no curve (${fields({ loss: r.loss, lr: r.lr, grad_norm: r.grad_norm })}).${idle}${d?.note ? ` ${d.note}` : ""}`,
    };
  }
  if (s.steps.length > 1) {
    const [first, last] = [s.steps[0], s.steps[s.steps.length - 1]];
    const held = s.evals.filter((e) => typeof e.holdout_loss === "number");
    return {
      kind: "training",
      what: `${examples}${s.steps.length} steps; loss ${num(first.loss)} → ${num(last.loss)}${
        held.length ? `; held-out loss ${num(held[0].holdout_loss)} → ${num(held[held.length - 1].holdout_loss)}` : ""
      }${d?.note ? `; ${d.note}` : ""}`,
    };
  }
  const kind = s.stage.startsWith("eval")
    ? "evaluation"
    : /-(data|samples)$/.test(s.stage)
      ? "data"
      : s.stage === "merge"
        ? "merge"
        : "other";
  return { kind, what: s.other.map(fields).join("; ") || "no values logged" };
}

function stageCharts(s: StageRecord): string {
  if (s.steps.length < 2) return "";
  const charts: string[] = [];
  for (const [key, axis] of CURVES) {
    const points = s.steps
      .filter((r) => typeof r[key] === "number")
      .map((r) => [r.step as number, r[key] as number] as [number, number]);
    const series: Series[] = [{ name: key === "loss" ? "training loss" : key, points }];
    if (key === "loss") {
      const held = s.evals
        .filter((r) => typeof r.holdout_loss === "number" && typeof r.step === "number")
        .map((r) => [r.step as number, r.holdout_loss as number] as [number, number]);
      if (held.length) series.push({ name: "held-out loss", points: held, markers: true });
    }
    if (points.length > 1)
      charts.push(lineChart({ title: `${s.stage}: ${key}`, xLabel: "step", yLabel: axis, series }));
  }
  return `<section class="stage"><h3>${esc(s.stage)} (${s.steps.length} steps)</h3>${charts.join("\n")}</section>`;
}

/**
 * Stages named round-1, round-2, … (OPD) as one chart per metric against the round: each round's mean
 * over its steps. A round of one step has no curve of its own; across rounds it is a point.
 */
function roundCharts(stages: readonly StageRecord[]): string {
  const rounds = stages
    .map((s) => ({ s, round: /^round-(\d+)$/.exec(s.stage)?.[1] }))
    .filter((r): r is { s: StageRecord; round: string } => r.round !== undefined && r.s.steps.length > 0);
  if (rounds.length < 2) return "";
  const charts: string[] = [];
  for (const [key, axis] of CURVES) {
    const points = rounds.flatMap(({ s, round }) => {
      const values = s.steps.map((r) => r[key]).filter((v): v is number => typeof v === "number");
      return values.length
        ? [[Number(round), values.reduce((a, b) => a + b, 0) / values.length] as [number, number]]
        : [];
    });
    if (points.length > 1)
      charts.push(
        lineChart({
          title: `rounds: ${key}`,
          xLabel: "round",
          yLabel: axis,
          series: [{ name: key, points, markers: false }],
        }),
      );
  }
  return `<section class="stage"><h3>Across rounds (${rounds.length} rounds; each point: the mean over the round's steps)</h3>${charts.join("\n")}</section>`;
}

/** The phase chart: score ± SE per phase, with the paired Δ against the base. */
export function phaseChart(phases: readonly PhaseEval[], title = "Score per phase (held-out, greedy)"): string {
  const bars: ScoreBar[] = phases.map((p) => ({
    label: p.phase,
    mean: p.score.mean,
    se: p.score.se,
    n: p.n,
    delta: p.delta ? { mean: p.delta.mean, se: p.delta.se } : undefined,
  }));
  return barChart({ title, xLabel: "score, mean ± SE over the held-out instances", bars });
}

/** The pages' stylesheet (inline: nothing is fetched). */
export const REPORT_STYLE = `body{font-family:system-ui,sans-serif;margin:2em;max-width:1150px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}table.stages td,table.stages th{text-align:left}
table.stages td:first-child{white-space:nowrap}
figure{display:inline-block;margin:4px;vertical-align:top}h3{margin:1.2em 0 .2em;font-size:1em}
details{margin:1em 0}summary{cursor:pointer;font-weight:600}pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:12px}
.note{color:#555}`;

/** `<details>` holding pretty JSON, closed: the configuration is there when wanted, not in the way. */
export function foldedJson(summary: string, value: unknown): string {
  const text = JSON.stringify(value, null, 2) ?? "null";
  return `<details><summary>${esc(summary)} (${text.split("\n").length} lines of JSON)</summary><pre>${esc(text)}</pre></details>`;
}

export function reportHtml(run: RunDir, content: ReportContent): string {
  const stages = collectStages(run.readMetrics(), content.stages);
  const phases = content.phases ?? [];
  const phaseRows: (string | number)[][] = [
    ["phase", "n", "score mean ± SE", "success ± SE", "Δ score vs base ± SE", "errors"],
    ...phases.map((p) => [
      p.phase,
      p.n,
      formatMeanSe(p.score),
      formatMeanSe(p.success),
      p.delta ? formatMeanSe(p.delta) : "—",
      p.errors.length,
    ]),
  ];
  const stageRows = stages.map((s) => {
    const { kind, what } = describeStage(s);
    return `<tr><td>${esc(s.stage)}</td><td>${esc(kind)}</td><td>${esc(what)}</td></tr>`;
  });
  const tables = Object.entries(content.tables ?? {})
    .map(([caption, rows]) => `<h2>${esc(caption)}</h2>${htmlTable(rows)}`)
    .join("\n");
  const curves = [roundCharts(stages), ...stages.map(stageCharts)].filter(Boolean);
  const m = run.metadata;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(content.title)}</title>
<style>${REPORT_STYLE}</style></head><body>
<h1>${esc(content.title)}</h1>
<p class="note">Run <code>${esc(m.name)}</code> started ${esc(m.startedAt)}; code ${esc(m.codeSha ?? "not a git checkout")}${m.dirtyTree ? " (uncommitted changes)" : ""}; backend ${esc(m.backend)}; base model ${esc(m.baseModel?.source ?? "not recorded")}.</p>
${phases.length ? `<h2>Evaluation (held-out, greedy; paired Δ against the base)</h2>${phaseChart(phases)}${htmlTable(phaseRows)}` : ""}
<h2>Stages</h2>
${stageRows.length ? `<table class="stages"><thead><tr><th>stage</th><th>kind</th><th>what happened</th></tr></thead><tbody>${stageRows.join("")}</tbody></table>` : "<p>no stage logged a metric</p>"}
<h2>Training curves</h2>
${curves.join("\n") || "<p>no stage ran two or more steps: nothing to draw (see Stages)</p>"}
${tables}
<h2>Configuration and metadata</h2>
${foldedJson("Configuration", content.config)}
${foldedJson("Metadata (code, packages, seeds, SHA-256 of the base model and data files)", m)}
</body></html>
`;
}

export async function writeReport(run: RunDir, content: ReportContent): Promise<void> {
  await run.writeText("report.html", reportHtml(run, content));
}

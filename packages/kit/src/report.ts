// report.html: one self-contained page per run (no scripts, no external files): SVG curves of
// the logged training metrics per stage (loss, DPO margins, OPD teacher KL, entropy), the phase
// tables with standard errors, extra tables (e.g. OPD's wall table), the configuration, and the
// metadata with the SHA-256s of the inputs.
import { formatMeanSe } from "@kiln/rollout";
import type { RunDir } from "./run-dir.js";
import type { PhaseEval } from "./recipes/recipe-run.js";

const CURVES = ["loss", "rewards/margins", "teacher_kl", "divergence", "entropy", "grad_norm", "holdout_loss"];

function esc(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c);
}

/** A line chart of (step, value) points as an inline SVG. */
export function svgCurve(title: string, points: readonly [number, number][], width = 360, height = 160): string {
  const pts = points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
  if (pts.length === 0) return "";
  const xs = pts.map((p) => p[0]);
  const ys = pts.map((p) => p[1]);
  const [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (y0 === y1) [y0, y1] = [y0 - 1, y1 + 1];
  const pad = 28;
  const sx = (x: number) => pad + ((x - x0) / Math.max(1e-12, x1 - x0)) * (width - 2 * pad);
  const sy = (y: number) => height - pad - ((y - y0) / (y1 - y0)) * (height - 2 * pad);
  const path = pts.map(([x, y], i) => `${i ? "L" : "M"}${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" ");
  return `<figure><svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" role="img" aria-label="${esc(title)}">
<rect x="0" y="0" width="${width}" height="${height}" fill="#fff" stroke="#ccc"/>
<path d="${path}" fill="none" stroke="#c0392b" stroke-width="1.5"/>
<text x="${pad}" y="14" font-size="11">${esc(title)}</text>
<text x="2" y="${pad}" font-size="9">${y1.toPrecision(4)}</text>
<text x="2" y="${height - pad}" font-size="9">${y0.toPrecision(4)}</text>
<text x="${pad}" y="${height - 8}" font-size="9">step ${x0}</text>
<text x="${width - pad - 40}" y="${height - 8}" font-size="9">step ${x1}</text>
</svg></figure>`;
}

export interface ReportContent {
  title: string;
  phases?: readonly PhaseEval[];
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

export function reportHtml(run: RunDir, content: ReportContent): string {
  const metrics = run.readMetrics().filter((r) => r.eval !== true);
  const byStage = new Map<string, Record<string, unknown>[]>();
  for (const r of metrics) {
    if (typeof r.stage !== "string" || typeof r.step !== "number") continue;
    const list = byStage.get(r.stage) ?? [];
    list.push(r);
    byStage.set(r.stage, list);
  }
  const charts: string[] = [];
  for (const [stage, rows] of byStage) {
    for (const key of CURVES) {
      const pts = rows
        .filter((r) => typeof r[key] === "number")
        .map((r) => [r.step as number, r[key] as number] as [number, number]);
      if (pts.length > 1) charts.push(svgCurve(`${stage}: ${key}`, pts));
    }
  }
  const phaseRows: (string | number)[][] = [
    ["phase", "n", "score mean ± SE", "success ± SE", "Δ score vs base ± SE", "errors"],
    ...(content.phases ?? []).map((p) => [
      p.phase,
      p.n,
      formatMeanSe(p.score),
      formatMeanSe(p.success),
      p.delta ? formatMeanSe(p.delta) : "—",
      p.errors.length,
    ]),
  ];
  const tables = Object.entries(content.tables ?? {})
    .map(([caption, rows]) => `<h2>${esc(caption)}</h2>${htmlTable(rows)}`)
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(content.title)}</title>
<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px}table{border-collapse:collapse;margin:1em 0}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}figure{display:inline-block;margin:4px}
pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:12px}</style></head><body>
<h1>${esc(content.title)}</h1>
${content.phases?.length ? `<h2>Evaluation (held-out, greedy; paired Δ against the base)</h2>${htmlTable(phaseRows)}` : ""}
${tables}
<h2>Training curves</h2>${charts.join("\n") || "<p>no training steps logged</p>"}
<h2>Configuration</h2><pre>${esc(JSON.stringify(content.config, null, 2))}</pre>
<h2>Metadata</h2><pre>${esc(JSON.stringify(run.metadata, null, 2))}</pre>
</body></html>
`;
}

export async function writeReport(run: RunDir, content: ReportContent): Promise<void> {
  await run.writeText("report.html", reportHtml(run, content));
}

// A repro directory: <out>/repro-<recipe>[-<ablation>]/ with the recipe runs nested inside it,
// table.md (the Markdown printed), summary.json (the numbers) and report.html (self-contained: each
// table's rows drawn as bars of score ± SE with the Δ against the base, inline SVG, nothing fetched;
// the configuration folded away). Files are written to a temporary name and renamed.
import * as fs from "node:fs";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomicSync } from "@kiln/hub-io";
import { REPORT_STYLE, foldedJson } from "../report.js";
import { barChart, esc } from "../report-svg.js";
import { meanSe } from "@kiln/rollout";
import { type ReproTable, fmt, markdownTable } from "./table.js";

export interface ReproResult {
  recipe: string;
  ablation?: string;
  dir: string;
  tables: ReproTable[];
  /** Wall seconds per row (training that produced it + its evaluation), for sizing the presets. */
  seconds: Record<string, number>;
  totalSeconds: number;
  /** Everything else worth keeping (pair counts, per-instance scores). */
  details: Record<string, unknown>;
  /**
   * Evaluation episodes that ended in an error (the policy or the environment threw), by phase: the tables
   * count them as failures, so `kiln repro` shows how many and exits 1 naming the first.
   */
  errors?: ReproEpisodeError[];
  /**
   * The headline numbers of each row (row label → metric → value) that mean the same in every seed's
   * run: `acrossSeedsTable` prints them per seed and their mean across seeds. A recipe leaves it out
   * where no number is comparable across seeds.
   */
  seedSummary?: Record<string, Record<string, number>>;
}

export interface ReproEpisodeError {
  phase: string;
  id: string;
  reason: string;
}

const writeAtomic = (path: string, text: string): void => writeFileAtomicSync(fs, path, text);

/** Wall seconds per row (not part of the result tables, which are deterministic for a seed). */
export function timingTable(result: ReproResult): ReproTable {
  return {
    title: `Wall time, seconds (${result.recipe}${result.ablation ? ` --ablation ${result.ablation}` : ""})`,
    header: ["row (training that produced it + its evaluation)", "s"],
    rows: [
      ...Object.entries(result.seconds).map(([k, v]) => [k, v.toFixed(1)]),
      ["total", result.totalSeconds.toFixed(1)],
    ],
  };
}

function htmlTable(t: ReproTable): string {
  const head = `<tr>${t.header.map((h) => `<th>${esc(h)}</th>`).join("")}</tr>`;
  const body = t.rows.map((r) => `<tr>${r.map((c) => `<td>${esc(c)}</td>`).join("")}</tr>`).join("\n");
  const notes = (t.notes ?? []).map((n) => `<p class="note">${esc(n)}</p>`).join("");
  const chart = t.chart ? barChart({ title: "", xLabel: t.chart.xLabel, bars: t.chart.bars }) : "";
  return `<h2>${esc(t.title)}</h2>${chart}<table><thead>${head}</thead><tbody>${body}</tbody></table>${notes}`;
}

/** The recipe runs inside the repro directory that wrote a report.html, as relative links. */
function runLinks(dir: string): string {
  if (!existsSync(dir)) return "";
  const runs = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && existsSync(join(dir, e.name, "report.html")))
    .map((e) => `<li><a href="${esc(`${e.name}/report.html`)}">${esc(e.name)}/report.html</a></li>`);
  return runs.length
    ? `<h2>Recipe runs</h2><p>Training curves, stages, rollouts and models of each run:</p><ul>${runs.join("")}</ul>`
    : "";
}

export function reproReportHtml(result: ReproResult, config: unknown, command: string, backend?: string): string {
  const timing = timingTable(result);
  const title = `kiln repro ${result.recipe}${result.ablation ? ` --ablation ${result.ablation}` : ""}`;
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>${REPORT_STYLE}</style></head><body>
<h1>${esc(title)}</h1>
<p>Command: <code>${esc(command)}</code>${backend ? ` (${esc(backend)})` : ""}. Held-out instances, never trained on; each bar is a row's mean ± SE
(sample SD / √n, the whisker) and, beside it, the paired Δ ± SE against the base on the same instances (green: above
2 SE, red: below −2 SE). The recipe runs (training curves, rollouts, models) are in the sub-directories of this
directory, each with its own report.html.</p>
${result.tables.map(htmlTable).join("\n")}
${htmlTable(timing)}
${runLinks(result.dir)}
<h2>Configuration</h2>
${foldedJson("Configuration", config)}
</body></html>
`;
}

/**
 * table.md, summary.json and report.html in the result's directory. `backend`: the tensor backend the tables were
 * computed on (initBackend's line) — a table is deterministic per seed on one backend, not across backends.
 */
export function writeReproOutputs(result: ReproResult, config: unknown, command: string, backend?: string): string {
  mkdirSync(result.dir, { recursive: true });
  const markdown = result.tables.map(markdownTable).join("\n\n");
  writeAtomic(join(result.dir, "table.md"), `${markdown}\n`);
  writeAtomic(
    join(result.dir, "summary.json"),
    `${JSON.stringify({ ...result, config, command, ...(backend ? { backend } : {}) }, null, 2)}\n`,
  );
  writeAtomic(join(result.dir, "report.html"), reproReportHtml(result, config, command, backend));
  return markdown;
}

/**
 * The rows' headline numbers over several seeds: each seed's value and the mean across seeds ± its SE
 * (the seeds' SD / √seeds: with two seeds, half their difference). Rows and metrics are those of the
 * first seed's `seedSummary`; null when no run has one.
 */
export function acrossSeedsTable(
  recipe: string,
  runs: readonly { seed: number; result: ReproResult }[],
): ReproTable | null {
  const first = runs[0]?.result.seedSummary;
  if (!first) return null;
  const seeds = runs.map((r) => r.seed);
  const metrics = [...new Set(Object.values(first).flatMap((m) => Object.keys(m)))];
  const header = ["row"];
  for (const m of metrics) header.push(...seeds.map((s) => `${m}, seed ${s}`), `${m}, mean ± SE over seeds`);
  const rows = Object.keys(first).map((label) => {
    const cells = [label];
    for (const m of metrics) {
      const values = runs.map((r) => r.result.seedSummary?.[label]?.[m]);
      cells.push(...values.map((v) => (v === undefined || !Number.isFinite(v) ? "—" : v.toFixed(3))));
      const known = values.filter((v): v is number => v !== undefined && Number.isFinite(v));
      cells.push(known.length === values.length && known.length > 1 ? fmt(meanSe(known)) : "—");
    }
    return cells;
  });
  return {
    title: `${recipe} over ${seeds.length} seeds (${seeds.join(", ")}): each seed's value and the mean across seeds`,
    header,
    rows,
    notes: [
      "Each seed reruns the whole table (training, sampling and initialisation draw from the seed; the held-out instances stay the same). SE over seeds = SD across seeds / √seeds.",
    ],
  };
}

/** Wall seconds of each table a `kiln repro` command printed, and their total. */
export function wallTimeTable(command: string, tables: readonly { label: string; seconds: number }[]): ReproTable {
  const total = tables.reduce((sum, t) => sum + t.seconds, 0);
  return {
    title: `Wall time per table (${command})`,
    header: ["table", "s", "min"],
    rows: [...tables, { label: "total", seconds: total }].map((t) => [
      t.label,
      t.seconds.toFixed(1),
      (t.seconds / 60).toFixed(1),
    ]),
  };
}

/** Seconds since `start` (performance.now()). */
export function secondsSince(start: number): number {
  return (performance.now() - start) / 1000;
}

// The repro tables: every row is n, mean ± SE of per-instance values and, against the base, the
// paired Δ ± SE over the instances both evaluated (@kiln/rollout's meanSe / pairedDelta: SE =
// sample standard deviation / √n). Rendered as Markdown for the terminal and as HTML in report.html.
import { type MeanSe, type PairedDelta, formatMeanSe, meanSe, pairedDelta } from "@kiln/rollout";
import type { ScoreBar } from "../report-svg.js";

export interface ReproTable {
  title: string;
  header: string[];
  rows: string[][];
  /** Sentences printed under the table (what the rows are, caveats). */
  notes?: string[];
  /** The rows' scores as numbers, drawn above the table in report.html (bars with ± SE and Δ vs base). */
  chart?: { xLabel: string; bars: ScoreBar[] };
}

/** A chart bar from a row's summary: mean ± SE, n, and its paired Δ against the base (none for the base). */
export function scoreBar(label: string, score: Pick<MeanSe, "mean" | "se">, n?: number, delta?: PairedDelta): ScoreBar {
  return { label, mean: score.mean, se: score.se, n, delta: delta ? { mean: delta.mean, se: delta.se } : undefined };
}

/** Per-instance values of one row, summarised and paired against the base's. */
export interface ScoreSummary {
  n: number;
  score: MeanSe;
  delta?: PairedDelta;
}

export function summarizeScores(
  scores: Readonly<Record<string, number>>,
  base?: Readonly<Record<string, number>>,
): ScoreSummary {
  const values = Object.values(scores);
  return { n: values.length, score: meanSe(values), delta: base ? pairedDelta(scores, base) : undefined };
}

/** "0.412 ± 0.051" with `digits` decimals ("n/a" when undefined or NaN). */
export function fmt(x: Pick<MeanSe, "mean" | "se"> | undefined, digits = 3): string {
  return x ? formatMeanSe(x, digits) : "—";
}

/** "+0.125 ± 0.040" — a Δ with its sign, so a regression reads as one. */
export function fmtDelta(d: PairedDelta | undefined, digits = 3): string {
  if (!d || !Number.isFinite(d.mean)) return "—";
  const sign = d.mean > 0 ? "+" : d.mean < 0 ? "−" : "±";
  return `${sign}${Math.abs(d.mean).toFixed(digits)} ± ${Number.isFinite(d.se) ? d.se.toFixed(digits) : "n/a"}`;
}

/** Whether a paired Δ exceeds `k` standard errors (k = 2 in the bar). */
export function beyondSe(d: PairedDelta | undefined, k = 2): boolean {
  return d !== undefined && d.n > 1 && Number.isFinite(d.se) && Math.abs(d.mean) > k * d.se;
}

function cell(s: string): string {
  return s.replace(/\|/g, "\\|").replace(/\n/g, " ");
}

export function markdownTable(table: ReproTable): string {
  const lines = [
    `### ${table.title}`,
    "",
    `| ${table.header.map(cell).join(" | ")} |`,
    `|${table.header.map(() => "---").join("|")}|`,
    ...table.rows.map((r) => `| ${r.map(cell).join(" | ")} |`),
  ];
  if (table.notes?.length) lines.push("", ...table.notes);
  return lines.join("\n");
}

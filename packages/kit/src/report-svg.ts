// Charts for the report pages as inline SVG strings: no scripts, no fonts, no files, nothing fetched,
// so a report.html reads the same offline, from a tarball or an archive. Two shapes: line charts of
// training metrics against the step (real tick marks on both axes, axis titles with units) and
// horizontal bars of evaluation scores with ± SE whiskers and the paired Δ against the base.

/** Escape text for HTML and SVG content and attributes. */
export function esc(s: string): string {
  return s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c] ?? c);
}

const FONT = 'font-family="system-ui, sans-serif"';
const COLORS = ["#c0392b", "#2471a3", "#229954", "#8e44ad", "#d68910"];

/**
 * Round tick values covering [lo, hi]: steps of 1, 2 or 5 × 10^k, about `target` of them. The first and
 * last ticks enclose the data (they are the axis' ends). `integer` keeps the step ≥ 1 (training steps).
 */
export function niceTicks(lo: number, hi: number, target = 5, integer = false): { ticks: number[]; step: number } {
  if (!(Number.isFinite(lo) && Number.isFinite(hi))) return { ticks: [0, 1], step: 1 };
  if (hi < lo) [lo, hi] = [hi, lo];
  // A range within rounding noise of one value (12 and 12 + 2e-15: a mean of equal scores) would give a
  // step so small that lo / step passes 2^53, where i++ no longer moves: draw it as the one value.
  if (hi - lo <= Math.max(Math.abs(lo), Math.abs(hi)) * 1e-9) {
    const mid = (lo + hi) / 2;
    const pad = integer ? 1 : Math.abs(mid) * 0.1 || 1;
    [lo, hi] = [mid - pad, mid + pad];
  }
  const raw = (hi - lo) / Math.max(1, target);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const norm = raw / mag;
  let step = (norm < 1.5 ? 1 : norm < 3 ? 2 : norm < 7 ? 5 : 10) * mag;
  if (integer) step = Math.max(1, Math.round(step));
  const first = Math.floor(lo / step + 1e-9);
  const last = Math.ceil(hi / step - 1e-9);
  const ticks: number[] = [];
  for (let i = first; i <= last; i++) ticks.push(Number((i * step).toPrecision(12)));
  if (ticks.length < 2) ticks.push(Number(((last + 1) * step).toPrecision(12)));
  return { ticks, step };
}

/** A tick label with as many decimals as the step needs; scientific for very small or very large values. */
export function formatTick(v: number, step: number, scientific = Math.abs(v) < 1e-3 || Math.abs(v) >= 1e6): string {
  if (v === 0) return "0";
  if (scientific) {
    // The fewest digits that write the tick exactly (ticks are multiples of a round step).
    for (let digits = 0; digits < 4; digits++)
      if (Math.abs(Number(v.toExponential(digits)) - v) <= step * 1e-6) return v.toExponential(digits);
    return v.toExponential(3);
  }
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  return v.toFixed(decimals);
}

/** Labels of one axis in one notation: scientific for all when the axis' largest value is tiny or huge. */
export function formatTicks(ticks: readonly number[], step: number): string[] {
  const largest = Math.max(...ticks.map(Math.abs));
  const scientific = largest < 1e-3 || largest >= 1e6;
  return ticks.map((t) => formatTick(t, step, scientific));
}

export interface Series {
  name: string;
  points: readonly (readonly [number, number])[];
  /** Points only, no line (e.g. evaluations every N steps beside a per-step curve). */
  markers?: boolean;
}

export interface LineChartOptions {
  title: string;
  /** Axis titles, units included ("step", "loss (nats/token)"). */
  xLabel: string;
  yLabel: string;
  series: readonly Series[];
  width?: number;
  height?: number;
}

/** A line chart with tick marks and labels on both axes, light grid lines, axis titles and a legend. */
export function lineChart(o: LineChartOptions): string {
  const series = o.series
    .map((s) => ({ ...s, points: s.points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y)) }))
    .filter((s) => s.points.length > 0);
  if (series.length === 0) return "";
  const width = o.width ?? 380;
  const height = o.height ?? 240;
  const all = series.flatMap((s) => s.points);
  const xs = niceTicks(Math.min(...all.map((p) => p[0])), Math.max(...all.map((p) => p[0])), 5, true);
  const ys = niceTicks(Math.min(...all.map((p) => p[1])), Math.max(...all.map((p) => p[1])), 4);
  const yLabels = formatTicks(ys.ticks, ys.step);
  const left = 16 + 6.2 * Math.max(...yLabels.map((l) => l.length)) + 8;
  const [right, top, bottom] = [12, 26, 40];
  const [x0, x1] = [xs.ticks[0], xs.ticks[xs.ticks.length - 1]];
  const [y0, y1] = [ys.ticks[0], ys.ticks[ys.ticks.length - 1]];
  const sx = (x: number) => left + ((x - x0) / (x1 - x0)) * (width - left - right);
  const sy = (y: number) => height - bottom - ((y - y0) / (y1 - y0)) * (height - top - bottom);
  const parts: string[] = [];
  parts.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#fff"/>`);
  parts.push(`<text x="${left}" y="15" font-size="12" font-weight="600">${esc(o.title)}</text>`);
  for (const [i, t] of ys.ticks.entries()) {
    const y = sy(t).toFixed(1);
    parts.push(
      `<line class="grid" x1="${left}" x2="${width - right}" y1="${y}" y2="${y}" stroke="#eee"/>`,
      `<line class="tick y" x1="${left - 4}" x2="${left}" y1="${y}" y2="${y}" stroke="#555"/>`,
      `<text class="tick-label y" x="${left - 6}" y="${y}" font-size="10" text-anchor="end" dominant-baseline="middle">${yLabels[i]}</text>`,
    );
  }
  const xLabels = formatTicks(xs.ticks, xs.step);
  for (const [i, t] of xs.ticks.entries()) {
    const x = sx(t).toFixed(1);
    parts.push(
      `<line class="tick x" x1="${x}" x2="${x}" y1="${height - bottom}" y2="${height - bottom + 4}" stroke="#555"/>`,
      `<text class="tick-label x" x="${x}" y="${height - bottom + 14}" font-size="10" text-anchor="middle">${xLabels[i]}</text>`,
    );
  }
  parts.push(
    `<line class="axis" x1="${left}" x2="${left}" y1="${top}" y2="${height - bottom}" stroke="#555"/>`,
    `<line class="axis" x1="${left}" x2="${width - right}" y1="${height - bottom}" y2="${height - bottom}" stroke="#555"/>`,
    `<text class="axis-title x" x="${(left + width - right) / 2}" y="${height - 6}" font-size="11" text-anchor="middle">${esc(o.xLabel)}</text>`,
    `<text class="axis-title y" transform="translate(11 ${(top + height - bottom) / 2}) rotate(-90)" font-size="11" text-anchor="middle">${esc(o.yLabel)}</text>`,
  );
  for (const [i, s] of series.entries()) {
    const color = COLORS[i % COLORS.length];
    const pts = s.points.map(([x, y]) => [sx(x).toFixed(1), sy(y).toFixed(1)]);
    if (!s.markers && pts.length > 1)
      parts.push(
        `<path class="series" d="${pts.map(([x, y], j) => `${j ? "L" : "M"}${x},${y}`).join(" ")}" fill="none" stroke="${color}" stroke-width="1.5"/>`,
      );
    if (s.markers || pts.length === 1)
      for (const [x, y] of pts) parts.push(`<circle cx="${x}" cy="${y}" r="2.5" fill="${color}"/>`);
    if (series.length > 1) {
      const lx = width - right - 110;
      const ly = top + 4 + i * 13;
      parts.push(
        `<rect x="${lx}" y="${ly - 4}" width="10" height="3" fill="${color}"/>`,
        `<text x="${lx + 14}" y="${ly}" font-size="10" dominant-baseline="middle">${esc(s.name)}</text>`,
      );
    }
  }
  return `<figure class="chart line"><svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(o.title)}" ${FONT}>
${parts.join("\n")}
</svg></figure>`;
}

/** One evaluated row: its score mean ± SE and, except for the base, the paired Δ ± SE against the base. */
export interface ScoreBar {
  label: string;
  mean: number;
  se?: number;
  n?: number;
  delta?: { mean: number; se: number };
}

export interface BarChartOptions {
  /** Drawn above the bars; "" when the page's heading already says it. */
  title: string;
  /** The score axis' title with its unit ("score (mean ± SE)", "reward"). */
  xLabel: string;
  bars: readonly ScoreBar[];
  width?: number;
}

function signed(x: number, digits: number): string {
  return `${x > 0 ? "+" : x < 0 ? "−" : "±"}${Math.abs(x).toFixed(digits)}`;
}

/**
 * Horizontal bars, one per row, each with its ± SE whisker, its value and its Δ against the base
 * (green when it exceeds two standard errors, red when it is a regression beyond two). The score axis
 * has tick marks and includes 0.
 */
export function barChart(o: BarChartOptions): string {
  const bars = o.bars.filter((b) => Number.isFinite(b.mean));
  if (bars.length === 0) return "";
  const width = o.width ?? 860;
  const row = 30;
  const top = o.title ? 28 : 8;
  const bottom = 40;
  const height = top + bars.length * row + bottom;
  const lo = Math.min(0, ...bars.map((b) => b.mean - (Number.isFinite(b.se) ? (b.se as number) : 0)));
  const hi = Math.max(0, ...bars.map((b) => b.mean + (Number.isFinite(b.se) ? (b.se as number) : 0)));
  const xs = niceTicks(lo, hi > lo ? hi : lo + 1, 5);
  const left = Math.min(320, 14 + 6.8 * Math.max(...bars.map((b) => b.label.length)));
  const right = 230;
  const [x0, x1] = [xs.ticks[0], xs.ticks[xs.ticks.length - 1]];
  const sx = (x: number) => left + ((x - x0) / (x1 - x0)) * (width - left - right);
  const parts: string[] = [];
  parts.push(`<rect x="0" y="0" width="${width}" height="${height}" fill="#fff"/>`);
  if (o.title) parts.push(`<text x="${left}" y="16" font-size="12" font-weight="600">${esc(o.title)}</text>`);
  const axisY = top + bars.length * row;
  const xLabels = formatTicks(xs.ticks, xs.step);
  for (const [i, t] of xs.ticks.entries()) {
    const x = sx(t).toFixed(1);
    parts.push(
      `<line class="grid" x1="${x}" x2="${x}" y1="${top}" y2="${axisY}" stroke="${t === 0 ? "#999" : "#eee"}"/>`,
      `<line class="tick x" x1="${x}" x2="${x}" y1="${axisY}" y2="${axisY + 4}" stroke="#555"/>`,
      `<text class="tick-label x" x="${x}" y="${axisY + 14}" font-size="10" text-anchor="middle">${xLabels[i]}</text>`,
    );
  }
  parts.push(
    `<line class="axis" x1="${left}" x2="${width - right}" y1="${axisY}" y2="${axisY}" stroke="#555"/>`,
    `<text class="axis-title x" x="${(left + width - right) / 2}" y="${height - 6}" font-size="11" text-anchor="middle">${esc(o.xLabel)}</text>`,
  );
  for (const [i, b] of bars.entries()) {
    const yc = top + i * row + row / 2;
    const [a, z] = [sx(Math.min(0, b.mean)), sx(Math.max(0, b.mean))];
    const hasSe = b.se !== undefined && Number.isFinite(b.se);
    const good = b.delta && Number.isFinite(b.delta.se) && b.delta.mean > 2 * b.delta.se;
    const bad = b.delta && Number.isFinite(b.delta.se) && b.delta.mean < -2 * b.delta.se;
    const fill = i === 0 && !b.delta ? "#95a5a6" : good ? "#27ae60" : bad ? "#c0392b" : "#5d8aa8";
    parts.push(
      `<text class="bar-label" x="${left - 8}" y="${yc}" text-anchor="end" font-size="12" dominant-baseline="middle">${esc(b.label)}</text>`,
      `<rect class="bar" x="${a.toFixed(1)}" y="${(yc - 9).toFixed(1)}" width="${Math.max(1, z - a).toFixed(1)}" height="18" fill="${fill}"/>`,
    );
    if (hasSe) {
      const [e0, e1] = [sx(b.mean - (b.se as number)), sx(b.mean + (b.se as number))].map((v) => v.toFixed(1));
      parts.push(
        `<path class="se" d="M${e0},${yc} L${e1},${yc} M${e0},${yc - 5} L${e0},${yc + 5} M${e1},${yc - 5} L${e1},${yc + 5}" stroke="#222" stroke-width="1.2"/>`,
      );
    }
    const value = `${b.mean.toFixed(3)} ± ${hasSe ? (b.se as number).toFixed(3) : "n/a"}${b.n !== undefined ? ` (n=${b.n})` : ""}`;
    const delta = b.delta
      ? `Δ ${signed(b.delta.mean, 3)} ± ${Number.isFinite(b.delta.se) ? b.delta.se.toFixed(3) : "n/a"}`
      : i === 0
        ? "base"
        : "";
    parts.push(
      `<text class="bar-value" x="${width - right + 8}" y="${yc - 6}" font-size="11" dominant-baseline="middle">${esc(value)}<tspan class="bar-delta" x="${width - right + 8}" dy="13" fill="${good ? "#1e8449" : bad ? "#a93226" : "#555"}">${esc(delta)}</tspan></text>`,
    );
  }
  return `<figure class="chart bars"><svg width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-label="${esc(o.title)}" ${FONT}>
${parts.join("\n")}
</svg></figure>`;
}

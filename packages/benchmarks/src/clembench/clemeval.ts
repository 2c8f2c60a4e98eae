// clemscore: clemcore `clemcore/clemeval.py` (`load_scores`, `build_df_episode_scores`, `save_clem_table`).
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";
import { PlayedScoreError, ResultsLayoutError } from "./errors.js";
import * as M from "./metrics.js";
import { npRound, parsePyJson, pyFloatRepr, toNumber } from "./py.js";

/** One long-format row, as clemeval's episode-scores dataframe. */
export interface ScoreRow {
  game: string;
  model: string;
  experiment: string;
  episode: string;
  metric: string;
  value: unknown;
}

/** Every file whose name ends in "scores.json" below `dir` (clemeval's `rglob("*scores.json")`). */
function findScoreFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      const st = statSync(p);
      if (st.isDirectory()) walk(p);
      else if (name.endsWith("scores.json")) out.push(p);
    }
  };
  walk(dir);
  return out;
}

/**
 * Load the "episode scores" of every scores.json under `resultsDir`. Game, model, experiment and episode
 * come from the last four directories (`<model>/<game>/<experiment>/<episode>/scores.json`).
 */
export function loadScores(resultsDir: string, opts: { model?: string; game?: string } = {}): ScoreRow[] {
  if (!existsSync(resultsDir)) throw new ResultsLayoutError(`results directory ${resultsDir} does not exist`);
  const rows: ScoreRow[] = [];
  const seen = new Set<string>();
  for (const file of findScoreFiles(resultsDir)) {
    const parts = relative(resultsDir, file).split(sep);
    if (parts.length < 5)
      throw new ResultsLayoutError(
        `${file}: expected <model>/<game>/<experiment>/<episode>/scores.json below ${resultsDir}`,
      );
    const [model, game, experiment, episode] = parts.slice(-5, -1);
    if (opts.model !== undefined && !file.includes(opts.model)) continue;
    if (opts.game !== undefined && !parts.includes(opts.game)) continue;
    const key = [game, model, experiment, episode].join("\u0000");
    if (seen.has(key)) continue; // clemeval keeps the first and reports "Repeated file"
    seen.add(key);
    const data = parsePyJson(readFileSync(file, "utf8")) as Record<string, unknown>;
    const episodeScores = data["episode scores"];
    if (!episodeScores || typeof episodeScores !== "object")
      throw new ResultsLayoutError(`${file}: no "episode scores" object`);
    for (const [metric, value] of Object.entries(episodeScores as Record<string, unknown>))
      rows.push({ game, model, experiment, episode, metric, value });
  }
  return rows;
}

/** Add `Played = 1 − Aborted` rows; a game that writes "Played" itself is an error (clemcore PlayedScoreError). */
export function addPlayedRows(rows: ScoreRow[]): ScoreRow[] {
  const bad = rows.find((r) => r.metric === M.METRIC_PLAYED);
  if (bad)
    throw new PlayedScoreError(
      `${bad.game}/${bad.experiment}/${bad.episode}: scores must not contain "${M.METRIC_PLAYED}" (it is derived as 1 - "${M.METRIC_ABORTED}")`,
    );
  const played = rows
    .filter((r) => r.metric === M.METRIC_ABORTED)
    .map((r) => ({ ...r, metric: M.METRIC_PLAYED, value: 1 - toNumber(r.value) }));
  return [...rows, ...played];
}

/** pandas' groupby mean: NaN skipped, Kahan-compensated sum (pandas `_libs/groupby.pyx group_mean`). */
export function pandasMean(values: number[]): number {
  let sum = 0;
  let comp = 0;
  let n = 0;
  for (const v of values) {
    if (Number.isNaN(v)) continue;
    n++;
    const y = v - comp;
    const t = sum + y;
    comp = t - sum - y;
    sum = t;
  }
  return n === 0 ? Number.NaN : sum / n;
}

/** pandas' groupby std (ddof 1): NaN skipped, Welford's algorithm (`group_var`); NaN for fewer than 2 values. */
export function pandasStd(values: number[]): number {
  let n = 0;
  let mean = 0;
  let ssq = 0;
  for (const v of values) {
    if (Number.isNaN(v)) continue;
    n++;
    const old = mean;
    mean += (v - old) / n;
    ssq += (v - mean) * (v - old);
  }
  return n > 1 ? Math.sqrt(ssq / (n - 1)) : Number.NaN;
}

export interface GameCell {
  /** round(100 · mean(Played), 2) */
  played: number;
  /** round(mean of non-NaN Main Score, 2); NaN when every episode is NaN */
  quality: number;
  /** round(sample std of Main Score, 2); NaN with fewer than 2 values */
  qualityStd: number;
  /** episodes (with an Aborted score) */
  n: number;
  /** episodes with a non-NaN Main Score */
  nQuality: number;
  /** standard error of % played: 100 · sqrt(p(1 − p)/n) (not rounded) */
  playedSe: number;
  /** standard error of quality: std / sqrt(nQuality) (not rounded) */
  qualitySe: number;
}

export interface ModelRow {
  model: string;
  clemscore: number;
  averagePlayed: number;
  averageQuality: number;
  /** delta-method standard error of clemscore from the per-game SEs (games independent) */
  clemscoreSe: number;
  games: Record<string, GameCell>;
}

export interface ClemTable {
  games: string[];
  rows: ModelRow[];
}

function groupBy<T>(xs: T[], key: (x: T) => string): Map<string, T[]> {
  const m = new Map<string, T[]>();
  for (const x of xs) {
    const k = key(x);
    let arr = m.get(k);
    if (!arr) m.set(k, (arr = []));
    arr.push(x);
  }
  return m;
}

const byCodePoint = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/**
 * `save_clem_table`: per (game, model) the means of Played (×100) and Main Score rounded to 2 (numpy
 * rounding); per model the mean over games of those rounded values (NaN games skipped), rounded to 2;
 * clemscore = round(Average % Played / 100 × Average Quality, 2).
 */
export function clemTable(rowsWithPlayed: ScoreRow[]): ClemTable {
  const main = rowsWithPlayed.filter((r) => r.metric === M.METRIC_PLAYED || r.metric === M.BENCH_SCORE);
  const games = [...new Set(main.map((r) => r.game))].sort(byCodePoint);
  const models = [...new Set(main.map((r) => r.model))].sort(byCodePoint);
  const groups = groupBy(main, (r) => `${r.model}\u0000${r.game}\u0000${r.metric}`);
  const out: ModelRow[] = [];
  for (const model of models) {
    const cells: Record<string, GameCell> = {};
    for (const game of games) {
      const playedVals = (groups.get(`${model}\u0000${game}\u0000${M.METRIC_PLAYED}`) ?? []).map((r) =>
        toNumber(r.value),
      );
      const scoreVals = (groups.get(`${model}\u0000${game}\u0000${M.BENCH_SCORE}`) ?? []).map((r) => toNumber(r.value));
      if (playedVals.length === 0 && scoreVals.length === 0) continue;
      const pMean = pandasMean(playedVals);
      const qMean = pandasMean(scoreVals);
      const nq = scoreVals.filter((v) => !Number.isNaN(v)).length;
      const std = pandasStd(scoreVals);
      const np = playedVals.filter((v) => !Number.isNaN(v)).length;
      cells[game] = {
        played: npRound(pMean * 100, 2),
        quality: npRound(qMean, 2),
        qualityStd: npRound(std, 2),
        n: np,
        nQuality: nq,
        playedSe: np > 0 ? 100 * Math.sqrt((pMean * (1 - pMean)) / np) : Number.NaN,
        qualitySe: nq > 1 ? std / Math.sqrt(nq) : Number.NaN,
      };
    }
    const present = Object.values(cells);
    const averagePlayed = npRound(pandasMean(present.map((c) => c.played)), 2);
    const averageQuality = npRound(pandasMean(present.map((c) => c.quality)), 2);
    const clemscore = npRound((averagePlayed / 100) * averageQuality, 2);
    // SE of the game averages (independent games), then the delta method for the product
    const gp = present.filter((c) => !Number.isNaN(c.played));
    const gq = present.filter((c) => !Number.isNaN(c.quality));
    const seP = Math.sqrt(gp.reduce((a, c) => a + (Number.isNaN(c.playedSe) ? 0 : c.playedSe ** 2), 0)) / gp.length;
    const seQ = Math.sqrt(gq.reduce((a, c) => a + (Number.isNaN(c.qualitySe) ? 0 : c.qualitySe ** 2), 0)) / gq.length;
    const clemscoreSe = Math.sqrt((averageQuality * seP) ** 2 + (averagePlayed * seQ) ** 2) / 100;
    out.push({ model, clemscore, averagePlayed, averageQuality, clemscoreSe, games: cells });
  }
  return { games, rows: out };
}

/** Column headers of clemcore's results.csv, in its order (sorted by game then metric; "all" sorts among games). */
export function resultColumns(table: ClemTable, showStd = true): string[] {
  const cols: [string, string][] = [
    ["all", "Average % Played"],
    ["all", "Average Quality Score"],
  ];
  for (const g of table.games) {
    cols.push([g, "% Played"], [g, "Quality Score"]);
    if (showStd) cols.push([g, "Quality Score (std)"]);
  }
  cols.sort((a, b) => byCodePoint(a[0], b[0]) || byCodePoint(a[1], b[1]));
  return ["-, clemscore", ...cols.map(([g, m]) => `${g}, ${m}`)];
}

function cellValue(row: ModelRow, column: string): number {
  if (column === "-, clemscore") return row.clemscore;
  if (column === "all, Average % Played") return row.averagePlayed;
  if (column === "all, Average Quality Score") return row.averageQuality;
  const i = column.lastIndexOf(", ");
  const cell = row.games[column.slice(0, i)];
  if (!cell) return Number.NaN;
  const metric = column.slice(i + 2);
  if (metric === "% Played") return cell.played;
  if (metric === "Quality Score") return cell.quality;
  return cell.qualityStd;
}

/** The table as rows of numbers keyed by column header (NaN = empty cell). */
export function tableCells(table: ClemTable, showStd = true): { model: string; values: Record<string, number> }[] {
  const cols = resultColumns(table, showStd);
  return table.rows.map((r) => ({ model: r.model, values: Object.fromEntries(cols.map((c) => [c, cellValue(r, c)])) }));
}

function csvField(s: string): string {
  return /[",\n\r]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s;
}

/** pandas `DataFrame.to_csv` of the results table: float repr, NaN as an empty field. */
export function formatResultsCsv(table: ClemTable, showStd = true): string {
  const cols = resultColumns(table, showStd);
  const lines = [["", ...cols].map(csvField).join(",")];
  for (const row of table.rows)
    lines.push(
      [
        csvField(row.model),
        ...cols.map((c) => {
          const v = cellValue(row, c);
          return Number.isNaN(v) ? "" : pyFloatRepr(v);
        }),
      ].join(","),
    );
  return `${lines.join("\n")}\n`;
}

const fmt2 = (v: number) => (Number.isNaN(v) ? "" : v.toFixed(2));

/** A Markdown version of the results table (one model per row, as clemcore's results.html). */
export function formatResultsMarkdown(table: ClemTable, showStd = false): string {
  const cols = resultColumns(table, showStd);
  const head = `| model | ${cols.join(" | ")} |`;
  const rule = `|${" --- |".repeat(cols.length + 1)}`;
  const body = table.rows.map((r) => `| ${r.model} | ${cols.map((c) => fmt2(cellValue(r, c))).join(" | ")} |`);
  return [head, rule, ...body].join("\n") + "\n";
}

/** Per game and model: n, % played ± SE, quality ± SE (Markdown). */
export function formatStatsMarkdown(table: ClemTable): string {
  const lines = [
    "| model | game | n | % played | SE | n quality | quality | SE |",
    "| --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of table.rows) {
    for (const g of table.games) {
      const c = r.games[g];
      if (!c) continue;
      lines.push(
        `| ${r.model} | ${g} | ${c.n} | ${fmt2(c.played)} | ${fmt2(c.playedSe)} | ${c.nQuality} | ${fmt2(c.quality)} | ${fmt2(c.qualitySe)} |`,
      );
    }
    lines.push(
      `| ${r.model} | **clemscore** | | ${fmt2(r.averagePlayed)} | | | ${fmt2(r.averageQuality)} | ${fmt2(r.clemscore)} ± ${fmt2(r.clemscoreSe)} |`,
    );
  }
  return lines.join("\n") + "\n";
}

function rawValue(v: unknown): string {
  if (typeof v === "number") return Number.isNaN(v) ? "" : Number.isInteger(v) ? String(v) : pyFloatRepr(v);
  if (typeof v === "boolean") return v ? "True" : "False";
  if (v === null || v === undefined) return "";
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** raw.csv (long format, one row per episode metric). */
export function formatRawCsv(rows: ScoreRow[]): string {
  const lines = [",game,model,experiment,episode,metric,value"];
  rows.forEach((r, i) => {
    lines.push(
      [String(i), r.game, r.model, r.experiment, r.episode, r.metric, rawValue(r.value)].map(csvField).join(","),
    );
  });
  return `${lines.join("\n")}\n`;
}

/**
 * Playpen's two scores from one set of rows: clemscore over the interactive games and statscore, the same
 * formula over the static benchmarks (`playpen/cli.py`: two suites, two tables).
 */
export function clemAndStatScore(
  rowsWithPlayed: ScoreRow[],
  staticGames: readonly string[] = ["bbh", "cladder", "eqbench", "ifeval", "mmlu_pro"],
): { clem: ClemTable; stat: ClemTable } {
  const isStatic = (r: ScoreRow) => staticGames.includes(r.game);
  return {
    clem: clemTable(rowsWithPlayed.filter((r) => !isStatic(r))),
    stat: clemTable(rowsWithPlayed.filter(isStatic)),
  };
}

/** A difference of two clemscores (after − before) with the standard error of the paired episodes. */
export interface ClemscoreDelta {
  /** after − before, each clemscore exactly as clemTable rounds it. */
  mean: number;
  se: number;
  /** Episodes present for both models. */
  n: number;
  after: number;
  before: number;
}

interface EpisodeCell {
  played: number;
  quality: number;
}

/** Per game, per episode (experiment/episode): Played and Main Score of one model's rows. */
function episodeCells(rows: ScoreRow[], model: string): Map<string, Map<string, EpisodeCell>> {
  const games = new Map<string, Map<string, EpisodeCell>>();
  for (const r of rows) {
    if (r.model !== model || (r.metric !== M.METRIC_PLAYED && r.metric !== M.BENCH_SCORE)) continue;
    let episodes = games.get(r.game);
    if (!episodes) games.set(r.game, (episodes = new Map()));
    const key = `${r.experiment}/${r.episode}`;
    const cell = episodes.get(key) ?? { played: Number.NaN, quality: Number.NaN };
    if (r.metric === M.METRIC_PLAYED) cell.played = toNumber(r.value);
    else cell.quality = toNumber(r.value);
    episodes.set(key, cell);
  }
  return games;
}

/**
 * Each episode's first-order contribution to a model's clemscore (its influence: clemscore minus its mean
 * over the episodes is, to first order, the sum of these). clemscore = P·Q/100 with P the mean over games of
 * % played and Q the mean over games of quality (NaN games skipped), so an episode of game g contributes
 * (Q·100·(played − p_g)/(G_P·n_g) + P·(quality − q_g)/(G_Q·nq_g))/100, its quality term 0 when the episode
 * has no quality (aborted). Unrounded means; keys are `game\0experiment/episode`.
 */
function clemscoreInfluence(games: Map<string, Map<string, EpisodeCell>>): Map<string, number> {
  const stats = [...games].map(([game, episodes]) => {
    const cells = [...episodes.values()];
    const played = cells.map((c) => c.played).filter((v) => !Number.isNaN(v));
    const quality = cells.map((c) => c.quality).filter((v) => !Number.isNaN(v));
    return { game, episodes, p: pandasMean(played), n: played.length, q: pandasMean(quality), nq: quality.length };
  });
  const withPlayed = stats.filter((s) => s.n > 0);
  const withQuality = stats.filter((s) => s.nq > 0);
  const P = pandasMean(withPlayed.map((s) => 100 * s.p));
  const Q = pandasMean(withQuality.map((s) => s.q));
  const out = new Map<string, number>();
  for (const s of stats)
    for (const [key, c] of s.episodes) {
      const fromPlayed = s.n > 0 && !Number.isNaN(c.played) ? (100 * (c.played - s.p)) / (withPlayed.length * s.n) : 0;
      const fromQuality = s.nq > 0 && !Number.isNaN(c.quality) ? (c.quality - s.q) / (withQuality.length * s.nq) : 0;
      out.set(
        `${s.game}\u0000${key}`,
        ((Number.isNaN(Q) ? 0 : Q) * fromPlayed + (Number.isNaN(P) ? 0 : P) * fromQuality) / 100,
      );
    }
  return out;
}

/**
 * The paired difference of two models' clemscores over the same episodes (rows with Played, as from
 * addPlayedRows; both models in `rows`). The Δ is the difference of the two clemTable clemscores; its SE
 * linearises each clemscore into per-episode contributions (clemscoreInfluence), pairs them per episode,
 * and sums within-game variances: SE² = Σ_g n_g · var(d_g), var with ddof 1 over game g's n_g paired
 * episodes (games independent; docs/NUMERICS.md §9.1). Episodes played by only one model are left out of the SE.
 */
export function clemscoreDelta(rows: ScoreRow[], after: string, before: string): ClemscoreDelta {
  const table = clemTable(rows.filter((r) => r.model === after || r.model === before));
  const score = (model: string) => table.rows.find((r) => r.model === model)?.clemscore ?? Number.NaN;
  const a = clemscoreInfluence(episodeCells(rows, after));
  const b = clemscoreInfluence(episodeCells(rows, before));
  const byGame = new Map<string, number[]>();
  for (const [key, v] of a) {
    const w = b.get(key);
    if (w === undefined) continue;
    const game = key.slice(0, key.indexOf("\u0000"));
    let diffs = byGame.get(game);
    if (!diffs) byGame.set(game, (diffs = []));
    diffs.push(v - w);
  }
  let variance = 0;
  let n = 0;
  for (const diffs of byGame.values()) {
    n += diffs.length;
    if (diffs.length > 1) variance += diffs.length * pandasStd(diffs) ** 2;
  }
  const sa = score(after);
  const sb = score(before);
  return { mean: sa - sb, se: Math.sqrt(variance), n, after: sa, before: sb };
}

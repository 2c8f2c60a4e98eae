// The ARP tables on the seed cards' metrics: per phase the seed's published clemscore beside kiln's
// clemscore ± SE and its paired Δ vs base (clemscoreDelta), average % played and quality, statscore and the
// held-out NLL per token with their Δ ("statscore preserved"); a per-game table (quality / % played); and,
// over several seeds, one row per phase with each seed's clemscore and Δ, and whether the seed's claimed
// effects (phase A; the final merge) exceed 2 SE here.
import type { clembench } from "@kiln/benchmarks";
import type { PhaseEval } from "../recipes/recipe-run.js";
import { ARP_SEED_CLEMSCORE, ARP_SEED_SOURCE, type ClemPhase, clemPhaseDelta } from "./arp-clem.js";
import type { StaticScore } from "./static-score.js";
import { type ReproTable, fmt, fmtDelta, scoreBar, summarizeScores } from "./table.js";

/** What a row of the clemscore tables needs (an ArpRow is one). */
export interface ClemTableRow {
  label: string;
  eval: Pick<PhaseEval, "phase">;
  static: StaticScore;
  clem: ClemPhase;
}

/** Phases where the seed cards claim an effect on clemscore vs base: A's SFT and the final merge. */
export const ARP_SEED_EFFECT_PHASES: readonly string[] = ["sft", "final"];

const two = (x: number | undefined): string => (x === undefined || Number.isNaN(x) ? "n/a" : x.toFixed(2));

function clemCell(row: clembench.ModelRow | undefined): string {
  if (!row) return "—";
  return Number.isNaN(row.clemscore) ? "n/a" : `${two(row.clemscore)} ± ${two(row.clemscoreSe)}`;
}

function deltaCell(d: clembench.ClemscoreDelta | undefined): string {
  if (!d || Number.isNaN(d.mean)) return "n/a";
  const sign = d.mean > 0 ? "+" : d.mean < 0 ? "−" : "±";
  return `${sign}${Math.abs(d.mean).toFixed(2)} ± ${two(d.se)}`;
}

/** "yes (+30.10 > 2 × 4.20)", "no (…)", or "—" for a phase without a claimed effect. */
export function seedEffectCell(phase: string, d: clembench.ClemscoreDelta | undefined): string {
  if (!ARP_SEED_EFFECT_PHASES.includes(phase)) return "—";
  if (!d || Number.isNaN(d.mean) || Number.isNaN(d.se)) return "n/a (no clemscore)";
  const holds = d.mean > 2 * d.se;
  return `${holds ? "yes" : "no"} (${deltaCell(d)}; 2 SE = ${(2 * d.se).toFixed(2)})`;
}

/** The seed card's published clemscore of a phase ("—" for rows it has none for, e.g. the bf16 merge). */
export function seedClemscore(phase: string): string {
  const v = ARP_SEED_CLEMSCORE[phase];
  return v === undefined ? "—" : v.toFixed(2);
}

/** The phase table on the seed's metrics, every row paired against the first (the base). */
export function arpClemTable(title: string, rows: readonly ClemTableRow[], notes: string[] = []): ReproTable {
  const base = rows[0];
  return {
    title,
    header: [
      "phase",
      "seed card clemscore",
      "clemscore ± SE",
      "Δ clemscore vs base ± SE",
      "seed's effect: Δ > 2 SE here?",
      "% played",
      "quality",
      "statscore ± SE",
      "Δ statscore vs base ± SE",
      "NLL/token ± SE",
      "Δ NLL vs base ± SE",
    ],
    rows: rows.map((r) => {
      const isBase = r === base;
      const d = isBase ? undefined : clemPhaseDelta(r.clem, base.clem);
      const ds = isBase ? undefined : clemPhaseDelta(r.clem, base.clem, "stat");
      const st = summarizeScores(r.static.perText, isBase ? undefined : base.static.perText);
      return [
        r.label,
        seedClemscore(r.eval.phase),
        clemCell(r.clem.clem),
        isBase ? "—" : deltaCell(d),
        isBase ? "—" : seedEffectCell(r.eval.phase, d),
        two(r.clem.clem?.averagePlayed),
        two(r.clem.clem?.averageQuality),
        clemCell(r.clem.stat),
        isBase ? "—" : deltaCell(ds),
        `${fmt(st.score)} (${st.n})`,
        isBase ? "—" : fmtDelta(st.delta),
      ];
    }),
    notes,
    chart: {
      xLabel: "clemscore (0–100), ± SE",
      bars: rows.map((r) => {
        const d = r === base ? undefined : clemPhaseDelta(r.clem, base.clem);
        const c = r.clem.clem;
        return scoreBar(
          r.label,
          { mean: c?.clemscore ?? Number.NaN, se: c?.clemscoreSe ?? Number.NaN },
          r.clem.episodes.length,
          d ? { n: d.n, mean: d.mean, se: d.se, after: d.after, before: d.before } : undefined,
        );
      }),
    },
  };
}

/** Per phase and game: quality / % played (clemTable's cells), interactive games then static benchmarks. */
export function arpGamesTable(title: string, rows: readonly ClemTableRow[], notes: string[] = []): ReproTable {
  const games = [...new Set(rows.flatMap((r) => [...r.clem.episodes, ...r.clem.staticEpisodes].map((e) => e.game)))];
  const n = (game: string) =>
    rows[0]?.clem.episodes.concat(rows[0].clem.staticEpisodes).filter((e) => e.game === game).length;
  return {
    title,
    header: ["phase", ...games.map((g) => `${g} (n ${n(g)})`)],
    rows: rows.map((r) => [
      r.label,
      ...games.map((g) => {
        const cell = r.clem.clem?.games[g] ?? r.clem.stat?.games[g];
        return cell ? `${two(cell.quality)} / ${two(cell.played)}` : "—";
      }),
    ]),
    notes: ["Each cell: quality (mean Main Score of the played episodes, 0–100) / % played.", ...notes],
  };
}

/** Several seeds' tables of the same phases: one row per phase, each seed's clemscore, Δ and its 2-SE verdict. */
export function arpSeedsTable(runs: readonly { seed: number; rows: readonly ClemTableRow[] }[]): ReproTable {
  const labels = runs[0]?.rows.map((r) => ({ label: r.label, phase: r.eval.phase })) ?? [];
  const header = ["phase", "seed card clemscore"];
  for (const run of runs)
    header.push(
      `seed ${run.seed}: clemscore ± SE`,
      `seed ${run.seed}: Δ vs base ± SE`,
      `seed ${run.seed}: Δ statscore`,
      `seed ${run.seed}: Δ NLL`,
    );
  header.push("seed's effect: Δ > 2 SE in every seed?");
  return {
    title: `ARP over ${runs.length} seeds (${runs.map((r) => r.seed).join(", ")}): clemscore per phase beside the seed card's`,
    header,
    rows: labels.map(({ label, phase }, i) => {
      const cells = [label, seedClemscore(phase)];
      const verdicts: boolean[] = [];
      for (const run of runs) {
        const r = run.rows[i];
        const base = run.rows[0];
        const isBase = i === 0;
        const d = isBase ? undefined : clemPhaseDelta(r.clem, base.clem);
        const ds = isBase ? undefined : clemPhaseDelta(r.clem, base.clem, "stat");
        const st = summarizeScores(r.static.perText, isBase ? undefined : base.static.perText);
        cells.push(
          clemCell(r.clem.clem),
          isBase ? "—" : deltaCell(d),
          isBase ? "—" : deltaCell(ds),
          isBase ? "—" : fmtDelta(st.delta),
        );
        verdicts.push(d !== undefined && !Number.isNaN(d.mean) && d.mean > 2 * d.se);
      }
      cells.push(ARP_SEED_EFFECT_PHASES.includes(phase) ? (verdicts.every(Boolean) ? "yes" : "no") : "—");
      return cells;
    }),
    notes: [
      `Seed card column: ${ARP_SEED_SOURCE}.`,
      "Each seed is a whole ARP run (acquired data, training, evaluation) from the same base; Δ pairs each phase with that run's base over the same held-out episodes.",
    ],
  };
}

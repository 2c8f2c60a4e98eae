import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  addPlayedRows,
  clemTable,
  formatResultsCsv,
  formatResultsMarkdown,
  loadScores,
  PlayedScoreError,
  pandasMean,
  parsePyJson,
  pyJsonDumps,
  type ScoreRow,
} from "../../src/clembench/index.js";

const FIX = join(dirname(fileURLToPath(import.meta.url)), "fixtures", "clemeval");

function parseCsv(text: string): string[][] {
  // RFC-4180 subset: quoted fields with "" escapes, no embedded newlines in this table
  return text
    .trim()
    .split("\n")
    .map((line) => {
      const out: string[] = [];
      let cur = "";
      let q = false;
      for (let i = 0; i < line.length; i++) {
        const c = line[i];
        if (q) {
          if (c === '"' && line[i + 1] === '"') {
            cur += '"';
            i++;
          } else if (c === '"') q = false;
          else cur += c;
        } else if (c === '"') q = true;
        else if (c === ",") {
          out.push(cur);
          cur = "";
        } else cur += c;
      }
      out.push(cur);
      return out;
    });
}

/** Lay the published per-episode scores out as clemcore 2.x results (<model>/<game>/<exp>/<episode>/scores.json). */
function writePublishedRun(): string {
  const doc = parsePyJson(readFileSync(join(FIX, "llama8b-episode-scores.json"), "utf8")) as {
    model: string;
    episodes: Record<string, Record<string, unknown>>;
  };
  const root = mkdtempSync(join(tmpdir(), "clemeval-"));
  for (const [path, scores] of Object.entries(doc.episodes)) {
    const dir = join(root, doc.model, path);
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, "scores.json"), pyJsonDumps({ "turn scores": {}, "episode scores": scores }));
  }
  return root;
}

describe("clemscore aggregation against the published clembench v2.0 Llama-3.1-8B run", () => {
  it("reproduces clemcore's golden results.csv cell by cell (817 published scores.json)", () => {
    const root = writePublishedRun();
    const rows = loadScores(root);
    expect(new Set(rows.map((r) => `${r.game}/${r.experiment}/${r.episode}`)).size).toBe(817);
    const table = clemTable(addPlayedRows(rows));
    const ours = parseCsv(formatResultsCsv(table, true));
    const golden = parseCsv(readFileSync(join(FIX, "golden_results.csv"), "utf8"));
    // same header cells (check_like: order-insensitive in clemcore's test; ours is also in the same order)
    expect(ours[0]).toEqual(golden[0]);
    expect(ours.length).toBe(golden.length);
    for (let r = 1; r < golden.length; r++)
      for (let c = 0; c < golden[0].length; c++)
        expect(`${golden[0][c]}=${ours[r][c]}`).toBe(`${golden[0][c]}=${golden[r][c]}`);
    expect(table.rows[0].clemscore).toBe(28.09);
    expect(table.rows[0].averagePlayed).toBe(56.8);
    expect(table.rows[0].averageQuality).toBe(49.46);
  });

  it("writes the published results.csv byte for byte", () => {
    const table = clemTable(addPlayedRows(loadScores(writePublishedRun())));
    expect(formatResultsCsv(table, true)).toBe(readFileSync(join(FIX, "golden_results.csv"), "utf8"));
  });

  it("reads scores.json files with bare NaN tokens as clemcore writes them", () => {
    const wordle = parsePyJson(
      readFileSync(join(FIX, "raw-wordle-0_high_frequency_words_no_clue_no_critic-episode_1-scores.json"), "utf8"),
    ) as Record<string, Record<string, number>>;
    expect(wordle["episode scores"].Aborted).toBe(1);
    expect(Number.isNaN(wordle["episode scores"]["Main Score"])).toBe(true);
    const taboo = parsePyJson(readFileSync(join(FIX, "raw-taboo-0_high_en-episode_0-scores.json"), "utf8")) as Record<
      string,
      Record<string, number>
    >;
    expect(taboo["episode scores"]["Main Score"]).toBe(100);
  });
});

function rows(spec: [string, string, number, number][]): ScoreRow[] {
  // [model, game, aborted, main score]
  return spec.flatMap(([model, game, aborted, score], i) => [
    { model, game, experiment: "e", episode: `episode_${i}`, metric: "Aborted", value: aborted },
    { model, game, experiment: "e", episode: `episode_${i}`, metric: "Main Score", value: score },
  ]);
}

describe("clemscore formula (hand-computed cases)", () => {
  it("matches clemcore's unit test: 80 played + aborted scored 0 → clemscore 20", () => {
    const t = clemTable(
      addPlayedRows(
        rows([
          ["gpt-4", "taboo", 0, 80],
          ["gpt-4", "taboo", 1, 0],
        ]),
      ),
    );
    expect(t.rows[0].averagePlayed).toBe(50);
    expect(t.rows[0].averageQuality).toBe(40);
    expect(t.rows[0].clemscore).toBe(20);
  });

  it("a game with every episode aborted lowers % played but is skipped in quality", () => {
    const t = clemTable(
      addPlayedRows(
        rows([
          ["m", "a", 0, 50],
          ["m", "a", 0, 100],
          ["m", "b", 1, Number.NaN],
          ["m", "b", 1, Number.NaN],
        ]),
      ),
    );
    const r = t.rows[0];
    expect(r.games.b.played).toBe(0);
    expect(Number.isNaN(r.games.b.quality)).toBe(true);
    expect(r.averagePlayed).toBe(50); // (100 + 0) / 2
    expect(r.averageQuality).toBe(75); // only game a
    expect(r.clemscore).toBe(37.5);
    const csv = formatResultsCsv(t, true).split("\n");
    expect(csv[0]).toBe(
      ',"-, clemscore","a, % Played","a, Quality Score","a, Quality Score (std)","all, Average % Played","all, Average Quality Score","b, % Played","b, Quality Score","b, Quality Score (std)"',
    );
    expect(csv[1]).toBe("m,37.5,100.0,75.0,35.36,50.0,75.0,0.0,,");
    expect(formatResultsMarkdown(t)).toContain("| m | 37.50 |");
  });

  it("averages over rounded per-game values and rounds half to even like numpy", () => {
    // game a quality 1/3*100 → 33.33; game b 2/3*100 → 66.67; average of rounded = 50.0
    const t = clemTable(
      addPlayedRows(
        rows([
          ["m", "a", 0, 100],
          ["m", "a", 0, 0],
          ["m", "a", 0, 0],
          ["m", "b", 0, 100],
          ["m", "b", 0, 100],
          ["m", "b", 0, 0],
        ]),
      ),
    );
    expect(t.rows[0].games.a.quality).toBe(33.33);
    expect(t.rows[0].games.b.quality).toBe(66.67);
    expect(t.rows[0].averageQuality).toBe(50);
    // n and standard errors alongside
    expect(t.rows[0].games.a.nQuality).toBe(3);
    expect(t.rows[0].games.a.qualitySe).toBeCloseTo(57.735 / Math.sqrt(3), 2);
  });

  it("a model lacking a game is averaged over the games it has", () => {
    const t = clemTable(
      addPlayedRows(
        rows([
          ["x", "a", 0, 40],
          ["y", "a", 0, 60],
          ["y", "b", 0, 80],
        ]),
      ),
    );
    expect(t.rows.map((r) => r.model)).toEqual(["x", "y"]);
    expect(t.rows[0].averageQuality).toBe(40);
    expect(t.rows[1].averageQuality).toBe(70);
  });

  it("refuses scores that already carry Played", () => {
    expect(() =>
      addPlayedRows([{ model: "m", game: "g", experiment: "e", episode: "1", metric: "Played", value: 1 }]),
    ).toThrow(PlayedScoreError);
  });

  it("pandas mean uses compensated summation and skips NaN", () => {
    expect(pandasMean([0.1, 0.2, 0.3, Number.NaN])).toBeCloseTo(0.2, 15);
    expect(Number.isNaN(pandasMean([Number.NaN]))).toBe(true);
  });
});

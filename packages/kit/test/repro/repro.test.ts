// `kiln repro` end to end at --quick size on the random tiny chat model: every phase row with n and
// SE, report.html per table, the same table for the same seed, and the variant rows' re-merge equal
// to the run's own merge.
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reproArp } from "../../src/repro/arp-repro.js";
import { reproQuickConfig } from "../../src/repro/config.js";
import { tinyChatSource } from "../../src/repro/model-source.js";
import { reproOel } from "../../src/repro/oel-repro.js";
import { reproOpd } from "../../src/repro/opd-repro.js";
import { writeReproOutputs } from "../../src/repro/output.js";
import { markdownTable } from "../../src/repro/table.js";
import { tmpRoot } from "../recipes/helpers.js";
import { findAll, hasClass, parseHtml } from "../report/html.js";

const root = tmpRoot();
beforeAll(async () => {
  await initBackend("wasm", { threads: 1 });
});
afterAll(() => {
  setBackend("js");
  disposeWasmBackend();
  rmSync(root, { recursive: true, force: true });
});
const quiet = { progress: false, log: () => {} };
const SE_CELL = /^-?\d+\.\d{3} ± \d+\.\d{3}/;

describe("kiln repro at --quick size", () => {
  it("ARP: every phase row, the bf16 row, n and SE in each, report.html; the scale sweep re-merges the same delta", async () => {
    const config = reproQuickConfig(3);
    const r = await reproArp(tinyChatSource(3), config, { ...quiet, out: join(root, "a"), ablation: "scale" });
    const [clem, games, main, sweep] = r.tables;
    const labels = [
      "base",
      "A  SFT (success-only)",
      "A2 targeted SFT (weakest games)",
      "B1 turn-DPO (repeat, length)",
      "B2 turn-DPO (invalid, duplicate field)",
      "C  branch-DPO (whole delta, s = 1)",
      "s = 0.85 · ΣΔ, fp32 merge",
      "s = 0.85 · ΣΔ, bf16 merge",
    ];
    // The seed's metrics: clemscore per phase beside the seed card's, per game quality / % played.
    expect(clem.rows.map((row) => row[0])).toEqual(labels);
    expect(clem.rows.map((row) => row[1])).toEqual([
      "13.05",
      "43.85",
      "46.83",
      "45.52",
      "48.52",
      "50.43",
      "48.70",
      "—",
    ]);
    expect(games.header.length).toBe(1 + config.arpClem.games.length + config.arpClem.staticGames.length);
    const clemEpisodes = (r.details.rows as { clemEpisodes: unknown[] }[])[0].clemEpisodes;
    expect(clemEpisodes).toHaveLength(config.arpClem.games.length * config.arpClem.instancesPerGame);
    expect(main.rows.map((row) => row[0])).toEqual(labels);
    // What each stage trained on: A per game, A2's game, B1/B2 synthetic pairs per mode, C's ties.
    expect((main.notes ?? []).join("\n")).toMatch(/A2 \d+ episodes of the base's weakest games/);
    expect((main.notes ?? []).join("\n")).toMatch(/B1 \d+ synthetic pairs \(/);
    expect((main.notes ?? []).join("\n")).toMatch(/candidate pairs dropped as ties/);
    for (const row of main.rows) {
      expect(row[1]).toBe(String(config.arp.eval.episodes));
      expect(row[2]).toMatch(SE_CELL);
      expect(row[3]).toMatch(SE_CELL);
      expect(row[5]).toMatch(SE_CELL);
    }
    expect(main.rows[0][4]).toBe("—");
    expect(main.rows[7][4]).toMatch(/^[+−±]\d+\.\d{3} ± \d+\.\d{3}$/);
    expect(sweep.rows.map((row) => row[0])).toEqual(["base", "s = 0.7", "s = 0.85", "s = 1"]);
    // The sweep's s = 0.85 row re-merges adapter/ into a fresh base: it must equal the run's model.
    const rows = r.details.rows as { label: string; static: { nll: number } }[];
    const final = rows.find((x) => x.label === "s = 0.85 · ΣΔ, fp32 merge")!;
    const bf16 = rows.find((x) => x.label === "s = 0.85 · ΣΔ, bf16 merge")!;
    expect(sweep.rows[2][5]).toBe(main.rows[6][5]);
    expect(sweep.rows[2][6]).toBe(main.rows[6][6]);
    expect(Number.isFinite(final.static.nll)).toBe(true);
    expect(bf16.static.nll).not.toBe(final.static.nll);
    writeReproOutputs(r, config, "kiln repro arp --quick --ablation scale");
    const html = readFileSync(join(r.dir, "report.html"), "utf8");
    expect(html).toContain("B2 turn-DPO (invalid, duplicate field)");
    expect(html).toContain("Ablation: delta scale s");
    // A phase chart per table: one bar per row (the sweep's too); the recipe run's page is linked.
    const charts = findAll(parseHtml(html), (n) => n.tag === "figure" && hasClass(n, "bars"));
    // (the clemscore chart draws the rows that have a clemscore: none when no episode was played)
    const withClemscore = clem.rows.filter((row) => row[2] !== "n/a").length;
    expect(charts.map((c) => findAll(c, (n) => n.tag === "rect" && hasClass(n, "bar")).length)).toEqual([
      ...(withClemscore > 0 ? [withClemscore] : []),
      main.rows.length,
      sweep.rows.length,
    ]);
    expect(html).toContain('<a href="arp/report.html">');
    expect(html).not.toMatch(/https?:\/\//);
    expect(existsSync(join(r.dir, "arp", "report.html"))).toBe(true);
    expect(existsSync(join(r.dir, "arp", "adapter", "adapter_model.safetensors"))).toBe(true);
  }, 600_000);

  it("OPD: base, r1–r3 and the teacher row with n and SE; OEL: base, consolidated, the memory bound with pass^k", async () => {
    const config = reproQuickConfig(5);
    // Questworld's teacher is the scaffold note (ARP's phase A trains on guess-number only).
    config.opdEnv = "questworld";
    config.opdTeacher = "scaffold";
    const opd = await reproOpd(tinyChatSource(5), config, { ...quiet, out: join(root, "b") });
    expect(opd.tables[0].rows.map((row) => row[0])).toEqual([
      "base",
      "r1",
      "r2",
      "r3",
      "teacher (base + scaffold note)",
    ]);
    // Questworld Core-3 from the wall: n = evaluation seeds, the wall table beside the phase table.
    expect(config.opdEnv).toBe("questworld");
    expect(opd.tables[0].header).toEqual(["phase", "n", "score ± SE", "Δ score vs base ± SE", "errors"]);
    for (const row of opd.tables[0].rows) {
      expect(row[1]).toBe(String(config.heldout.questworldSeeds.length));
      expect(row[2]).toMatch(SE_CELL);
    }
    expect(opd.tables[1].header[0]).toBe("phase"); // the wall against seed 000's row
    const wall = opd.tables[2];
    expect(wall.header).toEqual(["#", "quest stage", "base", "r1", "r2", "r3", "teacher"]);
    expect(wall.rows.length).toBeGreaterThan(3);
    for (const row of wall.rows) for (const c of row.slice(2)) expect(c).toMatch(/^\d+\/\d+$/);
    // What --seeds compares across seeds: each row's Core-3 mean and its share of episodes past the wall.
    const summary = opd.seedSummary ?? {};
    expect(Object.keys(summary)).toEqual(["base", "r1", "r2", "r3", "teacher"]);
    const shareAt = opd.tables[1].header.indexOf("kiln: share ± SE");
    const shares = opd.tables[1].rows.map((row) => Number(row[shareAt].split(" ± ")[0]));
    for (const [i, phase] of ["base", "r1", "r2", "r3", "teacher"].entries()) {
      expect(summary[phase].score).toBeCloseTo(Number(opd.tables[0].rows[i][2].split(" ± ")[0]), 3);
      expect(summary[phase]["past the wall"]).toBeCloseTo(shares[i], 3);
    }
    writeReproOutputs(opd, config, "kiln repro opd --quick");
    expect(existsSync(join(opd.dir, "report.html"))).toBe(true);

    const oel = await reproOel(tinyChatSource(5), config, { ...quiet, out: join(root, "b") });
    const t = oel.tables[0];
    // ARP and OPD print the seed's published rows; OEL says why it has none to print.
    expect(t.notes?.some((n) => n.startsWith("No seed column: the seed card (004)"))).toBe(true);
    expect(t.header).toEqual([
      "model",
      "tasks",
      "trials",
      "reward ± SE",
      "pass^1 ± SE",
      "pass^2 ± SE",
      "pass^3 ± SE",
      "Δ pass^1 vs base ± SE",
      "Δ pass^2 vs base ± SE",
      "Δ pass^3 vs base ± SE",
    ]);
    expect(t.rows.map((row) => row[0])).toEqual([
      "base",
      "consolidated",
      "base + its test-task memory in prompt (upper bound)",
    ]);
    for (const row of t.rows) {
      expect(row[1]).toBe(String(config.heldout.oelTasks));
      expect(row[2]).toBe(String(config.heldout.oelTasks * config.oel.eval.trials));
      for (const c of row.slice(3, 7)) expect(c).toMatch(SE_CELL);
    }
    writeReproOutputs(oel, config, "kiln repro oel --quick");
    expect(existsSync(join(oel.dir, "report.html"))).toBe(true);
  }, 600_000);

  it("OPD's default teacher on questworld is the base guided towards the expert's call; guess-number has none", async () => {
    const config = reproQuickConfig(6);
    expect(config.opdEnv).toBe("questworld");
    expect(config.opdTeacher).toBe("guided");
    const opd = await reproOpd(tinyChatSource(6), config, { ...quiet, out: join(root, "g") });
    const rows = opd.tables[0].rows;
    expect(rows.map((r) => r[0])).toEqual([
      "base",
      "r1",
      "r2",
      "r3",
      `teacher (base guided ${config.opdQuestworld.guidance} nats towards the expert's next call)`,
    ]);
    expect(opd.tables[0].notes?.[0]).toContain(`a bonus of ${config.opdQuestworld.guidance} nats`);
    expect(opd.errors).toEqual([]);
    // The rounds' teacher can be the student itself, tilted towards the call; the teacher's row is the guided base.
    const fromStudent = reproQuickConfig(6);
    fromStudent.opdQuestworld.guideFrom = "student";
    const s = await reproOpd(tinyChatSource(6), fromStudent, { ...quiet, out: join(root, "gs") });
    expect(s.tables[0].rows[4]).toEqual(rows[4]);
    expect(s.errors).toEqual([]);
    const wrong = reproQuickConfig(6);
    (wrong.opdQuestworld as { guideFrom: string }).guideFrom = "teacher";
    await expect(reproOpd(tinyChatSource(6), wrong, { ...quiet, out: join(root, "gw") })).rejects.toThrow(
      /opdQuestworld.guideFrom must be "base" or "student"/,
    );
    const bad = reproQuickConfig(6);
    bad.opdQuestworld.guidance = 0;
    await expect(reproOpd(tinyChatSource(6), bad, { ...quiet, out: join(root, "g0") })).rejects.toThrow(
      /opdQuestworld.guidance/,
    );
    const gn = reproQuickConfig(6);
    gn.opdEnv = "guess-number";
    await expect(reproOpd(tinyChatSource(6), gn, { ...quiet, out: join(root, "g1") })).rejects.toThrow(
      /opdTeacher "guided" has no privileged information .*opdTeacher=sft/,
    );
  }, 600_000);

  it("OPD --ablation objective: the seed's sampled-token arm, then the top-k reverse and forward KL arms, each trained with its own divergence", async () => {
    const config = reproQuickConfig(8);
    const r = await reproOpd(tinyChatSource(8), config, { ...quiet, out: join(root, "obj"), ablation: "objective" });
    const k = config.opd.objective.teacherTopK;
    const labels = [
      "sampled-token advantage (the seed's)",
      `top-${k} reverse KL (kiln's variant)`,
      `top-${k} forward KL (kiln's variant, mass-covering)`,
    ];
    expect(r.tables[0].rows.map((row) => row[0])).toEqual(labels);
    for (const row of r.tables[0].rows) for (const c of row.slice(2, 4)) expect(c).toMatch(SE_CELL);
    const divergences = labels.map(
      (label) =>
        JSON.parse(readFileSync(join(r.dir, label.replace(/\s+/g, "-"), "config.json"), "utf8")).objective.divergence,
    );
    expect(divergences).toEqual(["sampled", "reverse_kl", "forward_kl"]);
    expect(r.errors).toEqual([]);
  }, 600_000);

  it("OPD --teacher: a separate model is the teacher, and its row is that model's own evaluation", async () => {
    const config = reproQuickConfig(7);
    config.opdEnv = "guess-number";
    const teacher = tinyChatSource(9);
    const withTeacher = await reproOpd(tinyChatSource(7), config, { ...quiet, out: join(root, "t1"), teacher });
    const rows = withTeacher.tables[0].rows;
    expect(rows[rows.length - 1][0]).toBe(`teacher (${teacher.label})`);
    // The teacher's row scores the teacher model on the same held-out games as a run whose student it is.
    const asStudent = await reproOpd(
      tinyChatSource(9),
      { ...config, opdTeacher: "sft" },
      { ...quiet, out: join(root, "t2") },
    );
    expect(rows[rows.length - 1][2]).toBe(asStudent.tables[0].rows[0][2]);
    expect(withTeacher.tables[0].notes?.[0]).toContain(teacher.label);
  });

  it("is deterministic for a seed: the same tables twice (guess-number OPD, ARP)", async () => {
    const config = reproQuickConfig(11);
    config.opdEnv = "guess-number";
    // The default teacher (guided) needs questworld's privileged note; guess-number's is ARP's phase A.
    expect(config.opdTeacher).toBe("guided");
    config.opdTeacher = "sft";
    const once = await reproOpd(tinyChatSource(11), config, { ...quiet, out: join(root, "c1") });
    const twice = await reproOpd(tinyChatSource(11), config, { ...quiet, out: join(root, "c2") });
    expect(once.tables[0].rows.map((r) => r[0])).toEqual(["base", "r1", "r2", "r3", "teacher (base + ARP phase A)"]);
    expect(once.tables[0].rows[0][1]).toBe(String(config.heldout.opdEpisodes));
    expect(twice.tables.map(markdownTable)).toEqual(once.tables.map(markdownTable));
    const a1 = await reproArp(tinyChatSource(11), config, { ...quiet, out: join(root, "c1") });
    const a2 = await reproArp(tinyChatSource(11), config, { ...quiet, out: join(root, "c2") });
    expect(a2.tables.map(markdownTable)).toEqual(a1.tables.map(markdownTable));
  }, 600_000);
});

// Core-3 scoring, the wall report, the report formats, the runner, and the metric's
// sanity: a random policy scores low.

import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import {
  type AgentScore,
  DEFAULT_LIMITS,
  QuestworldConfigError,
  evaluateCore3,
  expertFactory,
  formatCore3Json,
  formatCore3Markdown,
  meanSE,
  randomFactory,
  randomPolicy,
  runQuestworldEval,
  scoreCore3,
} from "../../src/questworld/index.js";

const agent = (seed: number, archetype: AgentScore["archetype"], q1: number, q2: number, q3: number): AgentScore => ({
  seed,
  archetype,
  stages: { timber_for_the_mill: q1, healers_remedy: q2, supper_at_the_lighthouse: q3 },
  total: q1 + q2 + q3,
  status: "out_of_budget",
  turns: 1,
  toolCalls: 1,
  ticks: 0,
  malformed: 0,
  errors: 0,
});

describe("meanSE", () => {
  it("is the mean and the sample SD over √n", () => {
    const m = meanSE([1, 2, 3, 4]);
    expect(m.mean).toBe(2.5);
    expect(m.se).toBeCloseTo(Math.sqrt(5 / 3) / 2, 12);
    expect(meanSE([7]).se).toBeNull();
  });
});

describe("scoreCore3", () => {
  it("sums archetypes per seed, averages over seeds and counts who passed each stage", () => {
    const episodes = [
      agent(1, "woodsman", 3, 1, 0),
      agent(1, "herbalist", 3, 3, 4),
      agent(1, "angler", 2, 0, 0),
      agent(2, "woodsman", 3, 2, 0),
      agent(2, "herbalist", 3, 3, 2),
      agent(2, "angler", 3, 1, 0),
    ];
    const r = scoreCore3(episodes, {
      policyId: "p",
      seeds: [1, 2],
      archetypes: ["woodsman", "herbalist", "angler"],
      limits: { ...DEFAULT_LIMITS },
    });
    expect(r.perSeed).toEqual([
      { seed: 1, total: 16, byArchetype: { woodsman: 4, herbalist: 10, angler: 2 } },
      { seed: 2, total: 17, byArchetype: { woodsman: 5, herbalist: 8, angler: 4 } },
    ]);
    expect(r.score.mean).toBe(16.5);
    expect(r.score.se).toBeCloseTo(0.5, 12);
    expect(r.maxPerSeed).toBe(30);
    expect(r.byArchetype.herbalist?.perQuest).toEqual({
      timber_for_the_mill: 3,
      healers_remedy: 3,
      supper_at_the_lighthouse: 3,
    });
    expect(r.wall.map((w) => w.passed)).toEqual([6, 6, 5, 5, 3, 2, 2, 2, 1, 1]);
    expect(r.wall.map((w) => w.stoppedHere)).toEqual([0, 0, 1, 0, 2, 1, 0, 0, 1, 0]);
    expect(r.wallStage).toMatchObject({ quest: "healers_remedy", stage: 2, index: 5 });
  });
});

describe("evaluateCore3", () => {
  it("a random policy scores low (the metric is not trivially high)", async () => {
    const seeds = [0, 1, 2, 3, 4, 5];
    const random = await evaluateCore3({ policy: randomFactory, seeds });
    expect(random.score.mean).toBeLessThan(3);
    expect(random.wall.find((w) => w.quest === "healers_remedy" && w.stage === 2)?.passed).toBe(0);
    const expert = await evaluateCore3({ policy: expertFactory, seeds: [0, 1] });
    expect(expert.score.mean - random.score.mean).toBeGreaterThan(25);
  });

  it("accepts one shared Policy, reports progress and is independent of concurrency", async () => {
    const seen: number[] = [];
    const shared = await evaluateCore3({
      policy: randomPolicy({ seed: 1 }),
      seeds: [4],
      archetypes: ["angler"],
      maxTurns: 20,
      onProgress: (p) => seen.push(p.done),
    });
    expect(seen).toEqual([1]);
    expect(shared.episodes[0]).toMatchObject({ status: "max_turns", turns: 20 });
    expect(shared.policyId).toBe("questworld-random");
    expect(shared.maxPerSeed).toBe(10);
    const one = await evaluateCore3({ policy: expertFactory, seeds: [5, 6], limits: { toolCalls: 40 } });
    const three = await evaluateCore3({
      policy: expertFactory,
      seeds: [5, 6],
      limits: { toolCalls: 40 },
      concurrency: 3,
    });
    expect(three).toEqual(one);
    expect(one.episodes.every((e) => e.toolCalls === 40 && e.status === "out_of_budget")).toBe(true);
  });

  it("rejects bad options with typed errors", async () => {
    await expect(evaluateCore3({ policy: expertFactory, seeds: [] })).rejects.toThrow(QuestworldConfigError);
    await expect(evaluateCore3({ policy: expertFactory, seeds: [1, 1] })).rejects.toThrow(/must not repeat/);
    await expect(evaluateCore3({ policy: expertFactory, seeds: [1], archetypes: ["bard" as never] })).rejects.toThrow(
      /"bard"/,
    );
    await expect(evaluateCore3({ policy: expertFactory, seeds: [1], concurrency: 0 })).rejects.toThrow(/concurrency/);
    await expect(runQuestworldEval({ policy: "oracle" as never, seeds: [1] })).rejects.toThrow(/built-in policies/);
  });
});

describe("reports and runner", () => {
  it("formats Markdown and JSON, and writes both atomically", async () => {
    const dir = await mkdtemp(join(tmpdir(), "questworld-"));
    try {
      const out = await runQuestworldEval({ policy: "expert", seeds: [0, 1], outDir: join(dir, "run") });
      expect(out.markdown).toContain("**Core-3: 30.00 ± 0.00 / 30**");
      expect(out.markdown).toContain("| woodsman | 3.00 / 3 | 3.00 / 3 | 4.00 / 4 | 10.00 ± 0.00 |");
      expect(out.markdown).toContain("| 5 | The Healer's Remedy | 2. 3 moonpetals to Ysolde (the wall) | 6/6 | 0 |");
      expect(JSON.parse(out.json)).toEqual(JSON.parse(formatCore3Json(out.result)));
      expect(out.files.map((f) => f.slice(dir.length))).toEqual(["/run/core3.json", "/run/core3.md"]);
      expect(await readFile(out.files[1], "utf8")).toBe(out.markdown);
      expect(await readdir(join(dir, "run"))).toEqual(["core3.json", "core3.md"]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("marks the wall stage and writes a single-seed SE as n/a / null", async () => {
    const r = await evaluateCore3({ policy: randomFactory, seeds: [2] });
    const md = formatCore3Markdown(r);
    expect(md).toContain("**← wall**");
    expect(md).toMatch(/^\*\*Core-3: \d+\.\d\d \/ 30\*\* \(mean ± SE over 1 seed;/m);
    expect(JSON.parse(formatCore3Json(r)).score.se).toBeNull();
  });
});

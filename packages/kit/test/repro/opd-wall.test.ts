import { describe, expect, it } from "vitest";
import { phaseFromScores } from "../../src/recipes/recipe-run.js";
import { reproConfig } from "../../src/repro/config.js";
import { type OpdArm, opdDiagnosticsTable, wallPassTable } from "../../src/repro/opd-repro.js";
import { QUESTWORLD_SEED_WALL } from "../../src/repro/questworld-setup.js";
import { questworldOpdSetup } from "../../src/agent-model/questworld-opd.js";
import { QUESTWORLD_SKILLS, questworldPlayerFactory } from "../../src/agent-model/questworld-players.js";
import { advantageStats } from "../../src/recipes/opd-samples.js";
import { drawTurns } from "../../src/recipes/opd.js";
import type { Trajectory } from "@kiln/rollout";

/** Walls of 6 evaluated episodes per phase: 1 = passed. */
function arm(walls: Record<string, number[]>): OpdArm {
  const phases = ["base", "r1", "r2", "r3"].filter((p) => walls[p]);
  const scores = (p: string) => Object.fromEntries((walls[p] ?? [0]).map((v, i) => [`e${i}`, 4 + v]));
  const base = phaseFromScores("base", scores("base"));
  return {
    phases: phases.map((p) => (p === "base" ? base : phaseFromScores(p, scores(p), { base }))),
    teacher: phaseFromScores("teacher", scores("teacher"), { base }),
    wallTables: {},
    walls: Object.fromEntries(
      Object.entries(walls).map(([p, v]) => [
        p,
        { label: "3 moonpetals", passed: Object.fromEntries(v.map((x, i) => [`e${i}`, x])) },
      ]),
    ),
    diagnostics: [],
    seconds: {},
    runDir: "",
    samples: [],
  };
}

describe("OPD wall table against the seed's row", () => {
  it("counts each phase's episodes past the wall and says where the seed's claim holds (Δ > 2 SE)", () => {
    const t = wallPassTable(
      arm({
        base: [0, 0, 0, 0, 0, 0],
        r1: [0, 0, 0, 0, 0, 1],
        r2: [1, 1, 1, 1, 1, 1],
        r3: [1, 0, 0, 0, 0, 0],
        teacher: [1, 1, 1, 1, 1, 0],
      }),
      QUESTWORLD_SEED_WALL,
    );
    expect(t?.header).toEqual([
      "phase",
      "seed (seed 000)",
      "kiln: passed / episodes",
      "kiln: share ± SE",
      "Δ share vs base ± SE",
      "seed's claim here",
    ]);
    const rows = Object.fromEntries((t?.rows ?? []).map((r) => [r[0], r]));
    expect(rows.base.slice(1, 3)).toEqual(["0/3", "0/6"]);
    expect(rows.r1.slice(1, 3)).toEqual(["0/3", "1/6"]);
    expect(rows.r1[5]).toBe("—");
    // r2: every episode past the wall, Δ = +1 with SE 0: the seed's claim holds.
    expect(rows.r2.slice(1, 6)).toEqual(["3/3", "6/6", "1.000 ± 0.000", "+1.000 ± 0.000", "holds (Δ > 2 SE)"]);
    // r3: 1 of 6, Δ = 0.167 ± 0.167: not over 2 SE.
    expect(rows.r3[2]).toBe("1/6");
    expect(rows.r3[4]).toBe("+0.167 ± 0.167");
    expect(rows.r3[5]).toBe("does not hold here");
    expect(rows.teacher.slice(1, 3)).toEqual(["—", "5/6"]);
  });

  it("without a base evaluation of the wall there is no table", () => {
    expect(wallPassTable(arm({ r1: [0] } as never))).toBeUndefined();
  });

  it("advantage statistics: sign, size and the clamp's share, on every token or the focus turns", () => {
    const samples = [
      {
        episodeId: "a",
        turn: 0,
        promptIds: [1],
        completionIds: [2, 3],
        samplerLogps: [-1, -1],
        teacherLogps: [-0.5, -5],
      },
      { episodeId: "b", turn: 1, promptIds: [1], completionIds: [2], samplerLogps: [-2], teacherLogps: [-1] },
    ];
    const all = advantageStats(samples, 3);
    expect(all.turns).toBe(2);
    expect(all.tokens).toBe(3);
    expect(all.mean).toBeCloseTo((0.5 - 4 + 1) / 3, 6);
    expect(all.positive).toBeCloseTo(2 / 3, 6);
    expect(all.meanAbs).toBeCloseTo((0.5 + 4 + 1) / 3, 6);
    expect(all.clamped).toBeCloseTo(1 / 3, 6);
    const focus = advantageStats(samples, 3, (s) => s.episodeId === "b");
    expect(focus).toEqual({ turns: 1, tokens: 1, mean: 1, positive: 1, meanAbs: 1, clamped: 0 });
    const a = arm({ base: [0], r1: [0], teacher: [1] });
    a.diagnostics = [{ advantage: { all, focus }, samplesPerState: 2, clipFraction: 0.25 }];
    const t = opdDiagnosticsTable(a, 3, "wall turns");
    expect(t?.header).toContain("wall turns: share |A| > 3");
    expect(t?.rows[0][0]).toBe("r1");
    expect(t?.rows[0].slice(-2)).toEqual(["0.250", "2.00"]);
  });
});

describe("kiln repro opd's default is the seed's OPD on questworld", () => {
  it("the sampled-token advantage, clamp ±3, PPO-clipped, turn 0 × 1.5, a fresh r 64 / α 64 LoRA per round", () => {
    const c = reproConfig();
    expect(c.opdEnv).toBe("questworld");
    expect(c.opdTeacher).toBe("guided");
    expect(c.opdQuestworld.guidance).toBe(8);
    expect(c.opd.rounds).toBe(3);
    expect(c.opd.objective).toMatchObject({
      divergence: "sampled",
      clamp: 3,
      objective: "ppo",
      earlyTurnWeight: 1.5,
      earlyTurns: 1,
    });
    expect(c.opd.lora).toMatchObject({ r: 64, alpha: 64, useRslora: false });
    expect(c.opd.scale).toBe(1);
  });

  it("every evaluated agent has the turns the expert needs: at the default size it passes the wall on every episode", async () => {
    const c = reproConfig();
    // The evaluation questworldReproSetup builds from the defaults (its evaluate takes a model policy).
    const setup = questworldOpdSetup({ seeds: c.heldout.questworldSeeds, maxTurns: c.opdQuestworld.evalTurns });
    const e = await setup.evaluate(questworldPlayerFactory(QUESTWORLD_SKILLS[0], 9));
    expect(QUESTWORLD_SKILLS[0].epsilon).toBe(0);
    const passed = Object.values(e.wall?.passed ?? {});
    expect(passed.length).toBe(c.heldout.questworldSeeds.length * 3);
    expect(passed.every((v) => v === 1)).toBe(true);
  });
});

describe("OPD turnsPerRound", () => {
  it("draws n distinct (episode, turn) keys among the turns with tokens, the same for a seed", () => {
    const turn = (index: number, tokens: boolean) => ({
      index,
      ...(tokens ? { completionTokenIds: [1, 2], logprobs: [-1, -1] } : {}),
    });
    const trajectories = [
      { episodeId: "a", turns: [turn(0, true), turn(1, true), turn(2, false)] },
      { episodeId: "b", turns: [turn(0, true), turn(1, true)] },
    ] as unknown as Trajectory[];
    const drawn = drawTurns(trajectories, 3, 7);
    expect(drawn?.size).toBe(3);
    expect(drawn).toEqual(drawTurns(trajectories, 3, 7));
    for (const k of drawn ?? []) expect(["a\u00000", "a\u00001", "b\u00000", "b\u00001"]).toContain(k);
    expect(drawTurns(trajectories, 4, 7)).toBeUndefined();
    expect(drawTurns(trajectories, undefined, 7)).toBeUndefined();
    expect(() => drawTurns(trajectories, 0, 7)).toThrow(/turnsPerRound/);
  });
});

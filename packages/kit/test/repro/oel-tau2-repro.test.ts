// `kiln repro oel` on tau2 retail: the train and test splits share no task id, no base or
// consolidated test prompt holds a memory (only the labelled bound row does), pass^k on a hand-made
// set of trial outcomes equals C(c,k)/C(n,k) averaged over tasks and tau2's summarizePassHatK.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { tau2 } from "@kiln/benchmarks";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { reproConfig, reproQuickConfig } from "../../src/repro/config.js";
import { ReproError } from "../../src/repro/errors.js";
import { tinyChatSource } from "../../src/repro/model-source.js";
import { OelEvaluationCache, oelSplits, oelTable, reproOel } from "../../src/repro/oel-repro.js";
import { Tau2TasksEnvironment } from "../../src/recipes/oel-tau2.js";
import { passHatKEval } from "../../src/recipes/oel.js";
import { tau2Agent } from "../../src/agent-model/tau2-corpus.js";
import { agentModelDir } from "../../src/agent-model/paths.js";
import { loadLocalModel } from "../../src/policies.js";
import { tmpRoot } from "../recipes/helpers.js";

const root = tmpRoot();
beforeAll(async () => {
  await initBackend("wasm", { threads: 1 });
});
afterAll(() => {
  setBackend("js");
  disposeWasmBackend();
  rmSync(root, { recursive: true, force: true });
});

describe("kiln repro oel on tau2 retail", () => {
  it("leaves room for every test task's gold solution: the oracle passes all of them within the repro's caps", async () => {
    const c = reproConfig();
    const { test } = oelSplits(c);
    expect(test).toHaveLength(40);
    let passed = 0;
    for (const task of test) {
      const r = await passHatKEval({
        makeEnv: () => new Tau2TasksEnvironment([task], (t) => tau2.scriptedUser(t)),
        policy: tau2Agent(task, "oracle", 0),
        tasks: [{ id: task.id, seed: 0, memory: "", state: { taskId: task.id } }],
        trials: 1,
        limits: { maxTurns: c.oel.rollout.maxTurns },
      });
      passed += r.summary.passHatK[0].value;
    }
    expect(passed).toBe(test.length);
    // and every gold call fits one reply of the agent model
    const { tokenizer } = await loadLocalModel(agentModelDir());
    const longest = Math.max(
      ...test.flatMap((t) =>
        t.evaluation_criteria.actions.map(
          (a) =>
            tokenizer.encode(
              `<tool_call>\n{"name": "${a.name}", "arguments": ${JSON.stringify(a.arguments ?? {})}}\n</tool_call>`,
            ).length,
        ),
      ),
    );
    expect(longest).toBeLessThanOrEqual(c.oel.rollout.maxTokens);
  }, 120_000);

  it("deploys on train-split ids and evaluates on test-split ids, never the same id", () => {
    const c = reproConfig();
    c.oel.tasks = 74;
    c.heldout.oelTasks = 40;
    const { train, test } = oelSplits(c);
    expect(train).toHaveLength(74);
    expect(test).toHaveLength(40);
    const trainIds = new Set(train.map((t) => t.id));
    for (const t of test) expect(trainIds.has(t.id)).toBe(false);
    // The split file's ids (tau2-bench split_tasks.json), not a slice of one list.
    expect(test.map((t) => t.id).slice(0, 5)).toEqual(["5", "9", "12", "17", "18"]);
    expect(train.map((t) => t.id).slice(0, 5)).toEqual(["0", "1", "2", "3", "4"]);
    c.oel.tasks = 75;
    expect(() => oelSplits(c)).toThrow(ReproError);
    c.oel.tasks = 1;
    c.heldout.oelTasks = 0;
    expect(() => oelSplits(c)).toThrow(/heldout.oelTasks must be an integer in \[1, 40\]/);
  });

  it("pass^k of hand-made outcomes: C(c,k)/C(n,k) averaged over tasks, as tau2's estimator", () => {
    // Three tasks × 3 trials: 3/3, 2/3 and 0/3 successes.
    const outcomes = [
      ["a", [1, 1, 1]],
      ["b", [1, 0, 1]],
      ["c", [0, 0, 0]],
    ].flatMap(([id, rs]) => (rs as number[]).map((r) => ({ taskId: id as string, reward: r, success: r === 1 })));
    const s = tau2.summarizePassHatK(outcomes);
    // pass^1 = (1 + 2/3 + 0)/3, pass^2 = (1 + 1/3 + 0)/3, pass^3 = (1 + 0 + 0)/3.
    expect(s.passHatK.map((p) => p.value)).toEqual([
      expect.closeTo(5 / 9, 12),
      expect.closeTo(4 / 9, 12),
      expect.closeTo(1 / 3, 12),
    ]);
    expect(tau2.passHatKForTask(2, 3, 2)).toBeCloseTo(1 / 3, 12);
    // SE of pass^2: sample SD of (1, 1/3, 0) / √3.
    const v = [1, 1 / 3, 0];
    const m = 4 / 9;
    const se = Math.sqrt(v.reduce((a, x) => a + (x - m) ** 2, 0) / 2 / 3);
    expect(s.passHatK[1].stderr).toBeCloseTo(se, 12);
    // The table prints those values and the paired Δ per task against the base row.
    const base = tau2.summarizePassHatK(outcomes.map((o) => ({ ...o, success: false, reward: 0 })));
    const row = (label: string, summary: tau2.PassHatKSummary) => ({
      label,
      summary,
      promptTurns: 0,
      memoryTurns: 0,
      seconds: 0,
      errors: [],
    });
    const t = oelTable("t", [row("base", base), row("consolidated", s)]);
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
    expect(t.rows[1][5]).toBe(`0.444 ± ${se.toFixed(3)}`);
    expect(t.rows[1][8]).toBe(`+0.444 ± ${se.toFixed(3)}`);
  });

  it("--quick: the test prompts of base and consolidated hold no memory; the bound row's do", async () => {
    const config = reproQuickConfig(3);
    const r = await reproOel(tinyChatSource(3), config, { progress: false, log: () => {}, out: join(root, "q") });
    const d = r.details as {
      trainTaskIds: string[];
      testTaskIds: string[];
      rows: { label: string; promptTurns: number; memoryTurns: number }[];
    };
    expect(d.trainTaskIds).toEqual(["0"]);
    expect(d.testTaskIds).toEqual(["5", "9"]);
    const [base, consolidated, bound] = d.rows;
    expect(base.promptTurns).toBeGreaterThan(0);
    expect(consolidated.promptTurns).toBeGreaterThan(0);
    expect(base.memoryTurns).toBe(0);
    expect(consolidated.memoryTurns).toBe(0);
    expect(bound.label).toMatch(/upper bound/);
    expect(bound.memoryTurns).toBe(bound.promptTurns);
    const t = r.tables[0];
    expect(t.title).toContain("train tasks [0]");
    expect(t.title).toContain("test tasks [5, 9]");
    for (const row of t.rows) expect(row.slice(1, 3)).toEqual(["2", "6"]);
    const consolidation = r.tables[1];
    expect(consolidation.rows.find((x) => x[0].startsWith("optimizer steps"))?.[1]).toBe("1");
    expect(consolidation.rows.find((x) => x[0].startsWith("grad-norm clip"))?.[1]).toBe("1");
  }, 900_000);
});

describe("kiln repro oel over several seeds", () => {
  it("a later seed reuses the base and bound rows, which equal that seed's own play; a sampled evaluation is played", async () => {
    const source = tinyChatSource(3);
    const io = (name: string) => ({ progress: false, log: () => {}, dir: join(root, "seeds", name) });
    const cache = new OelEvaluationCache();
    const first = await reproOel(source, reproQuickConfig(42), { ...io("42"), evaluations: cache });
    const later = await reproOel(source, reproQuickConfig(43), { ...io("43"), evaluations: cache });
    const alone = await reproOel(source, reproQuickConfig(43), io("43-alone"));
    type Rows = { rows: { label: string; summary: tau2.PassHatKSummary; reusedFromSeed?: number }[] };
    const rows = (r: { details: unknown }) => (r.details as Rows).rows;
    const [firstBase, , firstBound] = rows(first);
    const [laterBase, laterConsolidated, laterBound] = rows(later);
    const [aloneBase, , aloneBound] = rows(alone);
    // What the reuse claims: seed 43 playing its own base and bound rows gets seed 42's episodes.
    expect(aloneBase.summary).toEqual(firstBase.summary);
    expect(aloneBound.summary).toEqual(firstBound.summary);
    expect(aloneBase.reusedFromSeed).toBeUndefined();
    expect(aloneBase.summary.numSimulations).toBe(6);
    // and the later seed took them, says so, and still trained and evaluated its own consolidated model.
    expect(laterBase.summary).toEqual(aloneBase.summary);
    expect(laterBound.summary).toEqual(aloneBound.summary);
    expect([laterBase.reusedFromSeed, laterConsolidated.reusedFromSeed, laterBound.reusedFromSeed]).toEqual([
      42,
      undefined,
      42,
    ]);
    expect((later.tables[0].notes ?? []).join("\n")).toMatch(/Seed-free rows reused: base is seed 42's evaluation/);
    expect(Object.keys(later.seconds)).toContain("base (seed 42's evaluation)");
    // Sampled evaluations depend on more than the weights: never reused.
    const sampled = (seed: number) => {
      const c = reproQuickConfig(seed);
      c.oel.eval.temperature = 0.7;
      return c;
    };
    const cache2 = new OelEvaluationCache();
    await reproOel(source, sampled(42), { ...io("s42"), evaluations: cache2 });
    const sampledLater = await reproOel(source, sampled(43), { ...io("s43"), evaluations: cache2 });
    expect(rows(sampledLater).map((r) => r.reusedFromSeed)).toEqual([undefined, undefined, undefined]);
  }, 900_000);
});

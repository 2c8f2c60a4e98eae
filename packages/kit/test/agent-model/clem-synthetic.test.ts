import { clembench } from "@kiln/benchmarks";
import { describe, expect, it } from "vitest";
import { documentText } from "../../src/agent-model/build.js";
import { clemCorpus } from "../../src/agent-model/clem-players.js";
import { isHeldOutInstance, isTrainingInstance } from "../../src/agent-model/clem-split.js";
import { syntheticClemInstances } from "../../src/agent-model/clem-synthetic.js";

type Taboo = { target_word: string; related_word: string[] };
type GuessWhat = { target_word: string; candidate_list: string[] };

const flat = <T>(file: clembench.InstancesFile) =>
  file.experiments.flatMap((e) => (e.game_instances ?? []) as unknown as T[]);

describe("generated clembench instances", () => {
  it("taboo: fresh targets, never a held-out one, three related words, every experiment", () => {
    const file = syntheticClemInstances("taboo", 90, 0);
    const real = clembench.loadInstances("taboo");
    expect(file.experiments.map((e) => e.name)).toEqual(real.experiments.map((e) => e.name));
    expect(file.experiments.map((e) => e.game_instances?.length)).toEqual([30, 30, 30]);
    const heldOut = new Set(
      flat<Taboo>(real)
        .filter((_, i) => isHeldOutInstance(i))
        .map((t) => t.target_word),
    );
    const generated = flat<Taboo>(file);
    for (const t of generated) {
      expect(heldOut.has(t.target_word)).toBe(false);
      expect(t.related_word.length).toBe(3);
      expect(new Set([t.target_word, ...t.related_word]).size).toBe(4);
    }
    expect(new Set(generated.map((t) => t.target_word)).size).toBeGreaterThan(80);
    expect(syntheticClemInstances("taboo", 90, 0)).toEqual(file);
    expect(syntheticClemInstances("taboo", 90, 1)).not.toEqual(file);
  });

  it("guesswhat: eight candidates from the same experiment's training instances, the target among them", () => {
    const file = syntheticClemInstances("guesswhat", 60, 0);
    const real = clembench.loadInstances("guesswhat");
    let at = 0;
    const pools = real.experiments.map((e) => {
      const list = (e.game_instances ?? []) as unknown as GuessWhat[];
      const pool = new Set(list.filter((_, i) => isTrainingInstance(at + i)).flatMap((g) => g.candidate_list));
      at += list.length;
      return pool;
    });
    file.experiments.forEach((e, x) => {
      expect(e.name).toBe(real.experiments[x].name);
      for (const g of (e.game_instances ?? []) as unknown as GuessWhat[]) {
        expect(new Set(g.candidate_list).size).toBe(8);
        expect(g.candidate_list).toContain(g.target_word);
        for (const c of g.candidate_list) expect(pools[x].has(c)).toBe(true);
      }
    });
  });

  it("a corpus plays its generated share on them, with both skills, their targets in the prompts", async () => {
    const docs = await clemCorpus({
      seed: 0,
      episodes: { taboo: 12, guesswhat: 8 },
      generated: { taboo: 0.5, guesswhat: 0.25 },
    });
    const generated = docs.filter((d) => d.generated);
    expect(generated.filter((d) => d.game === "taboo").length).toBe(6);
    expect(generated.filter((d) => d.game === "guesswhat").length).toBe(2);
    expect(new Set(generated.filter((d) => d.game === "taboo").map((d) => d.skill))).toEqual(
      new Set(["expert", "weak"]),
    );
    const tabooFile = syntheticClemInstances("taboo", 6, 0);
    const targets = flat<Taboo>(tabooFile).map((t) => t.target_word);
    for (const d of generated.filter((d) => d.game === "taboo")) {
      const text = documentText(d);
      expect(targets.some((t) => text.includes(`guess:\n\n${t}\n`))).toBe(true);
    }
    // The rest are training instances, as before.
    expect(docs.filter((d) => !d.generated).every((d) => isTrainingInstance(d.instance))).toBe(true);
  });
});

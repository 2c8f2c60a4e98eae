// `kiln repro`'s seeds (two by default) and the tables built over them: the mean across seeds and the wall times.
import { describe, expect, it } from "vitest";
import { UsageError } from "../../src/cli/args.js";
import { REPRO_DEFAULT_SEEDS, reproSeeds } from "../../src/repro/cli.js";
import { type ReproResult, acrossSeedsTable, wallTimeTable } from "../../src/repro/output.js";

const result = (summary?: ReproResult["seedSummary"]): ReproResult => ({
  recipe: "oel",
  dir: "d",
  tables: [],
  seconds: {},
  totalSeconds: 1,
  details: {},
  seedSummary: summary,
});

describe("repro seeds", () => {
  it("two seeds by default; --seed one; --quick and an ablation the first; conflicts refused", () => {
    expect(REPRO_DEFAULT_SEEDS).toEqual([42, 43]);
    expect(reproSeeds({})).toEqual([42, 43]);
    expect(reproSeeds({ seed: 7 })).toEqual([7]);
    expect(reproSeeds({ seeds: "1,2,3" })).toEqual([1, 2, 3]);
    expect(reproSeeds({ quick: true })).toEqual([42]);
    expect(reproSeeds({ ablation: "clamp" })).toEqual([42]);
    expect(reproSeeds({ quick: true, seeds: "5,6" })).toEqual([5, 6]);
    expect(() => reproSeeds({ seed: 1, seeds: "1,2" })).toThrow(UsageError);
    expect(() => reproSeeds({ seeds: "1,2", ablation: "clamp" })).toThrow(/--ablation clamp runs one seed/);
    expect(() => reproSeeds({ seeds: "1,x" })).toThrow(/"x" is not an integer/);
  });

  it("the across-seeds table: each seed's value and the mean ± SE over seeds (SE = SD / √seeds)", () => {
    const t = acrossSeedsTable("oel", [
      { seed: 42, result: result({ base: { "pass^1": 0.2 }, consolidated: { "pass^1": 0.3 } }) },
      { seed: 43, result: result({ base: { "pass^1": 0.4 }, consolidated: { "pass^1": 0.3 } }) },
    ]);
    expect(t?.header).toEqual(["row", "pass^1, seed 42", "pass^1, seed 43", "pass^1, mean ± SE over seeds"]);
    // mean 0.3, SD √0.02 = 0.1414, SE 0.1: half the seeds' difference.
    expect(t?.rows).toEqual([
      ["base", "0.200", "0.400", "0.300 ± 0.100"],
      ["consolidated", "0.300", "0.300", "0.300 ± 0.000"],
    ]);
    expect(acrossSeedsTable("opd", [{ seed: 1, result: result() }])).toBeNull();
    // A seed missing a value: its cell is a dash and no mean is claimed.
    const gap = acrossSeedsTable("oel", [
      { seed: 1, result: result({ base: { r: 1 } }) },
      { seed: 2, result: result({}) },
    ]);
    expect(gap?.rows).toEqual([["base", "1.000", "—", "—"]]);
  });

  it("the wall-time table sums the tables it lists", () => {
    const t = wallTimeTable("kiln repro all", [
      { label: "arp, seed 42", seconds: 60 },
      { label: "oel, seed 42", seconds: 90 },
    ]);
    expect(t.rows).toEqual([
      ["arp, seed 42", "60.0", "1.0"],
      ["oel, seed 42", "90.0", "1.5"],
      ["total", "150.0", "2.5"],
    ]);
  });
});

import { describe, expect, it } from "vitest";
import {
  GuessNumberEnv,
  ScriptedPolicy,
  type Trajectory,
  diagnoseTurn,
  guessNumberScript,
  isSuccessful,
  meanSe,
  pairedDelta,
  runEpisodes,
  topLevelJsonKeys,
  turnLocalPairs,
} from "../src/index.js";

async function expert(seed: number): Promise<Trajectory> {
  const r = await runEpisodes({
    makeEnv: () => new GuessNumberEnv(),
    policy: new ScriptedPolicy({ id: "bisect", script: guessNumberScript() }),
    episodes: [{ id: `e${seed}`, seed }],
    limits: { maxTurns: 8 },
    concurrency: 1,
  });
  return r.trajectories[0];
}

describe("failure diagnosers", () => {
  it("reads duplicate keys that JSON.parse would hide", () => {
    expect(topLevelJsonKeys('{"n": 5, "n": 6}')).toEqual(["n", "n"]);
    expect(topLevelJsonKeys('{"a": {"n": 1, "n": 2}, "b": "x,\\"c\\": 1"}')).toEqual(["a", "b"]);
  });

  it("flags duplicate answer fields, the game's wrong-length and invalid-move rules, and filters by mode", async () => {
    const t = await expert(3);
    const dup = structuredClone(t);
    dup.turns[0].message.tool_calls![0].function.arguments = '{"n": 50, "n": 51}';
    expect(diagnoseTurn(dup, 0)).toEqual(["duplicate_field"]);
    const text = structuredClone(t);
    text.turns[0].message = { role: "assistant", content: "GUESS: crane\nGUESS: slate" };
    expect(diagnoseTurn(text, 0)).toEqual(["duplicate_field"]);
    const game = {
      wrongLength: (m: { content?: string | null }) => !/^GUESS: \w{5}$/.test(m.content ?? ""),
      invalidMove: (m: { content?: string | null }) => (m.content ?? "").includes("zzzzz"),
    };
    const five = structuredClone(t);
    five.turns[0].message = { role: "assistant", content: "GUESS: zzzzz" };
    expect(diagnoseTurn(five, 0, game)).toEqual(["invalid"]);
    five.turns[0].message = { role: "assistant", content: "GUESS: cat" };
    expect(diagnoseTurn(five, 0, game)).toEqual(["length"]);
    // B1 pairs only repeat/length failures; the duplicate-field turn is not its business.
    expect(turnLocalPairs([dup], [t], { modes: ["repeat", "length"] }).diagnosed).toEqual([]);
    const b2 = turnLocalPairs([dup], [t], { modes: ["invalid", "duplicate_field"] });
    expect(b2.pairs.length).toBe(1);
    expect(b2.pairs[0].chosen).toEqual(t.turns[0].message);
  });

  it("one success rule: errored episodes never count, `success` wins over the score", async () => {
    const t = await expert(4);
    expect(isSuccessful(t)).toBe(true);
    expect(isSuccessful({ outcome: { ...t.outcome, status: "error" } })).toBe(false);
    expect(isSuccessful({ outcome: { ...t.outcome, scores: { success: 0 }, score: 1 } })).toBe(false);
    expect(isSuccessful({ outcome: { ...t.outcome, scores: {}, score: 0.5 } })).toBe(true);
  });
});

describe("statistics", () => {
  it("mean ± SE and the paired Δ against float64 hand computations", () => {
    const xs = [0.2, 0.9, 0.4, 0.7];
    const m = (0.2 + 0.9 + 0.4 + 0.7) / 4;
    const sd = Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / 3);
    expect(meanSe(xs)).toEqual({ n: 4, mean: m, se: sd / 2 });
    expect(meanSe([3]).se).toBe(0);
    expect(Number.isNaN(meanSe([]).mean)).toBe(true);
    const before = { a: 0.1, b: 0.5, c: 0.9 };
    const after = { a: 0.3, b: 0.6, c: 1.0, extra: 5 };
    const d = pairedDelta(after, before);
    const diffs = [0.3 - 0.1, 0.6 - 0.5, 1.0 - 0.9];
    const dm = diffs.reduce((a, b) => a + b, 0) / 3;
    const dse = Math.sqrt(diffs.reduce((a, x) => a + (x - dm) ** 2, 0) / 2 / 3);
    expect(d.n).toBe(3);
    expect(d.mean).toBeCloseTo(dm, 12);
    expect(d.se).toBeCloseTo(dse, 12);
    // Paired SE is far below the unpaired one when instances differ in difficulty.
    expect(d.se).toBeLessThan(meanSe(Object.values(before)).se / 4);
  });
});

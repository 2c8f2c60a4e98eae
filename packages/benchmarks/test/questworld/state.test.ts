// The state format, its validation, the XP table and seeded starts.

import { describe, expect, it } from "vitest";
import {
  ARCHETYPES,
  QuestworldStateError,
  cloneState,
  initialState,
  levelForXp,
  seededStart,
  validateState,
  wallState,
  xpForLevel,
} from "../../src/questworld/index.js";

describe("XP table", () => {
  it("level n needs 25·n·(n−1) XP", () => {
    expect([1, 2, 3, 4, 5, 6].map(xpForLevel)).toEqual([0, 50, 150, 300, 500, 750]);
    expect([0, 49, 50, 149, 150, 299, 300, 499, 500, 749, 750].map(levelForXp)).toEqual([
      1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
    ]);
    for (let xp = 0; xp < 5000; xp += 7) {
      const l = levelForXp(xp);
      expect(xpForLevel(l) <= xp && xp < xpForLevel(l + 1)).toBe(true);
    }
  });
});

describe("archetype starts", () => {
  it("match questworld.md", () => {
    const levels = (a: (typeof ARCHETYPES)[number]) => {
      const s = initialState(a, 0);
      return Object.fromEntries(Object.entries(s.xp).map(([k, v]) => [k, levelForXp(v)]));
    };
    expect(levels("woodsman")).toEqual({ woodcutting: 3, foraging: 1, fishing: 1, cooking: 1 });
    expect(levels("herbalist")).toEqual({ woodcutting: 1, foraging: 4, fishing: 1, cooking: 2 });
    expect(levels("angler")).toEqual({ woodcutting: 1, foraging: 1, fishing: 3, cooking: 3 });
    expect(initialState("woodsman", 0).inventory).toEqual(["axe"]);
    expect(initialState("herbalist", 0).inventory).toEqual(["sickle"]);
    expect(initialState("angler", 0).inventory).toEqual(["rod"]);
    for (const a of ARCHETYPES) expect(initialState(a, 0).coins).toBe(10);
  });
});

describe("validateState", () => {
  const base = () => initialState("woodsman", 1);
  const broken = (edit: (s: Record<string, unknown>) => void) => {
    const s = cloneState(base()) as unknown as Record<string, unknown>;
    edit(s);
    return s;
  };

  it("accepts a JSON round trip of any valid state", () => {
    const s = wallState("angler", 3);
    const back = JSON.parse(JSON.stringify(s));
    expect(() => validateState(back)).not.toThrow();
    expect(back).toEqual(s);
  });

  it("names the field and the rule", () => {
    const cases: [(s: Record<string, unknown>) => void, RegExp][] = [
      [(s) => (s.version = 2), /state\.version: must be 1/],
      [(s) => (s.place = "castle"), /state\.place: must be one of/],
      [(s) => (s.coins = -1), /state\.coins: must be a non-negative integer/],
      [(s) => (s.inventory = Array(21).fill("mint")), /state\.inventory: holds at most 20/],
      [(s) => (s.inventory = ["sword"]), /state\.inventory\[0\]: unknown item "sword"/],
      [(s) => ((s.xp as Record<string, number>).foraging = 1.5), /state\.xp\.foraging/],
      [(s) => ((s.quests as Record<string, { stage: number }>).timber_for_the_mill.stage = 4), /0\.\.3/],
      [
        (s) => ((s.quests as Record<string, { stage: number }>).healers_remedy.stage = 1),
        /must be 0 while timber_for_the_mill is unfinished/,
      ],
      [(s) => ((s.rng as { s: number[] }).s = [0, 0, 0, 0]), /state\.rng\.s: must not be all zero/],
      [(s) => ((s.limits as Record<string, number>).toolCalls = 0), /state\.limits\.toolCalls/],
      [(s) => (s.status = "won"), /state\.status/],
      [(s) => (s.place = "lighthouse"), /behind the locked gate/],
    ];
    for (const [edit, re] of cases) {
      expect(() => validateState(broken(edit))).toThrow(QuestworldStateError);
      expect(() => validateState(broken(edit))).toThrow(re);
    }
  });
});

describe("seeded starts", () => {
  it("the wall: quest 1 done, quest 2 accepted, foraging 1, at the apothecary", () => {
    for (const a of ARCHETYPES) {
      const s = wallState(a, 9);
      expect(s.quests.timber_for_the_mill.stage).toBe(3);
      expect(s.quests.healers_remedy).toEqual({ stage: 1, offered: true });
      expect(levelForXp(s.xp.foraging)).toBe(1);
      expect(levelForXp(s.xp.woodcutting)).toBeGreaterThanOrEqual(4);
      expect(s.inventory).toContain("axe");
      expect(s.place).toBe("apothecary");
      expect(s.rng.seed).toBe(9);
    }
    expect(levelForXp(wallState("herbalist", 0, 4).xp.foraging)).toBe(4);
  });

  it("rejects impossible overrides", () => {
    expect(() => seededStart("angler", 1, { stages: { supper_at_the_lighthouse: 1 } })).toThrow(QuestworldStateError);
  });
});

// Every tool's success and error paths (questworld.md, Tools).

import { describe, expect, it } from "vitest";
import {
  INVENTORY_SLOTS,
  type QuestworldState,
  TOOL_NAMES,
  TOOL_SCHEMAS,
  initialState,
  seedPrng,
  seededStart,
  xpForLevel,
} from "../../src/questworld/index.js";
import { nextFloat } from "../../src/questworld/prng.js";
import { apply } from "./helpers.js";

const woodsman = () => initialState("woodsman", 1);
const errorCode = (payload: Record<string, unknown>) => (payload.error as { code: string } | undefined)?.code;

/** A seed whose first draw falls below (`succeed`) or at/above `p`. */
function seedWhereFirstDraw(p: number, succeed: boolean): number {
  for (let seed = 0; seed < 1000; seed++) {
    const u = nextFloat(seedPrng(seed));
    if (u < p === succeed) return seed;
  }
  throw new Error("no seed found");
}

describe("tool declarations", () => {
  it("declares the 13 tools in OpenAI function format with strict object parameters", () => {
    expect(TOOL_SCHEMAS.map((t) => t.function.name)).toEqual([...TOOL_NAMES]);
    expect(TOOL_NAMES).toHaveLength(13);
    for (const t of TOOL_SCHEMAS) {
      expect(t.type).toBe("function");
      expect(t.function.parameters.type).toBe("object");
      expect(t.function.parameters.additionalProperties).toBe(false);
      expect(t.function.description).toBeTruthy();
    }
  });
});

describe("look-ups", () => {
  it("observe lists exits with ticks, people and resources, costing no ticks", () => {
    const { out } = apply(woodsman(), "observe");
    expect(out.ok).toBe(true);
    expect(out.ticks).toBe(0);
    expect(out.payload.exits).toEqual([
      { place: "forest", ticks: 3, locked: false },
      { place: "meadow", ticks: 4, locked: false },
      { place: "pier", ticks: 5, locked: false },
      { place: "mill", ticks: 2, locked: false },
      { place: "apothecary", ticks: 2, locked: false },
    ]);
    expect(out.payload.npcs).toEqual(["oda", "mara"]);
    expect(out.text).toContain("Warden Oda");
    const forest = apply(seededStart("woodsman", 1, { place: "forest" }), "observe").out;
    expect(forest.payload.resources).toEqual(["oak", "birch"]);
  });

  it("observe marks the gate link locked until quest 3 stage 2", () => {
    const s = seededStart("woodsman", 1, { place: "lighthouse_gate" });
    const { out } = apply(s, "observe");
    expect(out.payload.exits).toContainEqual({ place: "lighthouse", ticks: 1, locked: true });
    expect(out.text).toContain("locked");
  });

  it("inventory reports coins, item counts and free slots", () => {
    const s = seededStart("woodsman", 1, { inventory: ["axe", "oak_log", "oak_log"], coins: 7 });
    const { out } = apply(s, "inventory");
    expect(out.payload).toMatchObject({ coins: 7, items: { axe: 1, oak_log: 2 }, slotsUsed: 3, freeSlots: 17 });
    expect(out.text).toContain("2 oak logs");
  });

  it("skills reports levels from the XP table", () => {
    const { out } = apply(initialState("herbalist", 1), "skills");
    expect(out.payload.skills).toMatchObject({
      foraging: { level: 4, xp: 300, nextLevelXp: 500 },
      cooking: { level: 2, xp: 50, nextLevelXp: 150 },
    });
  });

  it("quest_log gives stages and the next step", () => {
    const { out } = apply(woodsman(), "quest_log");
    expect(out.payload.stagesReached).toBe(0);
    expect(out.text).toContain("talk to Warden Oda");
    expect(out.text).toContain("locked until Timber for the Mill is finished");
  });
});

describe("move_to", () => {
  it("moves along a link and costs its ticks", () => {
    const { out, state } = apply(woodsman(), "move_to", { place: "pier" });
    expect(out.ok).toBe(true);
    expect(out.ticks).toBe(5);
    expect(state.place).toBe("pier");
  });

  it("refuses the current place, unlinked places and the locked gate", () => {
    expect(errorCode(apply(woodsman(), "move_to", { place: "village" }).out.payload)).toBe("already_there");
    const far = apply(woodsman(), "move_to", { place: "grove" }).out;
    expect(far.ok).toBe(false);
    expect(errorCode(far.payload)).toBe("not_adjacent");
    expect(far.text).toMatch(/^Error: .*exits: forest \(3 ticks\)/);
    expect(far.ticks).toBe(0);
    const gate = seededStart("woodsman", 1, { place: "lighthouse_gate" });
    const locked = apply(gate, "move_to", { place: "lighthouse" });
    expect(errorCode(locked.out.payload)).toBe("gate_locked");
    expect(locked.state.place).toBe("lighthouse_gate");
  });
});

describe("gather", () => {
  const atForest = (seed: number, levels = {}) => seededStart("woodsman", seed, { place: "forest", levels });

  it("succeeds when the seeded draw is under min(0.95, 0.4 + 0.1·(level − required)), giving item and XP", () => {
    // Woodsman: woodcutting 3 on oak (required 1) → 0.6.
    const seed = seedWhereFirstDraw(0.6, true);
    const { out, state } = apply(atForest(seed), "gather", { resource: "oak" });
    expect(out.ok).toBe(true);
    expect(out.ticks).toBe(2);
    expect(out.payload).toMatchObject({ success: true, item: "oak_log", xp: 10 });
    expect(out.payload.chance).toBeCloseTo(0.6, 12);
    expect(state.inventory).toEqual(["axe", "oak_log"]);
    expect(state.xp.woodcutting).toBe(xpForLevel(3) + 10);
  });

  it("fails (still 2 ticks, no XP) when the draw is over the chance", () => {
    const seed = seedWhereFirstDraw(0.6, false);
    const { out, state } = apply(atForest(seed), "gather", { resource: "oak" });
    expect(out.ok).toBe(true);
    expect(out.payload.success).toBe(false);
    expect(out.ticks).toBe(2);
    expect(state.inventory).toEqual(["axe"]);
    expect(state.xp.woodcutting).toBe(xpForLevel(3));
  });

  it("reports level-ups", () => {
    const s = seededStart("woodsman", seedWhereFirstDraw(0.6, true), { place: "forest", xp: { woodcutting: 295 } });
    const { out } = apply(s, "gather", { resource: "oak" });
    expect(out.payload.levelUps).toEqual({ woodcutting: 4 });
    expect(out.text).toContain("level 4");
  });

  it("refuses the wrong place, a missing tool, a low level and a full inventory", () => {
    expect(errorCode(apply(woodsman(), "gather", { resource: "oak" }).out.payload)).toBe("wrong_place");
    const noAxe = seededStart("herbalist", 1, { place: "forest" });
    expect(errorCode(apply(noAxe, "gather", { resource: "oak" }).out.payload)).toBe("missing_tool");
    const low = apply(atForest(1), "gather", { resource: "birch" }).out;
    expect(errorCode(low.payload)).toBe("level_too_low");
    expect(low.text).toContain("woodcutting 4");
    const full = seededStart("woodsman", 1, {
      place: "forest",
      inventory: ["axe", ...Array<"oak_log">(INVENTORY_SLOTS - 1).fill("oak_log")],
    });
    const r = apply(full, "gather", { resource: "oak" });
    expect(errorCode(r.out.payload)).toBe("no_room");
    // A refused gather draws nothing from the PRNG.
    expect(r.state.rng).toEqual(full.rng);
  });

  it("moonpetal needs foraging 5 and a sickle; mint needs no tool", () => {
    const grove = seededStart("woodsman", 1, { place: "grove", levels: { foraging: 5 } });
    expect(errorCode(apply(grove, "gather", { resource: "moonpetal" }).out.payload)).toBe("missing_tool");
    const meadow = seededStart("angler", seedWhereFirstDraw(0.4, true), { place: "meadow" });
    expect(apply(meadow, "gather", { resource: "mint" }).out.payload.success).toBe(true);
    expect(errorCode(apply(meadow, "gather", { resource: "sunroot" }).out.payload)).toBe("level_too_low");
  });
});

describe("craft", () => {
  const kitchen = (seed: number, raw: number) =>
    seededStart("angler", seed, { place: "kitchen", inventory: ["rod", ...Array<"raw_sprat">(raw).fill("raw_sprat")] });

  it("cooks raw sprats in place: 80% cooked (12 XP each), burnt otherwise", () => {
    const s = kitchen(3, 10);
    const { out, state } = apply(s, "craft", { kind: "cook", item: "raw_sprat", count: 10 });
    expect(out.ok).toBe(true);
    const cooked = out.payload.cooked as number;
    const burnt = out.payload.burnt as number;
    expect(cooked + burnt).toBe(10);
    expect(state.inventory.filter((i) => i === "cooked_sprat")).toHaveLength(cooked);
    expect(state.inventory.filter((i) => i === "burnt_sprat")).toHaveLength(burnt);
    expect(state.inventory).toHaveLength(11);
    expect(state.xp.cooking).toBe(s.xp.cooking + 12 * cooked);
    expect(out.ticks).toBe(10);
    // The draws decide: replay them.
    const rng = structuredClone(s.rng);
    let expectCooked = 0;
    for (let i = 0; i < 10; i++) if (nextFloat(rng) < 0.8) expectCooked++;
    expect(cooked).toBe(expectCooked);
  });

  it("count defaults to 1", () => {
    const { out } = apply(kitchen(1, 3), "craft", { kind: "cook", item: "raw_sprat" });
    expect(out.payload.count).toBe(1);
  });

  it("refuses away from the fire, items without a recipe, and too few items", () => {
    const away = seededStart("angler", 1, { place: "pier", inventory: ["raw_sprat"] });
    expect(errorCode(apply(away, "craft", { kind: "cook", item: "raw_sprat" }).out.payload)).toBe("wrong_place");
    expect(errorCode(apply(kitchen(1, 2), "craft", { kind: "cook", item: "eel" }).out.payload)).toBe("no_recipe");
    const few = apply(kitchen(1, 2), "craft", { kind: "cook", item: "raw_sprat", count: 3 });
    expect(errorCode(few.out.payload)).toBe("missing_item");
    expect(few.state.inventory).toEqual(kitchen(1, 2).inventory);
  });
});

describe("buy and sell", () => {
  it("buys from the store at its price", () => {
    const { out, state } = apply(seededStart("herbalist", 1, { coins: 40 }), "buy", {
      npc: "mara",
      item: "axe",
      count: 1,
    });
    expect(out.ok).toBe(true);
    expect(state.coins).toBe(25);
    expect(state.inventory).toEqual(["sickle", "axe"]);
    const piet = apply(seededStart("woodsman", 1, { place: "pier", coins: 25 }), "buy", {
      npc: "piet",
      item: "rod",
      count: 1,
    });
    expect(piet.state.coins).toBe(5);
  });

  it("refuses absent shopkeepers, unsold items, too few coins and too few slots", () => {
    expect(errorCode(apply(woodsman(), "buy", { npc: "piet", item: "rod", count: 1 }).out.payload)).toBe("not_here");
    expect(errorCode(apply(woodsman(), "buy", { npc: "mara", item: "moonpetal", count: 1 }).out.payload)).toBe(
      "not_for_sale",
    );
    const poor = apply(woodsman(), "buy", { npc: "mara", item: "rod", count: 1 });
    expect(errorCode(poor.out.payload)).toBe("no_coins");
    expect(poor.state.coins).toBe(10);
    const full = seededStart("woodsman", 1, {
      coins: 100,
      inventory: Array<"oak_log">(INVENTORY_SLOTS - 1).fill("oak_log"),
    });
    expect(errorCode(apply(full, "buy", { npc: "mara", item: "bait", count: 2 }).out.payload)).toBe("no_room");
  });

  it("sells logs 2, herbs 3, fish 4 to the store", () => {
    const s = seededStart("woodsman", 1, { coins: 0, inventory: ["oak_log", "oak_log", "mint", "eel"] });
    let r = apply(s, "sell", { npc: "mara", item: "oak_log", count: 2 });
    expect(r.state.coins).toBe(4);
    r = apply(r.state, "sell", { npc: "mara", item: "mint", count: 1 });
    expect(r.state.coins).toBe(7);
    r = apply(r.state, "sell", { npc: "mara", item: "eel", count: 1 });
    expect(r.state.coins).toBe(11);
    expect(r.state.inventory).toEqual([]);
  });

  it("refuses selling what is not bought or not held", () => {
    expect(errorCode(apply(woodsman(), "sell", { npc: "mara", item: "axe", count: 1 }).out.payload)).toBe("not_bought");
    expect(errorCode(apply(woodsman(), "sell", { npc: "mara", item: "mint", count: 1 }).out.payload)).toBe(
      "missing_item",
    );
    const pier = seededStart("angler", 1, { place: "pier", inventory: ["raw_sprat"] });
    expect(errorCode(apply(pier, "sell", { npc: "piet", item: "raw_sprat", count: 1 }).out.payload)).toBe("not_bought");
    expect(errorCode(apply(pier, "sell", { npc: "mara", item: "raw_sprat", count: 1 }).out.payload)).toBe("not_here");
  });
});

describe("eat and drop", () => {
  const s = (): QuestworldState => seededStart("woodsman", 1, { inventory: ["axe", "cooked_sprat", "mint", "mint"] });

  it("eats an edible item", () => {
    const { out, state } = apply(s(), "eat", { item: "cooked_sprat" });
    expect(out.ok).toBe(true);
    expect(state.inventory).toEqual(["axe", "mint", "mint"]);
  });

  it("refuses inedible or missing items", () => {
    expect(errorCode(apply(s(), "eat", { item: "axe" }).out.payload)).toBe("not_edible");
    expect(errorCode(apply(s(), "eat", { item: "lighthouse_pie" }).out.payload)).toBe("missing_item");
  });

  it("drops a count (default 1)", () => {
    expect(apply(s(), "drop", { item: "mint" }).state.inventory).toEqual(["axe", "cooked_sprat", "mint"]);
    const { out, state } = apply(s(), "drop", { item: "mint", count: 2 });
    expect(state.inventory).toEqual(["axe", "cooked_sprat"]);
    expect(out.payload.freeSlots).toBe(18);
  });

  it("refuses dropping more than held", () => {
    const r = apply(s(), "drop", { item: "mint", count: 3 });
    expect(errorCode(r.out.payload)).toBe("missing_item");
    expect(r.state.inventory).toEqual(s().inventory);
  });
});

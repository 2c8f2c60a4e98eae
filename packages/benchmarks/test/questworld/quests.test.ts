// Quest gates, talk/accept, the all-or-nothing hand-ins and the lighthouse gate (questworld.md, Quests).

import { describe, expect, it } from "vitest";
import {
  INVENTORY_SLOTS,
  type ItemId,
  type QuestworldState,
  initialState,
  seededStart,
} from "../../src/questworld/index.js";
import { apply } from "./helpers.js";

const code = (p: Record<string, unknown>) => (p.error as { code: string } | undefined)?.code;
const fill = (item: ItemId, n: number): ItemId[] => Array<ItemId>(n).fill(item);
const Q1 = "timber_for_the_mill";
const Q2 = "healers_remedy";
const Q3 = "supper_at_the_lighthouse";

describe("talk_to and accept_quest", () => {
  it("stage 1 needs talking to the giver first, then accepting at the giver's place", () => {
    const s = initialState("angler", 1);
    const early = apply(s, "accept_quest", { quest: Q1 });
    expect(code(early.out.payload)).toBe("not_offered");
    const talked = apply(s, "talk_to", { npc: "oda" });
    expect(talked.out.ok).toBe(true);
    expect(talked.out.payload.offered).toBe(Q1);
    expect(talked.state.quests[Q1]).toEqual({ stage: 0, offered: true });
    const acc = apply(talked.state, "accept_quest", { quest: Q1 });
    expect(acc.out.ok).toBe(true);
    expect(acc.out.stagesAdvanced).toBe(1);
    expect(acc.state.quests[Q1].stage).toBe(1);
    expect(code(apply(acc.state, "accept_quest", { quest: Q1 }).out.payload)).toBe("already_accepted");
    const away = { ...talked.state, place: "mill" as const };
    expect(code(apply(away, "accept_quest", { quest: Q1 }).out.payload)).toBe("not_here");
  });

  it("talk_to refuses someone who is elsewhere, saying where they are", () => {
    const r = apply(initialState("angler", 1), "talk_to", { npc: "lund" });
    expect(code(r.out.payload)).toBe("not_here");
    expect(r.out.text).toContain("the lighthouse");
  });

  it("quest 2 needs quest 1 finished, quest 3 needs quest 2 finished", () => {
    const s = seededStart("woodsman", 1, { place: "apothecary", stages: { [Q1]: 2 } });
    const t = apply(s, "talk_to", { npc: "ysolde" });
    expect(t.state.quests[Q2].offered).toBe(false);
    expect(code(apply(s, "accept_quest", { quest: Q2 }).out.payload)).toBe("quest_locked");
    const k = seededStart("woodsman", 1, { place: "kitchen", stages: { [Q1]: 3, [Q2]: 2 } });
    expect(code(apply(k, "accept_quest", { quest: Q3 }).out.payload)).toBe("quest_locked");
    const ok = seededStart("woodsman", 1, { place: "kitchen", stages: { [Q1]: 3, [Q2]: 3 } });
    const offered = apply(ok, "talk_to", { npc: "hanne" }).state;
    expect(apply(offered, "accept_quest", { quest: Q3 }).state.quests[Q3].stage).toBe(1);
  });

  it("shopkeepers list their wares when talked to", () => {
    const r = apply(initialState("angler", 1), "talk_to", { npc: "mara" });
    expect(r.out.payload.sells).toEqual({ axe: 15, sickle: 10, rod: 20, bait: 1 });
    expect(r.out.payload.buys).toEqual({ log: 2, herb: 3, fish: 4 });
  });
});

describe("hand-ins", () => {
  it("timber: 6 oak logs → stage 2, 4 birch logs → stage 3 with 30 coins and woodcutting XP", () => {
    const s = seededStart("woodsman", 1, {
      place: "mill",
      coins: 5,
      inventory: ["axe", ...fill("oak_log", 7), ...fill("birch_log", 4)],
      stages: { [Q1]: 1 },
    });
    const a = apply(s, "talk_to", { npc: "bram" });
    expect(a.out.stagesAdvanced).toBe(1);
    expect(a.state.quests[Q1].stage).toBe(2);
    // Only the 6 needed are taken; one stage per talk.
    expect(a.state.inventory.filter((i) => i === "oak_log")).toHaveLength(1);
    expect(a.state.inventory.filter((i) => i === "birch_log")).toHaveLength(4);
    const b = apply(a.state, "talk_to", { npc: "bram" });
    expect(b.state.quests[Q1].stage).toBe(3);
    expect(b.state.coins).toBe(35);
    expect(b.state.xp.woodcutting).toBe(s.xp.woodcutting + 100);
    expect(b.state.inventory).toEqual(["axe", "oak_log"]);
  });

  it("is all-or-nothing: with too few items nothing is taken and the stage stays", () => {
    const s = seededStart("woodsman", 1, {
      place: "apothecary",
      inventory: ["moonpetal", "moonpetal", "mint"],
      stages: { [Q1]: 3, [Q2]: 1 },
    });
    const r = apply(s, "talk_to", { npc: "ysolde" });
    expect(r.out.stagesAdvanced).toBe(0);
    expect(r.out.payload.handIn).toMatchObject({ done: false, reason: "missing", item: "moonpetal", need: 3, have: 2 });
    expect(r.out.text).toContain("Nothing was handed in");
    expect(r.state.inventory).toEqual(s.inventory);
    expect(r.state.quests[Q2].stage).toBe(1);
    // Stage 3 needs both herbs: mint alone is not enough either.
    const st2 = seededStart("woodsman", 1, {
      place: "apothecary",
      inventory: ["mint", "mint", "sunroot"],
      stages: { [Q1]: 3, [Q2]: 2 },
    });
    const r2 = apply(st2, "talk_to", { npc: "ysolde" });
    expect(r2.state.inventory).toEqual(st2.inventory);
    expect(r2.state.quests[Q2].stage).toBe(2);
  });

  it("checks free slots for the reward before taking items", () => {
    // Full inventory holding the herbs: handing in would free 4 slots, but the token's slot is checked first.
    const inv: ItemId[] = ["mint", "mint", "sunroot", "sunroot", ...fill("oak_log", INVENTORY_SLOTS - 4)];
    const s = seededStart("herbalist", 1, {
      place: "apothecary",
      coins: 0,
      inventory: inv,
      stages: { [Q1]: 3, [Q2]: 2 },
    });
    const full = apply(s, "talk_to", { npc: "ysolde" });
    expect(full.out.payload.handIn).toMatchObject({ done: false, reason: "no_room", need: 1, free: 0 });
    expect(full.state.inventory).toEqual(inv);
    expect(full.state.coins).toBe(0);
    const roomy = apply(apply(s, "drop", { item: "oak_log" }).state, "talk_to", { npc: "ysolde" });
    expect(roomy.state.quests[Q2].stage).toBe(3);
    expect(roomy.state.inventory).toContain("healers_token");
    expect(roomy.state.coins).toBe(25);
    expect(roomy.state.xp.foraging).toBe(s.xp.foraging + 150);
  });

  it("supper: 5 cooked sprats → pie and open gate; passing the gate → stage 3; pie to Lund → stage 4", () => {
    const s = seededStart("angler", 1, {
      place: "kitchen",
      inventory: ["rod", ...fill("cooked_sprat", 5)],
      stages: { [Q1]: 3, [Q2]: 3, [Q3]: 1 },
    });
    const baked = apply(s, "talk_to", { npc: "hanne" });
    expect(baked.state.quests[Q3].stage).toBe(2);
    expect(baked.state.inventory).toEqual(["rod", "lighthouse_pie"]);
    const atGate: QuestworldState = { ...baked.state, place: "lighthouse_gate" };
    const through = apply(atGate, "move_to", { place: "lighthouse" });
    expect(through.out.stagesAdvanced).toBe(1);
    expect(through.state.quests[Q3].stage).toBe(3);
    // Going back and forth again does not advance anything.
    const back = apply(through.state, "move_to", { place: "lighthouse_gate" });
    const again = apply(back.state, "move_to", { place: "lighthouse" });
    expect(again.out.stagesAdvanced).toBe(0);
    const done = apply(again.state, "talk_to", { npc: "lund" });
    expect(done.state.quests[Q3].stage).toBe(4);
    expect(done.state.inventory).toEqual(["rod"]);
  });

  it("the pie needs a free slot before the sprats are taken", () => {
    const inv: ItemId[] = [...fill("cooked_sprat", 5), ...fill("mint", INVENTORY_SLOTS - 5)];
    const s = seededStart("angler", 1, { place: "kitchen", inventory: inv, stages: { [Q1]: 3, [Q2]: 3, [Q3]: 1 } });
    const r = apply(s, "talk_to", { npc: "hanne" });
    expect(r.state.quests[Q3].stage).toBe(1);
    expect(r.state.inventory).toEqual(inv);
  });

  it("eating the pie blocks stage 4 until Hanne bakes another for 5 more cooked sprats", () => {
    const s = seededStart("angler", 1, {
      place: "lighthouse",
      inventory: ["rod", "lighthouse_pie"],
      stages: { [Q1]: 3, [Q2]: 3, [Q3]: 3 },
    });
    const ate = apply(s, "eat", { item: "lighthouse_pie" });
    expect(ate.out.ok).toBe(true);
    const noPie = apply(ate.state, "talk_to", { npc: "lund" });
    expect(noPie.state.quests[Q3].stage).toBe(3);
    expect(noPie.out.payload.handIn).toMatchObject({ done: false, item: "lighthouse_pie" });
    const kitchen = {
      ...ate.state,
      place: "kitchen" as const,
      inventory: ["rod", ...fill("cooked_sprat", 5)] as ItemId[],
    };
    const rebake = apply(kitchen, "talk_to", { npc: "hanne" });
    expect(rebake.out.stagesAdvanced).toBe(0);
    expect(rebake.state.quests[Q3].stage).toBe(3);
    expect(rebake.state.inventory).toEqual(["rod", "lighthouse_pie"]);
    const lund = apply({ ...rebake.state, place: "lighthouse" }, "talk_to", { npc: "lund" });
    expect(lund.state.quests[Q3].stage).toBe(4);
  });
});

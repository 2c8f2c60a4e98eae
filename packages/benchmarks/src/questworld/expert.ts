// The scripted expert (questworld.md, Scripted expert): a planner that picks the next
// call from any state for any archetype. It re-plans from the state every call, so it
// recovers from failed gathers, burnt sprats, eaten pies and odd seeded starts.
// Strategy: quests in order; buy a missing tool (earning coins first if short); level
// a skill on the resource with the best XP per call; carry what the current and later
// stages need and drop the rest when slots run out; deliver both timber stages in one trip.

import { countOf, freeSlots } from "./inventory.js";
import { ITEM_INFO, ITEMS, type ItemId } from "./items.js";
import { QUESTS, type QuestId, QUEST_INFO } from "./quests.js";
import { route } from "./route.js";
import { isFinished, skillLevel, stageOf } from "./rules.js";
import { gatherChance } from "./skills.js";
import type { QuestworldState } from "./state.js";
import type { ToolName } from "./tools.js";
import { NPC_INFO, NPCS, type NpcId, type PlaceId, RESOURCE_INFO, RESOURCES, type ResourceId } from "./world.js";

export interface ExpertCall {
  name: ToolName;
  arguments: Record<string, unknown>;
}

const call = (name: ToolName, args: Record<string, unknown> = {}): ExpertCall => ({ name, arguments: args });

/** The expert's next call, or null when the episode is over. */
export function nextExpertCall(state: QuestworldState): ExpertCall | null {
  if (state.status !== "running") return null;
  if (!isFinished(state, "timber_for_the_mill")) return planTimber(state);
  if (!isFinished(state, "healers_remedy")) return planRemedy(state);
  if (!isFinished(state, "supper_at_the_lighthouse")) return planSupper(state);
  return null;
}

// ---- helpers --------------------------------------------------------------------------------

/** A move toward `place`, or null when already there. */
function goTo(s: QuestworldState, place: PlaceId): ExpertCall | null {
  if (s.place === place) return null;
  const path = route(s, place);
  // Unreachable only behind the locked gate, which the plan never targets while locked.
  if (!path || path.length === 0) return null;
  return call("move_to", { place: path[0] });
}

/** Items worth keeping. `currentOnly` keeps only what the first unfinished quest needs (used when selling). */
function keepCounts(s: QuestworldState, currentOnly = false): Partial<Record<ItemId, number>> {
  const q1 = stageOf(s, "timber_for_the_mill");
  const q2 = stageOf(s, "healers_remedy");
  const q3 = stageOf(s, "supper_at_the_lighthouse");
  const current: QuestId | undefined = QUESTS.find((q) => !isFinished(s, q));
  const want = (q: QuestId) => !currentOnly || q === current;
  const keep: Partial<Record<ItemId, number>> = {};
  // Tools are kept for every later quest either way: re-buying costs calls and coins.
  if (q1 < 3) keep.axe = 1;
  if (q2 < 2) keep.sickle = 1;
  if (q3 < 4) keep.rod = 1;
  if (want("timber_for_the_mill")) {
    if (q1 <= 1) keep.oak_log = 6;
    if (q1 <= 2) keep.birch_log = 4;
  }
  if (want("healers_remedy")) {
    if (q2 <= 1) keep.moonpetal = 3;
    if (q2 <= 2) {
      keep.mint = 2;
      keep.sunroot = 2;
    }
  }
  if (want("supper_at_the_lighthouse") && q3 < 4) {
    keep.lighthouse_pie = 1;
    keep.cooked_sprat = 5;
    keep.raw_sprat = 7;
  }
  return keep;
}

function junkCounts(s: QuestworldState, currentOnly = false): [ItemId, number][] {
  const keep = keepCounts(s, currentOnly);
  const out: [ItemId, number][] = [];
  for (const it of ITEMS) {
    const extra = countOf(s, it) - (keep[it] ?? 0);
    if (extra > 0) out.push([it, extra]);
  }
  return out.sort((a, b) => b[1] - a[1]);
}

/**
 * Free `n` slots: drop the most plentiful junk; failing that, what only a later quest
 * needs (the current quest's items and the tools always fit in 20 slots, so this never
 * drops what the next step is collecting); failing that, the most plentiful non-tool item.
 */
function ensureRoom(s: QuestworldState, n = 1): ExpertCall | null {
  if (freeSlots(s) >= n) return null;
  const junk = junkCounts(s);
  if (junk.length > 0) return call("drop", { item: junk[0][0], count: Math.min(20, junk[0][1]) });
  const later = junkCounts(s, true).filter(([it]) => ITEM_INFO[it].category !== "tool");
  if (later.length > 0) return call("drop", { item: later[0][0], count: Math.min(20, later[0][1]) });
  const counts = ITEMS.filter((it) => ITEM_INFO[it].category !== "tool")
    .map((it) => [it, countOf(s, it)] as const)
    .sort((a, b) => b[1] - a[1]);
  const [item] = counts[0][1] > 0 ? counts[0] : [s.inventory[0]];
  return call("drop", { item, count: 1 });
}

function gatherAt(s: QuestworldState, resource: ResourceId): ExpertCall {
  return goTo(s, RESOURCE_INFO[resource].place) ?? ensureRoom(s) ?? call("gather", { resource });
}

function canGather(s: QuestworldState, r: ResourceId): boolean {
  const info = RESOURCE_INFO[r];
  return (info.tool === null || countOf(s, info.tool) > 0) && skillLevel(s, info.skill) >= info.level;
}

function chanceOf(s: QuestworldState, r: ResourceId): number {
  const info = RESOURCE_INFO[r];
  return gatherChance(skillLevel(s, info.skill), info.level);
}

function movesTo(s: QuestworldState, place: PlaceId): number {
  return route(s, place)?.length ?? Number.POSITIVE_INFINITY;
}

/** Have `tool`: buy it from the nearest seller, earning the price first if short. */
function ensureTool(s: QuestworldState, tool: ItemId): ExpertCall | null {
  if (countOf(s, tool) > 0) return null;
  const sellers = NPCS.filter((n) => NPC_INFO[n].sells[tool] !== undefined).sort(
    (a, b) => movesTo(s, NPC_INFO[a].place) - movesTo(s, NPC_INFO[b].place),
  );
  const price = NPC_INFO[sellers[0]].sells[tool]!;
  if (s.coins < price) return earn(s, price);
  const npc = sellers[0];
  return goTo(s, NPC_INFO[npc].place) ?? ensureRoom(s) ?? call("buy", { npc, item: tool, count: 1 });
}

/** Reach `target` coins: sell what the current quest does not need, else gather the best-paying resource. */
function earn(s: QuestworldState, target: number): ExpertCall {
  const store: NpcId = "mara";
  const buys = NPC_INFO[store].buys;
  const sellable = junkCounts(s, true).filter(([it]) => buys[ITEM_INFO[it].category] !== undefined);
  const value = sellable.reduce((v, [it, n]) => v + n * buys[ITEM_INFO[it].category]!, 0);
  if (s.coins + value >= target) {
    const [item, n] = sellable.sort(
      (a, b) => b[1] * buys[ITEM_INFO[b[0]].category]! - a[1] * buys[ITEM_INFO[a[0]].category]!,
    )[0];
    return goTo(s, NPC_INFO[store].place) ?? call("sell", { npc: store, item, count: Math.min(20, n) });
  }
  let bestR: ResourceId | null = null;
  let bestV = -1;
  for (const r of RESOURCES) {
    const price = buys[ITEM_INFO[RESOURCE_INFO[r].item].category];
    if (price === undefined || !canGather(s, r)) continue;
    const v = price * chanceOf(s, r);
    if (v > bestV) {
      bestV = v;
      bestR = r;
    }
  }
  // Mint needs no tool and foraging 1, so some resource always qualifies.
  return gatherAt(s, bestR ?? "mint");
}

function talkOrAccept(s: QuestworldState, quest: QuestId): ExpertCall {
  const giver = QUEST_INFO[quest].giver;
  return (
    goTo(s, NPC_INFO[giver].place) ??
    (s.quests[quest].offered ? call("accept_quest", { quest }) : call("talk_to", { npc: giver }))
  );
}

// ---- the three quests -----------------------------------------------------------------------

function planTimber(s: QuestworldState): ExpertCall {
  const st = stageOf(s, "timber_for_the_mill");
  if (st === 0) return talkOrAccept(s, "timber_for_the_mill");
  const tool = ensureTool(s, "axe");
  if (tool) return tool;
  const oak = countOf(s, "oak_log");
  const birch = countOf(s, "birch_log");
  const wc = skillLevel(s, "woodcutting");
  const deliver = goTo(s, "mill") ?? call("talk_to", { npc: "bram" });
  // One trip for both stages; hand in early only when already at the mill.
  if (st === 1 && oak >= 6 && (s.place === "mill" || birch >= 4)) return deliver;
  if (st === 2 && birch >= 4) return deliver;
  if ((st === 1 && oak < 6) || wc < 4) return gatherAt(s, "oak");
  return gatherAt(s, "birch");
}

function bestForagingXp(s: QuestworldState): ResourceId {
  const options: ResourceId[] = ["mint", "sunroot"];
  let best: ResourceId = "mint";
  let bestV = -1;
  for (const r of options) {
    if (!canGather(s, r)) continue;
    const v = RESOURCE_INFO[r].xp * chanceOf(s, r);
    if (v > bestV) {
      bestV = v;
      best = r;
    }
  }
  return best;
}

function planRemedy(s: QuestworldState): ExpertCall {
  const st = stageOf(s, "healers_remedy");
  if (st === 0) return talkOrAccept(s, "healers_remedy");
  const mint = countOf(s, "mint");
  const sunroot = countOf(s, "sunroot");
  const herbsReady = mint >= 2 && sunroot >= 2;
  const missingHerb: ResourceId = mint < 2 ? "mint" : "sunroot";
  const deliver = () => goTo(s, "apothecary") ?? ensureRoom(s, st === 2 ? 1 : 0) ?? call("talk_to", { npc: "ysolde" });
  // Sunroot needs foraging 3: from a low-level seeded start, level on mint first.
  const herb = () => gatherAt(s, canGather(s, missingHerb) ? missingHerb : bestForagingXp(s));
  if (st === 2) return herbsReady ? deliver() : herb();
  // Stage 1 → 2: the wall.
  if (countOf(s, "moonpetal") >= 3) {
    if (herbsReady || !canGather(s, missingHerb)) return deliver();
    return herb();
  }
  const tool = ensureTool(s, "sickle");
  if (tool) return tool;
  if (skillLevel(s, "foraging") < RESOURCE_INFO.moonpetal.level) return gatherAt(s, bestForagingXp(s));
  return gatherAt(s, "moonpetal");
}

/** Raw sprats to cook for `need` cooked ones: a margin for the 20% burn chance. */
function rawTarget(need: number): number {
  return need <= 1 ? need : need + 1 + (need >= 4 ? 1 : 0);
}

function planSupper(s: QuestworldState): ExpertCall {
  const st = stageOf(s, "supper_at_the_lighthouse");
  if (st === 0) return talkOrAccept(s, "supper_at_the_lighthouse");
  const pie = countOf(s, "lighthouse_pie") > 0;
  if (st >= 2 && pie) {
    // Stage 2 → 3 is passing the gate inward; a seeded start may already stand inside.
    if (st === 2 && s.place === "lighthouse") return call("move_to", { place: "lighthouse_gate" });
    return goTo(s, "lighthouse") ?? call("talk_to", { npc: "lund" });
  }
  // Stage 1, or the pie is gone: Hanne bakes one for 5 cooked sprats.
  const cooked = countOf(s, "cooked_sprat");
  if (cooked >= 5) return goTo(s, "kitchen") ?? ensureRoom(s, 1) ?? call("talk_to", { npc: "hanne" });
  const need = 5 - cooked;
  const raw = countOf(s, "raw_sprat");
  if (raw >= need && (raw >= rawTarget(need) || s.place === "kitchen")) {
    return goTo(s, "kitchen") ?? call("craft", { kind: "cook", item: "raw_sprat", count: Math.min(20, raw) });
  }
  return ensureTool(s, "rod") ?? gatherAt(s, "sprat");
}

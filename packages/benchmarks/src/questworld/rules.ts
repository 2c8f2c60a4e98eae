// The game's rules: one function per tool, each turning a validated call into a short
// text for the agent plus a JSON payload for programs (questworld.md, Tools). Rule
// violations come back as observations with ok: false, never as exceptions.
// Tick costs the spec leaves open are ours: look-ups (observe, inventory, skills,
// quest_log) cost 0, a move costs its edge, gather 2, cook 1 per item, anything else 1;
// a refused call costs 0 ticks (it still costs one tool call, counted by the environment).

import { checkHandIn, addItems, countOf, freeSlots, inventoryCounts, removeItems } from "./inventory.js";
import { ITEM_INFO, type ItemId, itemCount } from "./items.js";
import { nextFloat } from "./prng.js";
import { HAND_INS, QUEST_INFO, QUEST_REWARDS, QUESTS, type QuestId, stageCount } from "./quests.js";
import { SKILLS, type SkillId, gatherChance, levelForXp, xpForLevel } from "./skills.js";
import type { QuestworldState } from "./state.js";
import type { ToolName } from "./tools.js";
import {
  NPC_INFO,
  type NpcId,
  PLACE_NAMES,
  type PlaceId,
  RESOURCE_INFO,
  RESOURCES,
  type ResourceId,
  exitsOf,
} from "./world.js";

export interface ToolOutcome {
  ok: boolean;
  /** Short text the agent reads. */
  text: string;
  /** Structured result for programs (always has `ok`; errors have `error: { code, message }`). */
  payload: Record<string, unknown>;
  ticks: number;
  /** Quest stages completed by this call (the step reward). */
  stagesAdvanced: number;
}

/** Cooking succeeds with this chance (questworld.md: "80% success, burnt sprat otherwise"). */
export const COOK_CHANCE = 0.8;
export const COOK_XP = 12;
export const GATHER_TICKS = 2;
const ACTION_TICKS = 1;

export function skillLevel(state: QuestworldState, skill: SkillId): number {
  return levelForXp(state.xp[skill]);
}

export function stageOf(state: QuestworldState, quest: QuestId): number {
  return state.quests[quest].stage;
}

export function isFinished(state: QuestworldState, quest: QuestId): boolean {
  return state.quests[quest].stage >= stageCount(quest);
}

/** Lighthouse gate → lighthouse is locked until quest 3 stage ≥ 2 (questworld.md, World). */
export function isLinkLocked(state: QuestworldState, from: PlaceId, to: PlaceId): boolean {
  const gateLink =
    (from === "lighthouse_gate" && to === "lighthouse") || (from === "lighthouse" && to === "lighthouse_gate");
  return gateLink && stageOf(state, "supper_at_the_lighthouse") < 2;
}

function ok(text: string, payload: Record<string, unknown>, ticks: number, stagesAdvanced = 0): ToolOutcome {
  return { ok: true, text, payload: { ok: true, ...payload }, ticks, stagesAdvanced };
}

function err(code: string, message: string, extra: Record<string, unknown> = {}): ToolOutcome {
  return {
    ok: false,
    text: `Error: ${message}`,
    payload: { ok: false, error: { code, message }, ...extra },
    ticks: 0,
    stagesAdvanced: 0,
  };
}

/** Add XP; returns the level-up line (or "") for the text. */
function grantXp(state: QuestworldState, skill: SkillId, xp: number, levelUps: Record<string, number>): string {
  const before = skillLevel(state, skill);
  state.xp[skill] += xp;
  const after = skillLevel(state, skill);
  if (after > before) {
    levelUps[skill] = after;
    return ` Your ${skill} is now level ${after}!`;
  }
  return "";
}

const npcName = (npc: NpcId) => NPC_INFO[npc].name;

function notHere(npc: NpcId): ToolOutcome {
  const where = NPC_INFO[npc].place;
  return err("not_here", `${npcName(npc)} is not here; they are at ${PLACE_NAMES[where]}.`, { npc, place: where });
}

// ---- look-ups -------------------------------------------------------------------------------

function observe(state: QuestworldState): ToolOutcome {
  const place = state.place;
  const exits = exitsOf(place).map((e) => ({ ...e, locked: isLinkLocked(state, place, e.place) }));
  const npcs = (Object.keys(NPC_INFO) as NpcId[]).filter((n) => NPC_INFO[n].place === place);
  const resources = RESOURCES.filter((r) => RESOURCE_INFO[r].place === place);
  const parts = [`You are at ${PLACE_NAMES[place]}.`];
  parts.push(`Exits: ${exits.map((e) => `${e.place} (${e.ticks} ticks${e.locked ? ", locked" : ""})`).join(", ")}.`);
  if (npcs.length) parts.push(`Here: ${npcs.map((n) => `${npcName(n)} (${n})`).join(", ")}.`);
  if (resources.length) {
    const desc = resources.map((r) => {
      const ri = RESOURCE_INFO[r];
      return `${r} (${ri.skill} ${ri.level}${ri.tool ? `, needs ${ITEM_INFO[ri.tool].name}` : ""})`;
    });
    parts.push(`You can gather: ${desc.join(", ")}.`);
  }
  if (place === "kitchen") parts.push("There is a cooking fire.");
  return ok(
    parts.join(" "),
    { place, exits, npcs, resources, station: place === "kitchen" ? "cooking_fire" : null },
    0,
  );
}

function inventory(state: QuestworldState): ToolOutcome {
  const counts = inventoryCounts(state);
  const list = (Object.entries(counts) as [ItemId, number][]).map(([it, n]) => itemCount(it, n));
  const used = state.inventory.length;
  const text = `Coins: ${state.coins}. Slots used ${used}/${used + freeSlots(state)}: ${list.length ? list.join(", ") : "empty"}.`;
  return ok(text, { coins: state.coins, items: counts, slotsUsed: used, freeSlots: freeSlots(state) }, 0);
}

function skills(state: QuestworldState): ToolOutcome {
  const out: Record<string, { level: number; xp: number; nextLevelXp: number }> = {};
  const parts: string[] = [];
  for (const s of SKILLS) {
    const level = skillLevel(state, s);
    out[s] = { level, xp: state.xp[s], nextLevelXp: xpForLevel(level + 1) };
    parts.push(`${s} ${level} (${state.xp[s]}/${xpForLevel(level + 1)} XP)`);
  }
  return ok(`Skills: ${parts.join(", ")}.`, { skills: out }, 0);
}

/** What to do next on `quest`, in words (also used by the opening message). */
export function nextStep(state: QuestworldState, quest: QuestId): string {
  const st = stageOf(state, quest);
  const info = QUEST_INFO[quest];
  if (st >= stageCount(quest)) return "finished";
  if (st === 0) {
    if (info.requires && !isFinished(state, info.requires))
      return `locked until ${QUEST_INFO[info.requires].title} is finished`;
    const giver = NPC_INFO[info.giver];
    return state.quests[quest].offered
      ? `offered: accept_quest ${quest} near ${giver.name}`
      : `talk to ${giver.name} (${info.giver}) at ${PLACE_NAMES[giver.place]}`;
  }
  switch (`${quest}:${st}`) {
    case "timber_for_the_mill:1":
      return "bring 6 oak logs to Miller Bram at the mill";
    case "timber_for_the_mill:2":
      return "bring 4 birch logs to Miller Bram (birch needs woodcutting 4)";
    case "healers_remedy:1":
      return "bring 3 moonpetals from the grove to Healer Ysolde (needs foraging 5 and a sickle)";
    case "healers_remedy:2":
      return "bring 2 sunroot and 2 mint to Healer Ysolde";
    case "supper_at_the_lighthouse:1":
      return "bring 5 cooked sprats to Cook Hanne";
    case "supper_at_the_lighthouse:2":
      return "pass the lighthouse gate to reach the lighthouse";
    default:
      return countOf(state, "lighthouse_pie") > 0
        ? "give the lighthouse pie to Keeper Lund at the lighthouse"
        : "you have no pie: Cook Hanne bakes another for 5 cooked sprats; then give it to Keeper Lund";
  }
}

function questLog(state: QuestworldState): ToolOutcome {
  const quests: Record<string, unknown> = {};
  const lines: string[] = [];
  for (const q of QUESTS) {
    const st = stageOf(state, q);
    const next = nextStep(state, q);
    quests[q] = { title: QUEST_INFO[q].title, stage: st, stages: stageCount(q), finished: isFinished(state, q), next };
    lines.push(`${QUEST_INFO[q].title} (${q}): stage ${st}/${stageCount(q)} — ${next}.`);
  }
  return ok(lines.join("\n"), { quests, stagesReached: totalStages(state) }, 0);
}

export function totalStages(state: QuestworldState): number {
  let n = 0;
  for (const q of QUESTS) n += stageOf(state, q);
  return n;
}

// ---- movement -------------------------------------------------------------------------------

function moveTo(state: QuestworldState, place: PlaceId): ToolOutcome {
  const from = state.place;
  if (place === from) return err("already_there", `You are already at ${PLACE_NAMES[place]}.`, { place });
  const exits = exitsOf(from);
  const exit = exits.find((e) => e.place === place);
  if (!exit) {
    const list = exits.map((e) => `${e.place} (${e.ticks} ticks)`).join(", ");
    return err("not_adjacent", `${PLACE_NAMES[place]} is not linked to ${PLACE_NAMES[from]}; exits: ${list}.`, {
      place,
    });
  }
  if (isLinkLocked(state, from, place)) {
    return err(
      "gate_locked",
      "The lighthouse gate is locked. Cook Hanne's pie opens it (Supper at the Lighthouse stage 2).",
      {
        place,
      },
    );
  }
  state.place = place;
  let text = `You walk to ${PLACE_NAMES[place]} (${exit.ticks} ticks).`;
  let advanced = 0;
  // questworld.md, Quest 3 stage 3: moving through the gate advances the stage.
  if (from === "lighthouse_gate" && place === "lighthouse" && stageOf(state, "supper_at_the_lighthouse") === 2) {
    state.quests.supper_at_the_lighthouse.stage = 3;
    advanced = 1;
    text += " You pass through the lighthouse gate. (Supper at the Lighthouse: stage 3/4)";
  }
  return ok(text, { from, place, ticks: exit.ticks, stagesAdvanced: advanced }, exit.ticks, advanced);
}

// ---- quests ---------------------------------------------------------------------------------

function acceptQuest(state: QuestworldState, quest: QuestId): ToolOutcome {
  const info = QUEST_INFO[quest];
  const giver = NPC_INFO[info.giver];
  if (stageOf(state, quest) > 0) return err("already_accepted", `You have already accepted ${info.title}.`, { quest });
  if (info.requires && !isFinished(state, info.requires)) {
    return err("quest_locked", `${info.title} needs ${QUEST_INFO[info.requires].title} finished first.`, { quest });
  }
  if (state.place !== giver.place) {
    return err("not_here", `${giver.name} gives ${info.title}; they are at ${PLACE_NAMES[giver.place]}.`, { quest });
  }
  if (!state.quests[quest].offered) {
    return err("not_offered", `Talk to ${giver.name} (${info.giver}) first.`, { quest });
  }
  state.quests[quest].stage = 1;
  const text = `You accept ${info.title}. (stage 1/${stageCount(quest)}) Next: ${nextStep(state, quest)}.`;
  return ok(text, { quest, stage: 1 }, ACTION_TICKS, 1);
}

interface HandInSpec {
  quest: QuestId;
  /** The stage this hand-in completes. */
  stage: number;
  rewardSlots: number;
}

/** An all-or-nothing hand-in; `onDone` adds rewards and returns extra text. */
function handIn(
  state: QuestworldState,
  npc: NpcId,
  spec: HandInSpec,
  needs: Partial<Record<ItemId, number>>,
  onDone: (levelUps: Record<string, number>) => string,
  advance = true,
): ToolOutcome {
  const check = checkHandIn(state, needs, spec.rewardSlots);
  const wanted = (Object.entries(needs) as [ItemId, number][]).map(([it, n]) => itemCount(it, n)).join(" and ");
  if (!check.ok) {
    const why =
      check.reason === "missing"
        ? `you have ${itemCount(check.item, check.have)}`
        : `you need ${check.need} free inventory slot for the reward first (you have ${check.free})`;
    const text = `${npcName(npc)}: "I need ${wanted}." Nothing was handed in: ${why}.`;
    return ok(text, { npc, handIn: { quest: spec.quest, stage: spec.stage, done: false, ...check } }, ACTION_TICKS);
  }
  for (const [it, n] of Object.entries(needs) as [ItemId, number][]) removeItems(state, it, n);
  const levelUps: Record<string, number> = {};
  let advanced = 0;
  if (advance) {
    state.quests[spec.quest].stage = spec.stage;
    advanced = 1;
  }
  const extra = onDone(levelUps);
  const stageText = advance ? ` (${QUEST_INFO[spec.quest].title}: stage ${spec.stage}/${stageCount(spec.quest)})` : "";
  const text = `You give ${wanted} to ${npcName(npc)}.${extra}${stageText}`;
  return ok(
    text,
    {
      npc,
      handIn: { quest: spec.quest, stage: spec.stage, done: true, gave: needs },
      levelUps,
      stagesAdvanced: advanced,
    },
    ACTION_TICKS,
    advanced,
  );
}

function finishReward(state: QuestworldState, quest: QuestId, levelUps: Record<string, number>): string {
  const r = QUEST_REWARDS[quest];
  state.coins += r.coins;
  let text = r.coins ? ` Reward: ${r.coins} coins` : "";
  for (const [skill, xp] of Object.entries(r.xp) as [SkillId, number][]) {
    text += `, ${xp} ${skill} XP.`;
    text += grantXp(state, skill, xp, levelUps);
  }
  return text;
}

function offer(state: QuestworldState, npc: NpcId, quest: QuestId, pitch: string): ToolOutcome {
  const info = QUEST_INFO[quest];
  if (info.requires && !isFinished(state, info.requires)) {
    const text = `${npcName(npc)}: "Come back once ${QUEST_INFO[info.requires].title} is done."`;
    return ok(text, { npc, offered: null }, ACTION_TICKS);
  }
  state.quests[quest].offered = true;
  return ok(`${npcName(npc)}: "${pitch}" (accept_quest ${quest})`, { npc, offered: quest }, ACTION_TICKS);
}

function talkTo(state: QuestworldState, npc: NpcId): ToolOutcome {
  if (NPC_INFO[npc].place !== state.place) return notHere(npc);
  const q1 = stageOf(state, "timber_for_the_mill");
  const q2 = stageOf(state, "healers_remedy");
  const q3 = stageOf(state, "supper_at_the_lighthouse");
  const chat = (line: string) => ok(`${npcName(npc)}: "${line}"`, { npc }, ACTION_TICKS);
  switch (npc) {
    case "oda":
      if (q1 === 0)
        return offer(
          state,
          npc,
          "timber_for_the_mill",
          "The mill needs timber: 6 oak logs, then 4 birch logs, for Miller Bram.",
        );
      return chat(q1 < 3 ? "Miller Bram is waiting for your logs." : "The mill turns again. Thank you!");
    case "bram":
      if (q1 === 1)
        return handIn(
          state,
          npc,
          { quest: "timber_for_the_mill", stage: 2, rewardSlots: 0 },
          HAND_INS.timber_for_the_mill[2]!,
          () => " Now 4 birch logs, please.",
        );
      if (q1 === 2) {
        return handIn(
          state,
          npc,
          { quest: "timber_for_the_mill", stage: 3, rewardSlots: 0 },
          HAND_INS.timber_for_the_mill[3]!,
          (lu) => finishReward(state, "timber_for_the_mill", lu),
        );
      }
      return chat(q1 === 0 ? "Warden Oda is looking for a woodcutter." : "Fine timber. The mill is grinding again.");
    case "ysolde":
      if (q2 === 0)
        return offer(
          state,
          npc,
          "healers_remedy",
          "My remedy needs 3 moonpetals from the grove, then 2 sunroot and 2 mint.",
        );
      if (q2 === 1)
        return handIn(
          state,
          npc,
          { quest: "healers_remedy", stage: 2, rewardSlots: 0 },
          HAND_INS.healers_remedy[2]!,
          () => " Now 2 sunroot and 2 mint.",
        );
      if (q2 === 2) {
        // The token needs a free slot, checked before the herbs are taken (questworld.md, Inventory).
        return handIn(
          state,
          npc,
          { quest: "healers_remedy", stage: 3, rewardSlots: 1 },
          HAND_INS.healers_remedy[3]!,
          (lu) => {
            addItems(state, "healers_token");
            return `${finishReward(state, "healers_remedy", lu)} You receive a healer's token.`;
          },
        );
      }
      return chat("Thank you for the remedy herbs.");
    case "hanne": {
      if (q3 === 0)
        return offer(
          state,
          npc,
          "supper_at_the_lighthouse",
          "Bring me 5 cooked sprats and I'll bake a pie for Keeper Lund.",
        );
      const bake = () => {
        addItems(state, "lighthouse_pie");
        return " She bakes a lighthouse pie and hands it to you.";
      };
      if (q3 === 1) {
        return handIn(
          state,
          npc,
          { quest: "supper_at_the_lighthouse", stage: 2, rewardSlots: 1 },
          HAND_INS.supper_at_the_lighthouse[2]!,
          () => `${bake()} The lighthouse gate is open.`,
        );
      }
      // questworld.md, Quest 3: Hanne bakes a second pie for 5 more cooked sprats if the first is gone.
      if (q3 < 4 && countOf(state, "lighthouse_pie") === 0) {
        return handIn(
          state,
          npc,
          { quest: "supper_at_the_lighthouse", stage: q3, rewardSlots: 1 },
          HAND_INS.supper_at_the_lighthouse[2]!,
          bake,
          false,
        );
      }
      return chat(q3 < 4 ? "Take the pie to Keeper Lund, through the lighthouse gate." : "Lund loved the pie!");
    }
    case "lund":
      if (q3 === 3) {
        return handIn(
          state,
          npc,
          { quest: "supper_at_the_lighthouse", stage: 4, rewardSlots: 0 },
          HAND_INS.supper_at_the_lighthouse[4]!,
          () => " Keeper Lund beams: supper at last!",
        );
      }
      return chat(q3 >= 4 ? "Best pie on the coast." : "It gets lonely up here.");
    case "mara":
    case "piet": {
      const info = NPC_INFO[npc];
      const wares = (Object.entries(info.sells) as [ItemId, number][]).map(([it, p]) => `${ITEM_INFO[it].name} ${p}`);
      const buys = Object.entries(info.buys).map(([c, p]) => `${c}s ${p}`);
      const text = `${info.name}: "I sell ${wares.join(", ")}${buys.length ? `; I buy ${buys.join(", ")}` : ""} (coins each)."`;
      return ok(text, { npc, sells: info.sells, buys: info.buys }, ACTION_TICKS);
    }
  }
}

// ---- gathering, crafting, trade ------------------------------------------------------------

function gather(state: QuestworldState, resource: ResourceId): ToolOutcome {
  const r = RESOURCE_INFO[resource];
  if (state.place !== r.place) {
    return err("wrong_place", `There is no ${r.name} at ${PLACE_NAMES[state.place]}; try ${PLACE_NAMES[r.place]}.`, {
      resource,
    });
  }
  if (r.tool && countOf(state, r.tool) === 0) {
    return err("missing_tool", `You need a ${ITEM_INFO[r.tool].name} to gather ${r.name}.`, { resource, tool: r.tool });
  }
  const level = skillLevel(state, r.skill);
  if (level < r.level) {
    return err("level_too_low", `${r.name} needs ${r.skill} ${r.level}; yours is ${level}.`, {
      resource,
      skill: r.skill,
      need: r.level,
      have: level,
    });
  }
  if (freeSlots(state) === 0)
    return err("no_room", "Your inventory is full (20 slots). Drop or sell something.", { resource });
  const chance = gatherChance(level, r.level);
  const success = nextFloat(state.rng) < chance;
  if (!success) {
    return ok(`You try to gather ${r.name} but fail.`, { resource, success: false, chance }, GATHER_TICKS);
  }
  addItems(state, r.item);
  const levelUps: Record<string, number> = {};
  const up = grantXp(state, r.skill, r.xp, levelUps);
  const text = `You gather 1 ${ITEM_INFO[r.item].name} (+${r.xp} ${r.skill} XP).${up}`;
  return ok(text, { resource, success: true, chance, item: r.item, xp: r.xp, levelUps }, GATHER_TICKS);
}

function craft(state: QuestworldState, kind: "cook", item: ItemId, count: number): ToolOutcome {
  if (state.place !== "kitchen")
    return err("wrong_place", "You can only cook at the kitchen's cooking fire.", { kind, item });
  if (item !== "raw_sprat")
    return err("no_recipe", `You can't ${kind} ${ITEM_INFO[item].name}; the fire takes raw_sprat.`, { kind, item });
  const have = countOf(state, item);
  if (have < count)
    return err("missing_item", `You have ${itemCount(item, have)}, not ${count}.`, { kind, item, need: count, have });
  if (skillLevel(state, "cooking") < 1) return err("level_too_low", "Cooking sprats needs cooking 1.", { kind, item });
  let cooked = 0;
  let burnt = 0;
  const levelUps: Record<string, number> = {};
  let ups = "";
  for (let i = 0; i < count; i++) {
    // Replace in place: the slot count does not change.
    const idx = state.inventory.lastIndexOf("raw_sprat");
    if (nextFloat(state.rng) < COOK_CHANCE) {
      state.inventory[idx] = "cooked_sprat";
      cooked++;
      ups += grantXp(state, "cooking", COOK_XP, levelUps);
    } else {
      state.inventory[idx] = "burnt_sprat";
      burnt++;
    }
  }
  const text = `You cook ${count}: ${itemCount("cooked_sprat", cooked)}, ${itemCount("burnt_sprat", burnt)} (+${cooked * COOK_XP} cooking XP).${ups}`;
  return ok(text, { kind, item, count, cooked, burnt, xp: cooked * COOK_XP, levelUps }, ACTION_TICKS * count);
}

function buy(state: QuestworldState, npc: NpcId, item: ItemId, count: number): ToolOutcome {
  if (NPC_INFO[npc].place !== state.place) return notHere(npc);
  const price = NPC_INFO[npc].sells[item];
  if (price === undefined)
    return err("not_for_sale", `${npcName(npc)} does not sell ${ITEM_INFO[item].plural}.`, { npc, item });
  const cost = price * count;
  if (state.coins < cost)
    return err("no_coins", `${itemCount(item, count)} cost ${cost} coins; you have ${state.coins}.`, {
      npc,
      item,
      cost,
      coins: state.coins,
    });
  if (freeSlots(state) < count)
    return err("no_room", `You need ${count} free slots; you have ${freeSlots(state)}.`, { npc, item });
  state.coins -= cost;
  addItems(state, item, count);
  return ok(
    `You buy ${itemCount(item, count)} for ${cost} coins (${state.coins} left).`,
    { npc, item, count, cost, coins: state.coins },
    ACTION_TICKS,
  );
}

function sell(state: QuestworldState, npc: NpcId, item: ItemId, count: number): ToolOutcome {
  if (NPC_INFO[npc].place !== state.place) return notHere(npc);
  const price = NPC_INFO[npc].buys[ITEM_INFO[item].category];
  if (price === undefined)
    return err("not_bought", `${npcName(npc)} does not buy ${ITEM_INFO[item].plural}.`, { npc, item });
  const have = countOf(state, item);
  if (have < count)
    return err("missing_item", `You have ${itemCount(item, have)}, not ${count}.`, { npc, item, need: count, have });
  removeItems(state, item, count);
  state.coins += price * count;
  return ok(
    `You sell ${itemCount(item, count)} for ${price * count} coins (${state.coins} now).`,
    { npc, item, count, earned: price * count, coins: state.coins },
    ACTION_TICKS,
  );
}

function eat(state: QuestworldState, item: ItemId): ToolOutcome {
  if (!ITEM_INFO[item].edible) return err("not_edible", `You can't eat ${ITEM_INFO[item].plural}.`, { item });
  if (countOf(state, item) === 0) return err("missing_item", `You have no ${ITEM_INFO[item].plural}.`, { item });
  removeItems(state, item, 1);
  const warn = item === "lighthouse_pie" ? " Delicious, but Keeper Lund's supper is gone." : "";
  return ok(`You eat the ${ITEM_INFO[item].name}.${warn}`, { item }, ACTION_TICKS);
}

function drop(state: QuestworldState, item: ItemId, count: number): ToolOutcome {
  const have = countOf(state, item);
  if (have < count)
    return err("missing_item", `You have ${itemCount(item, have)}, not ${count}.`, { item, need: count, have });
  removeItems(state, item, count);
  return ok(
    `You drop ${itemCount(item, count)} (${freeSlots(state)} slots free).`,
    { item, count, freeSlots: freeSlots(state) },
    ACTION_TICKS,
  );
}

/** Apply one well-formed call (arguments already checked against the tool's schema) to `state`. */
export function applyTool(state: QuestworldState, name: ToolName, args: Record<string, unknown>): ToolOutcome {
  const a = args as Record<string, never>;
  switch (name) {
    case "observe":
      return observe(state);
    case "inventory":
      return inventory(state);
    case "skills":
      return skills(state);
    case "quest_log":
      return questLog(state);
    case "move_to":
      return moveTo(state, a.place);
    case "talk_to":
      return talkTo(state, a.npc);
    case "accept_quest":
      return acceptQuest(state, a.quest);
    case "gather":
      return gather(state, a.resource);
    case "craft":
      return craft(state, a.kind, a.item, (args.count as number | undefined) ?? 1);
    case "buy":
      return buy(state, a.npc, a.item, a.count);
    case "sell":
      return sell(state, a.npc, a.item, a.count);
    case "eat":
      return eat(state, a.item);
    case "drop":
      return drop(state, a.item, (args.count as number | undefined) ?? 1);
  }
}

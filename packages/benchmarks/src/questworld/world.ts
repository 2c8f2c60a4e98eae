// The map, the people and the resources (questworld.md, World). Our own design:
// no real game's names or data. Links are undirected; a move costs the edge's ticks.

import type { ItemCategory, ItemId } from "./items.js";
import type { SkillId } from "./skills.js";

export const PLACES = [
  "village",
  "mill",
  "forest",
  "meadow",
  "grove",
  "apothecary",
  "pier",
  "kitchen",
  "lighthouse_gate",
  "lighthouse",
] as const;
export type PlaceId = (typeof PLACES)[number];

export const PLACE_NAMES: Record<PlaceId, string> = {
  village: "the village",
  mill: "the mill",
  forest: "the forest",
  meadow: "the meadow",
  grove: "the grove",
  apothecary: "the apothecary",
  pier: "the pier",
  kitchen: "the kitchen",
  lighthouse_gate: "the lighthouse gate",
  lighthouse: "the lighthouse",
};

/**
 * Edges with their tick cost. The spec's table lists apothecary–village 2 only on the
 * apothecary's row; edges are undirected, so the village links to the apothecary too.
 * lighthouse_gate–lighthouse is locked until quest 3 stage ≥ 2 (see rules.ts).
 */
export const LINKS: readonly (readonly [PlaceId, PlaceId, number])[] = [
  ["village", "forest", 3],
  ["village", "meadow", 4],
  ["village", "pier", 5],
  ["village", "mill", 2],
  ["village", "apothecary", 2],
  ["forest", "meadow", 3],
  ["meadow", "grove", 4],
  ["pier", "kitchen", 1],
  ["pier", "lighthouse_gate", 6],
  ["lighthouse_gate", "lighthouse", 1],
];

/** Neighbours of `place` with tick costs, in table order. */
export function exitsOf(place: PlaceId): { place: PlaceId; ticks: number }[] {
  const out: { place: PlaceId; ticks: number }[] = [];
  for (const [a, b, t] of LINKS) {
    if (a === place) out.push({ place: b, ticks: t });
    else if (b === place) out.push({ place: a, ticks: t });
  }
  return out;
}

export const NPCS = ["oda", "mara", "bram", "ysolde", "piet", "hanne", "lund"] as const;
export type NpcId = (typeof NPCS)[number];

export interface NpcInfo {
  name: string;
  place: PlaceId;
  /** Items the NPC sells, with prices in coins. */
  sells: Partial<Record<ItemId, number>>;
  /** Item categories the NPC buys, with prices in coins per item. */
  buys: Partial<Record<ItemCategory, number>>;
}

export const NPC_INFO: Record<NpcId, NpcInfo> = {
  oda: { name: "Warden Oda", place: "village", sells: {}, buys: {} },
  // The general store: "sells axe 15, sickle 10, rod 20, bait 1; buys logs 2, herbs 3, fish 4".
  mara: {
    name: "Mara the storekeeper",
    place: "village",
    sells: { axe: 15, sickle: 10, rod: 20, bait: 1 },
    buys: { log: 2, herb: 3, fish: 4 },
  },
  bram: { name: "Miller Bram", place: "mill", sells: {}, buys: {} },
  ysolde: { name: "Healer Ysolde", place: "apothecary", sells: {}, buys: {} },
  // "Dockmaster Piet (shop: rod, bait)": he sells at the store's prices and buys nothing.
  piet: { name: "Dockmaster Piet", place: "pier", sells: { rod: 20, bait: 1 }, buys: {} },
  hanne: { name: "Cook Hanne", place: "kitchen", sells: {}, buys: {} },
  lund: { name: "Keeper Lund", place: "lighthouse", sells: {}, buys: {} },
};

export const RESOURCES = ["oak", "birch", "mint", "sunroot", "moonpetal", "sprat", "eel"] as const;
export type ResourceId = (typeof RESOURCES)[number];

export interface ResourceInfo {
  name: string;
  place: PlaceId;
  skill: SkillId;
  level: number;
  /** Tool that must be in the inventory, if any. */
  tool: ItemId | null;
  item: ItemId;
  xp: number;
}

// questworld.md, World: places, level requirements and XP per success.
export const RESOURCE_INFO: Record<ResourceId, ResourceInfo> = {
  oak: { name: "oak tree", place: "forest", skill: "woodcutting", level: 1, tool: "axe", item: "oak_log", xp: 10 },
  birch: {
    name: "birch tree",
    place: "forest",
    skill: "woodcutting",
    level: 4,
    tool: "axe",
    item: "birch_log",
    xp: 20,
  },
  mint: { name: "mint", place: "meadow", skill: "foraging", level: 1, tool: null, item: "mint", xp: 8 },
  sunroot: { name: "sunroot", place: "meadow", skill: "foraging", level: 3, tool: null, item: "sunroot", xp: 15 },
  moonpetal: {
    name: "moonpetal",
    place: "grove",
    skill: "foraging",
    level: 5,
    tool: "sickle",
    item: "moonpetal",
    xp: 30,
  },
  sprat: { name: "sprat", place: "pier", skill: "fishing", level: 1, tool: "rod", item: "raw_sprat", xp: 10 },
  eel: { name: "eel", place: "pier", skill: "fishing", level: 4, tool: "rod", item: "eel", xp: 25 },
};

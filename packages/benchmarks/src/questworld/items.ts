// The item catalogue (questworld.md, World and Quests). Items never stack except coins,
// which are a counter outside the 20 inventory slots.

export const ITEMS = [
  "axe",
  "sickle",
  "rod",
  "bait",
  "oak_log",
  "birch_log",
  "mint",
  "sunroot",
  "moonpetal",
  "raw_sprat",
  "eel",
  "cooked_sprat",
  "burnt_sprat",
  "lighthouse_pie",
  "healers_token",
] as const;
export type ItemId = (typeof ITEMS)[number];

/** What a shop buys by category (questworld.md: "buys logs 2, herbs 3, fish 4"). */
export type ItemCategory = "tool" | "log" | "herb" | "fish" | "junk" | "quest";

export interface ItemInfo {
  name: string;
  plural: string;
  category: ItemCategory;
  /** Allowed by `eat`. */
  edible: boolean;
}

export const ITEM_INFO: Record<ItemId, ItemInfo> = {
  axe: { name: "axe", plural: "axes", category: "tool", edible: false },
  sickle: { name: "sickle", plural: "sickles", category: "tool", edible: false },
  rod: { name: "fishing rod", plural: "fishing rods", category: "tool", edible: false },
  // Bait is sold (questworld.md) but the spec gives it no effect on fishing; it is a plain trade good here.
  bait: { name: "bait", plural: "bait", category: "tool", edible: false },
  oak_log: { name: "oak log", plural: "oak logs", category: "log", edible: false },
  birch_log: { name: "birch log", plural: "birch logs", category: "log", edible: false },
  mint: { name: "mint", plural: "mint", category: "herb", edible: true },
  sunroot: { name: "sunroot", plural: "sunroots", category: "herb", edible: true },
  moonpetal: { name: "moonpetal", plural: "moonpetals", category: "herb", edible: false },
  raw_sprat: { name: "raw sprat", plural: "raw sprats", category: "fish", edible: false },
  eel: { name: "eel", plural: "eels", category: "fish", edible: false },
  cooked_sprat: { name: "cooked sprat", plural: "cooked sprats", category: "fish", edible: true },
  burnt_sprat: { name: "burnt sprat", plural: "burnt sprats", category: "junk", edible: true },
  lighthouse_pie: { name: "lighthouse pie", plural: "lighthouse pies", category: "quest", edible: true },
  healers_token: { name: "healer's token", plural: "healer's tokens", category: "quest", edible: false },
};

/** "1 oak log", "6 oak logs". */
export function itemCount(item: ItemId, n: number): string {
  return `${n} ${n === 1 ? ITEM_INFO[item].name : ITEM_INFO[item].plural}`;
}

// The three agents of Core-3 and their starts (questworld.md, Archetypes).

import type { ItemId } from "./items.js";
import type { SkillId } from "./skills.js";

export const ARCHETYPES = ["woodsman", "herbalist", "angler"] as const;
export type ArchetypeId = (typeof ARCHETYPES)[number];

export interface ArchetypeInfo {
  /** Starting skill levels (XP starts at the level's threshold). */
  levels: Record<SkillId, number>;
  inventory: ItemId[];
  coins: number;
}

export const ARCHETYPE_INFO: Record<ArchetypeId, ArchetypeInfo> = {
  woodsman: { levels: { woodcutting: 3, foraging: 1, fishing: 1, cooking: 1 }, inventory: ["axe"], coins: 10 },
  herbalist: { levels: { woodcutting: 1, foraging: 4, fishing: 1, cooking: 2 }, inventory: ["sickle"], coins: 10 },
  angler: { levels: { woodcutting: 1, foraging: 1, fishing: 3, cooking: 3 }, inventory: ["rod"], coins: 10 },
};

export function isArchetype(x: unknown): x is ArchetypeId {
  return typeof x === "string" && (ARCHETYPES as readonly string[]).includes(x);
}

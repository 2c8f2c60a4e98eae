// Seeded starts (questworld.md, "Determinism, states and seeds"): any valid state can
// start an episode, e.g. the wall — quest 1 done, quest 2 accepted, foraging 1.

import { ARCHETYPE_INFO, type ArchetypeId } from "./archetypes.js";
import type { ItemId } from "./items.js";
import { QUESTS, type QuestId, QUEST_REWARDS } from "./quests.js";
import { SKILLS, type SkillId, xpForLevel } from "./skills.js";
import { type Limits, type QuestworldState, initialState, validateState } from "./state.js";
import type { PlaceId } from "./world.js";

export interface StartOverrides {
  place?: PlaceId;
  coins?: number;
  inventory?: ItemId[];
  /** Skill levels; XP is set to the level's threshold. */
  levels?: Partial<Record<SkillId, number>>;
  /** Exact XP (wins over `levels`). */
  xp?: Partial<Record<SkillId, number>>;
  /** Quest stages; a quest with stage ≥ 1 counts as offered. */
  stages?: Partial<Record<QuestId, number>>;
  limits?: Partial<Limits>;
}

/** An archetype's start with fields replaced; validated (throws QuestworldStateError on a bad combination). */
export function seededStart(archetype: ArchetypeId, seed: number, overrides: StartOverrides = {}): QuestworldState {
  const s = initialState(archetype, seed, overrides.limits);
  if (overrides.place) s.place = overrides.place;
  if (overrides.coins !== undefined) s.coins = overrides.coins;
  if (overrides.inventory) s.inventory = [...overrides.inventory];
  for (const k of SKILLS) {
    const level = overrides.levels?.[k];
    if (level !== undefined) s.xp[k] = xpForLevel(level);
    const xp = overrides.xp?.[k];
    if (xp !== undefined) s.xp[k] = xp;
  }
  for (const q of QUESTS) {
    const st = overrides.stages?.[q];
    if (st !== undefined) s.quests[q] = { stage: st, offered: st > 0 };
  }
  validateState(s);
  return s;
}

/**
 * The wall of quest 2: Timber for the Mill finished (woodcutting 4 plus its reward XP,
 * an axe bought if the archetype had none, the coin reward), The Healer's Remedy accepted,
 * standing at the apothecary, foraging at `foragingLevel` (default 1, the spec's example).
 */
export function wallState(archetype: ArchetypeId, seed = 0, foragingLevel = 1): QuestworldState {
  const info = ARCHETYPE_INFO[archetype];
  const boughtAxe = !info.inventory.includes("axe");
  const reward = QUEST_REWARDS.timber_for_the_mill;
  return seededStart(archetype, seed, {
    place: "apothecary",
    coins: info.coins + reward.coins - (boughtAxe ? 15 : 0),
    inventory: boughtAxe ? [...info.inventory, "axe"] : [...info.inventory],
    xp: {
      woodcutting: Math.max(xpForLevel(info.levels.woodcutting), xpForLevel(4)) + (reward.xp.woodcutting ?? 0),
      foraging: xpForLevel(foragingLevel),
    },
    stages: { timber_for_the_mill: 3, healers_remedy: 1 },
  });
}

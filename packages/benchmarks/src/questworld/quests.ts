// The quest chain (questworld.md, Quests). A quest's score is the stage reached;
// stage 0 = not accepted, finished = its stage count. Three quests, 10 stages in all.

import type { ItemId } from "./items.js";
import type { NpcId } from "./world.js";

export const QUESTS = ["timber_for_the_mill", "healers_remedy", "supper_at_the_lighthouse"] as const;
export type QuestId = (typeof QUESTS)[number];

export interface QuestInfo {
  title: string;
  giver: NpcId;
  /** Quest that must be finished before this one can be accepted. */
  requires: QuestId | null;
  /** One short label per stage, in order (stage k's label is stages[k − 1]). */
  stages: string[];
}

export const QUEST_INFO: Record<QuestId, QuestInfo> = {
  timber_for_the_mill: {
    title: "Timber for the Mill",
    giver: "oda",
    requires: null,
    stages: ["accepted from Warden Oda", "6 oak logs to Miller Bram", "4 birch logs to Miller Bram"],
  },
  healers_remedy: {
    title: "The Healer's Remedy",
    giver: "ysolde",
    requires: "timber_for_the_mill",
    stages: ["accepted from Healer Ysolde", "3 moonpetals to Ysolde (the wall)", "2 sunroot + 2 mint to Ysolde"],
  },
  supper_at_the_lighthouse: {
    title: "Supper at the Lighthouse",
    giver: "hanne",
    requires: "healers_remedy",
    stages: [
      "accepted from Cook Hanne",
      "5 cooked sprats to Hanne (lighthouse pie)",
      "passed the lighthouse gate",
      "lighthouse pie to Keeper Lund",
    ],
  },
};

export function stageCount(quest: QuestId): number {
  return QUEST_INFO[quest].stages.length;
}

/** Stages per archetype over the whole chain (10). */
export const STAGES_PER_AGENT = QUESTS.reduce((n, q) => n + stageCount(q), 0);

/** Items each hand-in takes (all or nothing), keyed by the stage it completes. */
export const HAND_INS: Record<QuestId, Partial<Record<number, Partial<Record<ItemId, number>>>>> = {
  timber_for_the_mill: { 2: { oak_log: 6 }, 3: { birch_log: 4 } },
  healers_remedy: { 2: { moonpetal: 3 }, 3: { sunroot: 2, mint: 2 } },
  supper_at_the_lighthouse: { 2: { cooked_sprat: 5 }, 4: { lighthouse_pie: 1 } },
};

/** Final rewards. The spec names the coins and skill for quests 1–2 but not the XP amounts, and no reward for quest 3. */
export const QUEST_REWARDS: Record<
  QuestId,
  { coins: number; xp: Partial<Record<"woodcutting" | "foraging", number>> }
> = {
  timber_for_the_mill: { coins: 30, xp: { woodcutting: 100 } },
  healers_remedy: { coins: 25, xp: { foraging: 150 } },
  supper_at_the_lighthouse: { coins: 0, xp: {} },
};

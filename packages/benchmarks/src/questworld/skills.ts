// Skills and the XP table (questworld.md, World: "level n needs 25·n·(n−1) XP").

export const SKILLS = ["woodcutting", "foraging", "fishing", "cooking"] as const;
export type SkillId = (typeof SKILLS)[number];

/** Total XP needed to be at `level` (level 1 needs 0, 2 needs 50, 3 needs 150, 4 needs 300, 5 needs 500). */
export function xpForLevel(level: number): number {
  return 25 * level * (level - 1);
}

/** The level reached with `xp` total XP: the largest n with 25·n·(n−1) ≤ xp. */
export function levelForXp(xp: number): number {
  // Closed form of 25n² − 25n − xp = 0, then corrected for float rounding.
  let n = Math.max(1, Math.floor((1 + Math.sqrt(1 + (4 * xp) / 25)) / 2));
  while (xpForLevel(n + 1) <= xp) n++;
  while (n > 1 && xpForLevel(n) > xp) n--;
  return n;
}

/** Gathering success chance (questworld.md): min(0.95, 0.4 + 0.1·(level − required)). */
export function gatherChance(level: number, required: number): number {
  return Math.min(0.95, 0.4 + 0.1 * (level - required));
}

// ARP "Acquire": the success-only SFT corpus. Successful episodes only (rollout's isSuccessful),
// at most `capPerEnv` per environment drawn by a seeded shuffle (per-game balance: one easy game
// cannot dominate), then a seeded holdout fraction split off for evaluation loss.
import { type Trajectory, isSuccessful, trajectoryMessages } from "@kiln/rollout";
import { epochOrder } from "../trainer/trainer.js";
import type { Conversation } from "../trainer/chat-batches.js";
import { RecipeError } from "../errors.js";

export { isSuccessful };

export interface SuccessSetOptions {
  /** Keep at most this many episodes per environment id (default: no cap). */
  capPerEnv?: number;
  /** Whether an episode counts as a success (default rollout's isSuccessful). */
  isSuccess?: (t: Trajectory) => boolean;
  /** Seed of the per-environment draw and the holdout split (default 42). */
  seed?: number;
  /** The training documents of a kept episode (default: its whole conversation). */
  documents?: (t: Trajectory) => Conversation[];
}

/** The successful episodes' conversations, capped per environment (a seeded draw when over the cap). */
export function successOnlySftSet(
  trajectories: readonly Trajectory[],
  options: SuccessSetOptions = {},
): Conversation[] {
  const cap = options.capPerEnv ?? Number.POSITIVE_INFINITY;
  if (!(cap >= 1)) throw new RecipeError(`successOnlySftSet: capPerEnv must be >= 1, got ${cap}`);
  const ok = options.isSuccess ?? isSuccessful;
  const byEnv = new Map<string, Trajectory[]>();
  for (const t of trajectories) {
    if (t.players || !ok(t)) continue;
    const list = byEnv.get(t.environment.id) ?? [];
    list.push(t);
    byEnv.set(t.environment.id, list);
  }
  const out: Conversation[] = [];
  let envIndex = 0;
  for (const list of byEnv.values()) {
    const picked =
      list.length <= cap
        ? list
        : [...epochOrder(list.length, options.seed ?? 42, envIndex, true)]
            .slice(0, cap)
            .sort((a, b) => a - b)
            .map((i) => list[i]);
    for (const t of picked)
      out.push(...(options.documents?.(t) ?? [{ messages: trajectoryMessages(t), tools: t.tools }]));
    envIndex++;
  }
  return out;
}

/** Seeded split of a corpus: `fraction` of it (at least one item when there are two or more) held out. */
export function holdoutSplit<T>(items: readonly T[], fraction: number, seed = 42): { train: T[]; holdout: T[] } {
  if (!(fraction >= 0 && fraction < 1)) throw new RecipeError(`holdout fraction must be in [0, 1), got ${fraction}`);
  const k = fraction === 0 || items.length < 2 ? 0 : Math.max(1, Math.round(items.length * fraction));
  const order = epochOrder(items.length, seed, 1000, true);
  const held = new Set(Array.from(order.slice(0, k)));
  return { train: items.filter((_, i) => !held.has(i)), holdout: items.filter((_, i) => held.has(i)) };
}

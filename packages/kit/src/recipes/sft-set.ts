// ARP "Acquire": the success-only SFT set. Only episodes that succeeded are kept, at most
// `capPerEnv` per environment (architecture.md: "success-only SFT set (per-game cap)"), so one
// easy game cannot dominate the mix.
import { type Trajectory, trajectoryMessages } from "@kiln/rollout";
import type { Conversation } from "./batches.js";
import { RecipeError } from "./errors.js";

export interface SuccessSetOptions {
  /** Keep at most this many episodes per environment id (default: no cap). */
  capPerEnv?: number;
  /**
   * Whether an episode counts as a success. Default: `outcome.scores.success > 0` when the
   * environment reports it, else `outcome.score > 0`; errored episodes never count.
   */
  isSuccess?: (t: Trajectory) => boolean;
}

export function isSuccessful(t: Trajectory): boolean {
  if (t.outcome.status === "error") return false;
  const s = t.outcome.scores.success;
  return s !== undefined ? s > 0 : t.outcome.score > 0;
}

/** The successful episodes' conversations, in input order, capped per environment. */
export function successOnlySftSet(
  trajectories: readonly Trajectory[],
  options: SuccessSetOptions = {},
): Conversation[] {
  const cap = options.capPerEnv ?? Number.POSITIVE_INFINITY;
  if (!(cap >= 1)) throw new RecipeError(`successOnlySftSet: capPerEnv must be >= 1, got ${cap}`);
  const ok = options.isSuccess ?? isSuccessful;
  const taken = new Map<string, number>();
  const out: Conversation[] = [];
  for (const t of trajectories) {
    if (t.players || !ok(t)) continue;
    const n = taken.get(t.environment.id) ?? 0;
    if (n >= cap) continue;
    taken.set(t.environment.id, n + 1);
    out.push({ messages: trajectoryMessages(t), tools: t.tools });
  }
  return out;
}

// The experiment flags of codenames (`flags` in instances.json; clembench `codenames/players.py`).
import { InstanceError } from "../../errors.js";

export const FLAG_NAMES = [
  "IGNORE RAMBLING",
  "IGNORE FALSE TARGETS OR GUESSES",
  "REPROMPT ON ERROR",
  "STRIP WORDS",
  "IGNORE NUMBER OF TARGETS",
] as const;
export type FlagName = (typeof FLAG_NAMES)[number];
export type CodenamesFlags = Record<FlagName, boolean>;

/** Validate an experiment's `flags` (all five booleans; the reference raises KeyError on a missing one). */
export function parseFlags(raw: unknown, where: string): CodenamesFlags {
  if (!raw || typeof raw !== "object") throw new InstanceError(`${where}: "flags" must be an object`);
  const flags = raw as Record<string, unknown>;
  for (const name of FLAG_NAMES)
    if (typeof flags[name] !== "boolean") throw new InstanceError(`${where}: flag "${name}" must be a boolean`);
  return flags as CodenamesFlags;
}

/** `flags_engaged`: a counter per flag, in the experiment's key order. */
export function zeroCounts(flags: CodenamesFlags): Record<string, number> {
  return Object.fromEntries(Object.keys(flags).map((k) => [k, 0]));
}

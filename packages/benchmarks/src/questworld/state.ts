// The full world state as plain JSON (questworld.md, "Determinism, states and seeds"):
// position, inventory, XP, quest stages, PRNG state, counters and limits. Any valid
// state can be saved, restored and used as a seeded start.

import { ARCHETYPE_INFO, type ArchetypeId, isArchetype } from "./archetypes.js";
import { QuestworldStateError } from "./errors.js";
import { ITEMS, type ItemId } from "./items.js";
import { type PrngState, seedPrng } from "./prng.js";
import { QUESTS, type QuestId, stageCount } from "./quests.js";
import { SKILLS, type SkillId, xpForLevel } from "./skills.js";
import { PLACES, type PlaceId } from "./world.js";

export const STATE_VERSION = 1;
/** Inventory slots (questworld.md: "Inventory: 20 slots"). */
export const INVENTORY_SLOTS = 20;

export interface Limits {
  /** Tool calls per agent (questworld.md says 200; see DEFAULT_LIMITS). */
  toolCalls: number;
  /** Ticks per agent (questworld.md: 2,000). */
  ticks: number;
  /** Consecutive malformed calls that abort the episode (questworld.md: N, default 5). */
  malformedInARow: number;
}

/** The budget questworld.md states: 200 tool calls or 2,000 ticks, 5 malformed calls in a row. */
export const SPEC_LIMITS: Readonly<Limits> = Object.freeze({ toolCalls: 200, ticks: 2000, malformedInARow: 5 });

/**
 * The default budget: the spec's, except 300 tool calls instead of 200. With the spec's
 * XP table and gathering odds the chain needs ~180 gather attempts for an archetype that
 * levels two skills from 1, so 200 calls cannot be met: the expert needs on average
 * 193 (woodsman), 164 (herbalist), 228 (angler) calls, at most 290 over 1,000 seeds each.
 * The spec also requires the expert to score 30/30, so the call budget is the number that
 * gives. Pass `limits: SPEC_LIMITS` to run with the spec's figure.
 */
export const DEFAULT_LIMITS: Readonly<Limits> = Object.freeze({ toolCalls: 300, ticks: 2000, malformedInARow: 5 });

export interface QuestProgress {
  /** Stages completed (0 = not accepted). */
  stage: number;
  /** The giver has offered the quest (talk first, then accept). */
  offered: boolean;
}

export interface Counters {
  toolCalls: number;
  ticks: number;
  /** Malformed calls over the episode (unparseable, unknown tool, schema violation, no call). */
  malformed: number;
  malformedInARow: number;
  /** Well-formed calls the rules refused (wrong place, missing item or level, …). */
  errors: number;
}

export type EpisodeStatus = "running" | "finished" | "out_of_budget" | "aborted";

export interface QuestworldState {
  version: typeof STATE_VERSION;
  archetype: ArchetypeId;
  place: PlaceId;
  coins: number;
  /** One entry per occupied slot; items do not stack. */
  inventory: ItemId[];
  xp: Record<SkillId, number>;
  quests: Record<QuestId, QuestProgress>;
  rng: PrngState;
  counters: Counters;
  limits: Limits;
  status: EpisodeStatus;
}

/** The start of an archetype (questworld.md, Archetypes): village, its tools, coins and levels. */
export function initialState(archetype: ArchetypeId, seed: number, limits: Partial<Limits> = {}): QuestworldState {
  if (!isArchetype(archetype)) {
    throw new QuestworldStateError(
      `archetype ${JSON.stringify(archetype)}: must be one of woodsman, herbalist, angler`,
    );
  }
  checkSeed(seed);
  const info = ARCHETYPE_INFO[archetype];
  const xp = {} as Record<SkillId, number>;
  for (const s of SKILLS) xp[s] = xpForLevel(info.levels[s]);
  const quests = {} as Record<QuestId, QuestProgress>;
  for (const q of QUESTS) quests[q] = { stage: 0, offered: false };
  const state: QuestworldState = {
    version: STATE_VERSION,
    archetype,
    place: "village",
    coins: info.coins,
    inventory: [...info.inventory],
    xp,
    quests,
    rng: seedPrng(seed),
    counters: { toolCalls: 0, ticks: 0, malformed: 0, malformedInARow: 0, errors: 0 },
    limits: { ...DEFAULT_LIMITS, ...limits },
    status: "running",
  };
  validateState(state);
  return state;
}

export function checkSeed(seed: unknown): asserts seed is number {
  if (typeof seed !== "number" || !Number.isSafeInteger(seed)) {
    throw new QuestworldStateError(`seed ${String(seed)}: must be a safe integer`);
  }
}

/** A deep copy (states are plain JSON). */
export function cloneState(state: QuestworldState): QuestworldState {
  return structuredClone(state);
}

function fail(path: string, rule: string): never {
  throw new QuestworldStateError(`state.${path}: ${rule}`);
}

function isNonNegInt(x: unknown): x is number {
  return typeof x === "number" && Number.isSafeInteger(x) && x >= 0;
}

function isUint32(x: unknown): boolean {
  return typeof x === "number" && Number.isInteger(x) && x >= 0 && x <= 0xffff_ffff;
}

/** Check every field of a state; throws QuestworldStateError naming the field and the rule. */
export function validateState(state: unknown): asserts state is QuestworldState {
  if (typeof state !== "object" || state === null || Array.isArray(state)) {
    throw new QuestworldStateError("state: must be a JSON object");
  }
  const s = state as Record<string, unknown>;
  if (s.version !== STATE_VERSION) fail("version", `must be ${STATE_VERSION}`);
  if (!isArchetype(s.archetype)) fail("archetype", "must be one of woodsman, herbalist, angler");
  if (!(PLACES as readonly unknown[]).includes(s.place)) fail("place", `must be one of ${PLACES.join(", ")}`);
  if (!isNonNegInt(s.coins)) fail("coins", "must be a non-negative integer");
  if (!Array.isArray(s.inventory)) fail("inventory", "must be an array of item ids");
  if (s.inventory.length > INVENTORY_SLOTS) fail("inventory", `holds at most ${INVENTORY_SLOTS} items`);
  s.inventory.forEach((it, i) => {
    if (!(ITEMS as readonly unknown[]).includes(it)) fail(`inventory[${i}]`, `unknown item ${JSON.stringify(it)}`);
  });
  const xp = s.xp as Record<string, unknown> | null;
  if (typeof xp !== "object" || xp === null) fail("xp", "must be an object of skill → XP");
  for (const k of SKILLS) if (!isNonNegInt(xp[k])) fail(`xp.${k}`, "must be a non-negative integer");
  for (const k of Object.keys(xp)) if (!(SKILLS as readonly string[]).includes(k)) fail(`xp.${k}`, "unknown skill");
  const quests = s.quests as Record<string, unknown> | null;
  if (typeof quests !== "object" || quests === null) fail("quests", "must be an object of quest → progress");
  for (const q of QUESTS) {
    const p = quests[q] as Record<string, unknown> | null | undefined;
    if (typeof p !== "object" || p === null) fail(`quests.${q}`, "must be { stage, offered }");
    if (!isNonNegInt(p.stage) || p.stage > stageCount(q))
      fail(`quests.${q}.stage`, `must be an integer in 0..${stageCount(q)}`);
    if (typeof p.offered !== "boolean") fail(`quests.${q}.offered`, "must be a boolean");
  }
  for (const k of Object.keys(quests))
    if (!(QUESTS as readonly string[]).includes(k)) fail(`quests.${k}`, "unknown quest");
  // A later quest can only have started once the one before it is finished.
  for (let i = 1; i < QUESTS.length; i++) {
    const prev = QUESTS[i - 1];
    const st = (quests[QUESTS[i]] as QuestProgress).stage;
    if (st > 0 && (quests[prev] as QuestProgress).stage < stageCount(prev)) {
      fail(`quests.${QUESTS[i]}.stage`, `must be 0 while ${prev} is unfinished`);
    }
  }
  const rng = s.rng as Record<string, unknown> | null;
  if (typeof rng !== "object" || rng === null) fail("rng", "must be { seed, s }");
  if (typeof rng.seed !== "number" || !Number.isSafeInteger(rng.seed)) fail("rng.seed", "must be a safe integer");
  if (!Array.isArray(rng.s) || rng.s.length !== 4 || !rng.s.every(isUint32)) {
    fail("rng.s", "must be four unsigned 32-bit integers");
  }
  if ((rng.s as number[]).every((w) => w === 0)) fail("rng.s", "must not be all zero");
  const c = s.counters as Record<string, unknown> | null;
  if (typeof c !== "object" || c === null) fail("counters", "must be an object");
  for (const k of ["toolCalls", "ticks", "malformed", "malformedInARow", "errors"]) {
    if (!isNonNegInt(c[k])) fail(`counters.${k}`, "must be a non-negative integer");
  }
  const l = s.limits as Record<string, unknown> | null;
  if (typeof l !== "object" || l === null) fail("limits", "must be an object");
  for (const k of ["toolCalls", "ticks", "malformedInARow"]) {
    if (!isNonNegInt(l[k]) || (l[k] as number) < 1) fail(`limits.${k}`, "must be a positive integer");
  }
  if (!["running", "finished", "out_of_budget", "aborted"].includes(s.status as string)) {
    fail("status", "must be running, finished, out_of_budget or aborted");
  }
  // The lighthouse lies behind the gate, which opens at quest 3 stage ≥ 2.
  if (s.place === "lighthouse" && (quests.supper_at_the_lighthouse as QuestProgress).stage < 2) {
    fail("place", "lighthouse is behind the locked gate (needs supper_at_the_lighthouse stage ≥ 2)");
  }
}

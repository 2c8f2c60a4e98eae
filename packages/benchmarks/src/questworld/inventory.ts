// Inventory rules (questworld.md, World): 20 slots, no stacking except coins;
// a hand-in checks free slots for its rewards before taking anything, and is all-or-nothing.

import type { ItemId } from "./items.js";
import { INVENTORY_SLOTS, type QuestworldState } from "./state.js";

export function countOf(state: QuestworldState, item: ItemId): number {
  let n = 0;
  for (const it of state.inventory) if (it === item) n++;
  return n;
}

export function freeSlots(state: QuestworldState): number {
  return INVENTORY_SLOTS - state.inventory.length;
}

/** Adds `n` items; the caller has checked there is room. */
export function addItems(state: QuestworldState, item: ItemId, n = 1): void {
  for (let i = 0; i < n; i++) state.inventory.push(item);
}

/** Removes `n` items, newest first; the caller has checked they are there. */
export function removeItems(state: QuestworldState, item: ItemId, n = 1): void {
  let left = n;
  for (let i = state.inventory.length - 1; i >= 0 && left > 0; i--) {
    if (state.inventory[i] === item) {
      state.inventory.splice(i, 1);
      left--;
    }
  }
}

/** Item → count, in first-seen order. */
export function inventoryCounts(state: QuestworldState): Partial<Record<ItemId, number>> {
  const out: Partial<Record<ItemId, number>> = {};
  for (const it of state.inventory) out[it] = (out[it] ?? 0) + 1;
  return out;
}

export type HandInCheck =
  | { ok: true }
  | { ok: false; reason: "missing"; item: ItemId; need: number; have: number }
  | { ok: false; reason: "no_room"; need: number; free: number };

/**
 * Check a hand-in without changing anything: every required item present, and room for
 * `rewardSlots` new items counted on the inventory as it is now, before anything is taken.
 */
export function checkHandIn(
  state: QuestworldState,
  needs: Partial<Record<ItemId, number>>,
  rewardSlots: number,
): HandInCheck {
  for (const [item, need] of Object.entries(needs) as [ItemId, number][]) {
    const have = countOf(state, item);
    if (have < need) return { ok: false, reason: "missing", item, need, have };
  }
  const free = freeSlots(state);
  if (free < rewardSlots) return { ok: false, reason: "no_room", need: rewardSlots, free };
  return { ok: true };
}

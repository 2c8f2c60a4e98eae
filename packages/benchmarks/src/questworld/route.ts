// Shortest routes over the map for the expert: fewest moves first (each move costs a
// tool call, the tighter budget), then fewest ticks; the locked gate is respected.

import { isLinkLocked } from "./rules.js";
import type { QuestworldState } from "./state.js";
import { PLACES, type PlaceId, exitsOf } from "./world.js";

/** Places to walk through from `state.place` to `to` (excluding the start); null when unreachable. */
export function route(state: QuestworldState, to: PlaceId): PlaceId[] | null {
  const from = state.place;
  if (from === to) return [];
  // Dijkstra on (moves, ticks), lexicographic; the graph has 10 nodes.
  const best = new Map<PlaceId, { moves: number; ticks: number; prev: PlaceId | null }>();
  best.set(from, { moves: 0, ticks: 0, prev: null });
  const done = new Set<PlaceId>();
  while (done.size < PLACES.length) {
    let cur: PlaceId | null = null;
    for (const [p, c] of best) {
      if (done.has(p)) continue;
      const b = cur ? best.get(cur)! : null;
      if (!b || c.moves < b.moves || (c.moves === b.moves && c.ticks < b.ticks)) cur = p;
    }
    if (!cur) break;
    done.add(cur);
    const c = best.get(cur)!;
    for (const e of exitsOf(cur)) {
      if (isLinkLocked(state, cur, e.place)) continue;
      const cand = { moves: c.moves + 1, ticks: c.ticks + e.ticks, prev: cur };
      const old = best.get(e.place);
      if (!old || cand.moves < old.moves || (cand.moves === old.moves && cand.ticks < old.ticks))
        best.set(e.place, cand);
    }
  }
  if (!best.has(to)) return null;
  const path: PlaceId[] = [];
  for (let p: PlaceId | null = to; p && p !== from; p = best.get(p)!.prev) path.unshift(p);
  return path;
}

import { createHash } from "node:crypto";
import type { RetailDb } from "./db.js";
import { compareCodePoints, pyJsonDumps, pyJsonString } from "./python-compat.js";

// tau2 compares DBs by `sha256(json.dumps(db.model_dump(), sort_keys=True, default=str))`
// (src/tau2/utils/utils.py get_dict_hash, environment/toolkit.py get_db_hash). We write the
// same bytes: sorted keys, ", " / ": " separators, ASCII escapes, Python float repr.

const recordJson = new WeakMap<object, string>();

function cachedRecordJson(rec: object, cacheable: boolean): string {
  if (cacheable) {
    const hit = recordJson.get(rec);
    if (hit !== undefined) return hit;
  }
  const s = pyJsonDumps(rec, { sortKeys: true });
  if (cacheable) recordJson.set(rec, s);
  return s;
}

/** The exact string upstream hashes for this DB. */
export function canonicalDbJson(db: RetailDb): string {
  const base = db.baseRecords();
  if (base.sorted === undefined) {
    const sortIds = (m: Map<string, unknown>) => Array.from(m.keys()).sort(compareCodePoints);
    base.sorted = { products: sortIds(base.products), users: sortIds(base.users), orders: sortIds(base.orders) };
  }
  const parts: string[] = [];
  // One table: `"id": record` in sorted id order, the overlay's record where the episode changed it.
  const table = (ids: string[], records: Map<string, unknown>, overridden: (id: string) => object | undefined) =>
    ids.forEach((id, i) => {
      const over = overridden(id);
      parts.push(
        i > 0 ? ", " : "",
        pyJsonString(id),
        ": ",
        cachedRecordJson(over ?? (records.get(id) as object), over === undefined),
      );
    });
  parts.push('{"orders": {');
  table(base.sorted.orders, base.orders, (id) => db.overriddenOrder(id));
  parts.push('}, "products": {');
  table(base.sorted.products, base.products, () => undefined);
  parts.push('}, "users": {');
  table(base.sorted.users, base.users, (id) => db.overriddenUser(id));
  parts.push("}}");
  return parts.join("");
}

// States are memoised per base by their overridden records' canonical JSON, which determines the
// whole canonical string (the rest is the base). Grading hashes the gold state once per task and
// the predicted state once per episode; the two often coincide.
const memo = new WeakMap<object, Map<string, string>>();
const MEMO_LIMIT = 2048;

function overlaySignature(db: RetailDb): string {
  const ids = db.overriddenIds();
  const parts: string[] = [];
  for (const id of ids.orders) parts.push(`o${id}\u0000${cachedRecordJson(db.overriddenOrder(id) as object, false)}`);
  for (const id of ids.users) parts.push(`u${id}\u0000${cachedRecordJson(db.overriddenUser(id) as object, false)}`);
  return parts.join("\u0001");
}

/** sha256 hex of the canonical JSON — equal to upstream's `get_db_hash()` for the same state. */
export function hashRetailDb(db: RetailDb): string {
  const base = db.baseRecords();
  let perBase = memo.get(base);
  if (perBase === undefined) {
    perBase = new Map();
    memo.set(base, perBase);
  }
  const sig = overlaySignature(db);
  const hit = perBase.get(sig);
  if (hit !== undefined) return hit;
  const h = createHash("sha256").update(canonicalDbJson(db), "utf8").digest("hex");
  if (perBase.size >= MEMO_LIMIT) perBase.clear();
  perBase.set(sig, h);
  return h;
}

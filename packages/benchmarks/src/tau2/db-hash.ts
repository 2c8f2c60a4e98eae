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
  const parts: string[] = ['{"orders": {'];
  base.sorted.orders.forEach((id, i) => {
    const over = db.overriddenOrder(id);
    parts.push(
      i > 0 ? ", " : "",
      pyJsonString(id),
      ": ",
      cachedRecordJson(over ?? (base.orders.get(id) as object), over === undefined),
    );
  });
  parts.push('}, "products": {');
  base.sorted.products.forEach((id, i) => {
    parts.push(i > 0 ? ", " : "", pyJsonString(id), ": ", cachedRecordJson(base.products.get(id) as object, true));
  });
  parts.push('}, "users": {');
  base.sorted.users.forEach((id, i) => {
    const over = db.overriddenUser(id);
    parts.push(
      i > 0 ? ", " : "",
      pyJsonString(id),
      ": ",
      cachedRecordJson(over ?? (base.users.get(id) as object), over === undefined),
    );
  });
  parts.push("}}");
  return parts.join("");
}

/** sha256 hex of the canonical JSON — equal to upstream's `get_db_hash()` for the same state. */
export function hashRetailDb(db: RetailDb): string {
  return createHash("sha256").update(canonicalDbJson(db), "utf8").digest("hex");
}

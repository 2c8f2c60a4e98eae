import { readFileSync } from "node:fs";
import { join } from "node:path";
import { resolveDataDir } from "./data-dir.js";
import { Tau2Error } from "./errors.js";

// The retail database (tau2 data/tau2/domains/retail/db.json; schema in
// src/tau2/domains/retail/data_model.py). Records keep the field order of the pydantic models,
// because tool results are `json.dumps(model.model_dump())` without sort_keys.

export interface Variant {
  item_id: string;
  options: Record<string, string>;
  available: boolean;
  price: number;
}

export interface Product {
  name: string;
  product_id: string;
  /**
   * item_id → Variant, in db.json order. A Map because JS objects would move the 10-digit
   * numeric keys into numeric order, and upstream prints variants in file order.
   */
  variants: Map<string, Variant>;
}

export interface Address {
  address1: string;
  address2: string;
  city: string;
  country: string;
  state: string;
  zip: string;
}

export interface CreditCard {
  source: "credit_card";
  id: string;
  brand: string;
  last_four: string;
}
export interface Paypal {
  source: "paypal";
  id: string;
}
export interface GiftCard {
  source: "gift_card";
  id: string;
  balance: number;
}
export type PaymentMethod = CreditCard | Paypal | GiftCard;

export interface User {
  user_id: string;
  name: { first_name: string; last_name: string };
  address: Address;
  email: string;
  payment_methods: Record<string, PaymentMethod>;
  orders: string[];
}

export interface OrderItem {
  name: string;
  product_id: string;
  item_id: string;
  price: number;
  options: Record<string, string>;
}

export type OrderStatus =
  | "processed"
  | "pending"
  | "pending (item modified)"
  | "delivered"
  | "cancelled"
  | "exchange requested"
  | "return requested";

export interface Order {
  order_id: string;
  user_id: string;
  address: Address;
  items: OrderItem[];
  status: OrderStatus;
  fulfillments: { tracking_id: string[]; item_ids: string[] }[];
  payment_history: { transaction_type: "payment" | "refund"; amount: number; payment_method_id: string }[];
  cancel_reason: string | null;
  exchange_items: string[] | null;
  exchange_new_items: string[] | null;
  exchange_payment_method_id: string | null;
  exchange_price_difference: number | null;
  return_items: string[] | null;
  return_payment_method_id: string | null;
}

/** The plain-JSON form of the whole database (`RetailDB.model_dump()`). */
export interface RetailDbData {
  products: Record<string, Product>;
  users: Record<string, User>;
  orders: Record<string, Order>;
}

/** Optional Order fields: absent on disk, None after load (data_model.py Order). */
export const ORDER_OPTIONAL_FIELDS = [
  "cancel_reason",
  "exchange_items",
  "exchange_new_items",
  "exchange_payment_method_id",
  "exchange_price_difference",
  "return_items",
  "return_payment_method_id",
] as const;

const ORDER_FIELDS = ["order_id", "user_id", "address", "items", "status", "fulfillments", "payment_history"];
const ORDER_STATUSES = new Set<string>([
  "processed",
  "pending",
  "pending (item modified)",
  "delivered",
  "cancelled",
  "exchange requested",
  "return requested",
]);

const KEY_MARK = "~id~";

type RawProduct = { name: string; product_id: string; variants: Record<string, Variant> | Map<string, Variant> };
type RawDb = { products: Record<string, RawProduct>; users: Record<string, User>; orders: Record<string, Order> };

/** Changed records of a database relative to its base: the plain-JSON state of an episode. */
export interface RetailDbDelta {
  users?: Record<string, User>;
  orders?: Record<string, Order>;
}

interface Base {
  products: Map<string, Product>;
  users: Map<string, User>;
  orders: Map<string, Order>;
  sorted?: { products: string[]; users: string[]; orders: string[] };
}

/**
 * The retail DB with copy-on-write records. A fresh environment forks the loaded base in
 * O(1); a tool asks for `orderForWrite`/`userForWrite` before mutating, which clones that one
 * record. Base records are never mutated, so their canonical JSON can be cached for hashing.
 * Products are never written by any retail tool.
 */
export class RetailDb {
  private readonly users = new Map<string, User>();
  private readonly orders = new Map<string, Order>();

  private constructor(private readonly base: Base) {}

  /** Parse and validate db.json text (unknown keys are rejected, as upstream's DB base class does). */
  static fromJson(text: string): RetailDb {
    // Numeric keys (product and item ids) get a marker so JSON.parse keeps their file order.
    const marked = text.replace(/"(\d+)"(\s*):/g, `"${KEY_MARK}$1"$2:`);
    const raw = JSON.parse(marked) as {
      products: Record<string, RawProduct>;
      users: Record<string, User>;
      orders: Record<string, Order>;
    };
    const unmark = (k: string) => (k.startsWith(KEY_MARK) ? k.slice(KEY_MARK.length) : k);
    for (const key of Object.keys(raw)) {
      if (key.startsWith(KEY_MARK))
        throw new Tau2Error(`retail db top level: extra field "${unmark(key)}" is not permitted`);
    }
    const products: Record<string, RawProduct> = {};
    const productOrder: string[] = [];
    for (const [k, p] of Object.entries(raw.products ?? {})) {
      productOrder.push(unmark(k));
      products[unmark(k)] = p;
    }
    return RetailDb.build({ products, users: raw.users, orders: raw.orders } as unknown as RawDb, productOrder, unmark);
  }

  /** From plain data (variants as objects or Maps; object keys lose numeric order). */
  static fromData(data: RetailDbData | RawDb): RetailDb {
    return RetailDb.build(data as RawDb, Object.keys(data.products), (k) => k);
  }

  private static build(data: RawDb, productOrder: string[], unmark: (k: string) => string): RetailDb {
    validateDb(data);
    const products = new Map<string, Product>();
    for (const id of productOrder) {
      const p = data.products[id];
      const entries = p.variants instanceof Map ? Array.from(p.variants) : Object.entries(p.variants);
      products.set(id, {
        name: p.name,
        product_id: p.product_id,
        variants: new Map(entries.map(([k, v]) => [unmark(k), v])),
      });
    }
    const orders = new Map<string, Order>();
    for (const [id, o] of Object.entries(data.orders)) orders.set(id, normalizeOrder(o));
    return new RetailDb({ products, users: new Map(Object.entries(data.users)), orders });
  }

  /** A fresh copy-on-write view of the same base (the initial DB state). */
  fresh(): RetailDb {
    return new RetailDb(this.base);
  }

  /** A copy-on-write view carrying this view's changes, isolated from further writes here. */
  fork(): RetailDb {
    const db = new RetailDb(this.base);
    db.applyDelta(this.delta());
    return db;
  }

  product(id: string): Product | undefined {
    return this.base.products.get(id);
  }
  user(id: string): User | undefined {
    return this.users.get(id) ?? this.base.users.get(id);
  }
  order(id: string): Order | undefined {
    return this.orders.get(id) ?? this.base.orders.get(id);
  }
  hasProduct(id: string): boolean {
    return this.base.products.has(id);
  }
  hasUser(id: string): boolean {
    return this.base.users.has(id);
  }
  hasOrder(id: string): boolean {
    return this.base.orders.has(id);
  }

  /** The order, cloned into this view on first write. */
  orderForWrite(id: string): Order {
    let o = this.orders.get(id);
    if (o === undefined) {
      const b = this.base.orders.get(id);
      if (b === undefined) throw new Tau2Error(`retail db: order "${id}" does not exist`);
      o = structuredClone(b);
      this.orders.set(id, o);
    }
    return o;
  }

  userForWrite(id: string): User {
    let u = this.users.get(id);
    if (u === undefined) {
      const b = this.base.users.get(id);
      if (b === undefined) throw new Tau2Error(`retail db: user "${id}" does not exist`);
      u = structuredClone(b);
      this.users.set(id, u);
    }
    return u;
  }

  /** Products in db.json (= Python dict) order. */
  *productEntries(): IterableIterator<[string, Product]> {
    yield* this.base.products.entries();
  }

  /** Users in db.json order, with this view's changes. */
  *userEntries(): IterableIterator<[string, User]> {
    for (const [id, u] of this.base.users) yield [id, this.users.get(id) ?? u];
  }

  *orderEntries(): IterableIterator<[string, Order]> {
    for (const [id, o] of this.base.orders) yield [id, this.orders.get(id) ?? o];
  }

  /** Records this view has cloned (possibly unchanged) — plain JSON. */
  delta(): RetailDbDelta {
    return {
      users: Object.fromEntries(Array.from(this.users, ([k, v]) => [k, structuredClone(v)])),
      orders: Object.fromEntries(Array.from(this.orders, ([k, v]) => [k, structuredClone(v)])),
    };
  }

  applyDelta(delta: RetailDbDelta): void {
    for (const [id, u] of Object.entries(delta.users ?? {})) {
      if (!this.base.users.has(id)) throw new Tau2Error(`retail db delta: user "${id}" is not in the base DB`);
      this.users.set(id, structuredClone(u));
    }
    for (const [id, o] of Object.entries(delta.orders ?? {})) {
      if (!this.base.orders.has(id)) throw new Tau2Error(`retail db delta: order "${id}" is not in the base DB`);
      this.orders.set(id, normalizeOrder(structuredClone(o)));
    }
  }

  /** The whole DB as plain JSON (`RetailDB.model_dump()`). */
  toData(): RetailDbData {
    return {
      products: Object.fromEntries(this.productEntries()),
      users: Object.fromEntries(this.userEntries()),
      orders: Object.fromEntries(this.orderEntries()),
    };
  }

  /** @internal for hashing: base maps and which records are overridden. */
  baseRecords(): Base {
    return this.base;
  }
  /** @internal */
  overriddenUser(id: string): User | undefined {
    return this.users.get(id);
  }
  /** @internal ids of the records this view has cloned, sorted. */
  overriddenIds(): { orders: string[]; users: string[] } {
    return { orders: Array.from(this.orders.keys()).sort(), users: Array.from(this.users.keys()).sort() };
  }
  /** @internal */
  overriddenOrder(id: string): Order | undefined {
    return this.orders.get(id);
  }
}

const cache = new Map<string, RetailDb>();

/** Load (once per data dir, then cached) the retail DB. Returns a fresh view each call. */
export function loadRetailDb(dataDir?: string): RetailDb {
  const dir = resolveDataDir(dataDir);
  let db = cache.get(dir);
  if (db === undefined) {
    db = RetailDb.fromJson(readFileSync(join(dir, "db.json"), "utf8"));
    cache.set(dir, db);
  }
  return db.fresh();
}

function normalizeOrder(o: Order): Order {
  const rec = o as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const k of ORDER_FIELDS) out[k] = rec[k];
  for (const k of ORDER_OPTIONAL_FIELDS) out[k] = rec[k] ?? null;
  return out as unknown as Order;
}

function checkKeys(where: string, obj: unknown, required: string[], optional: readonly string[] = []): void {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj))
    throw new Tau2Error(`retail db ${where}: must be an object`);
  const allowed = new Set([...required, ...optional]);
  for (const k of Object.keys(obj)) {
    if (!allowed.has(k)) throw new Tau2Error(`retail db ${where}: extra field "${k}" is not permitted`);
  }
  for (const k of required) {
    if (!(k in obj)) throw new Tau2Error(`retail db ${where}: field "${k}" is required`);
  }
}

function validateDb(data: RawDb): void {
  checkKeys("top level", data, ["products", "users", "orders"]);
  for (const [id, p] of Object.entries(data.products)) {
    checkKeys(`product ${id}`, p, ["name", "product_id", "variants"]);
    for (const [vid, v] of p.variants instanceof Map ? p.variants : Object.entries(p.variants)) {
      checkKeys(`product ${id} variant ${vid}`, v, ["item_id", "options", "available", "price"]);
    }
  }
  for (const [id, u] of Object.entries(data.users)) {
    checkKeys(`user ${id}`, u, ["user_id", "name", "address", "email", "payment_methods", "orders"]);
    for (const [pid, m] of Object.entries(u.payment_methods)) {
      const extra = m.source === "credit_card" ? ["brand", "last_four"] : m.source === "gift_card" ? ["balance"] : [];
      if (!["credit_card", "gift_card", "paypal"].includes(m.source)) {
        throw new Tau2Error(
          `retail db user ${id} payment method ${pid}: source "${m.source}" is not one of credit_card, gift_card, paypal`,
        );
      }
      checkKeys(`user ${id} payment method ${pid}`, m, ["source", "id", ...extra]);
    }
  }
  for (const [id, o] of Object.entries(data.orders)) {
    checkKeys(`order ${id}`, o, ORDER_FIELDS, ORDER_OPTIONAL_FIELDS);
    if (!ORDER_STATUSES.has(o.status))
      throw new Tau2Error(`retail db order ${id}: status "${o.status}" is not a valid order status`);
  }
}

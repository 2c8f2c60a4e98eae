import type { Address, GiftCard, Order, PaymentMethod, Product, RetailDb, User, Variant } from "./db.js";
import { ToolError } from "./errors.js";
import { pythonCalculate } from "./python-calc.js";
import { pyJsonDumps, pyMissingArgsText, pyRound2, pyStr, pyTypeName } from "./python-compat.js";
import { type Tau2TaskVersion, type ToolSpec, retailToolSpecs } from "./tool-specs.js";

// The 16 retail tools on the real DB, reproducing upstream's checks, their order, their error
// texts and their quirks (tau2 src/tau2/domains/retail/tools.py; spec tau2-retail.md §2).
// Gold actions are replayed through these same functions when grading, so a "fixed" port
// would disagree with upstream's gold DB hashes. Argument types are not validated upstream
// either; values flow into Python operations, whose behaviour on odd types is mimicked below.

/** A tool message as the environment returns it (tau2 ToolMessage content + error flag). */
export interface ToolOutcome {
  content: string;
  error: boolean;
}

/** A value used as a dict key in Python: str keys can match, lists/dicts are unhashable, others never match. */
function pyKey(key: unknown): string | undefined {
  if (typeof key === "string") return key;
  if (Array.isArray(key)) throw new ToolError("unhashable type: 'list'");
  if (key !== null && typeof key === "object") throw new ToolError("unhashable type: 'dict'");
  return undefined;
}

/** Python `key in dict` for a str-keyed dict. */
function has(obj: Record<string, unknown>, key: unknown): key is string {
  const k = pyKey(key);
  return k !== undefined && Object.hasOwn(obj, k);
}

/** Python iteration over an argument that should be a list (a str iterates its characters). */
function pyList(value: unknown): unknown[] {
  if (Array.isArray(value)) return value;
  if (typeof value === "string") return Array.from(value);
  if (value !== null && typeof value === "object") throw new ToolError("'dict' object has no attribute 'count'");
  throw new ToolError(`'${pyTypeName(value)}' object is not iterable`);
}

/** Python `==` between a JSON value and a str (only equal strings compare equal). */
const count = (list: unknown[], x: unknown) =>
  list.filter((y) => y === x || (typeof x !== "object" && pyEq(x, y))).length;
function pyEq(a: unknown, b: unknown): boolean {
  if (typeof a === "number" || typeof a === "boolean")
    return (typeof b === "number" || typeof b === "boolean") && Number(a) === Number(b);
  return a === b;
}

/** Python `sorted(list)`: str by code point; mixed types raise TypeError. */
function pySorted(list: unknown[]): string[] {
  const out = [...list];
  const allStr = out.every((x) => typeof x === "string");
  if (!allStr && out.length > 1) {
    const types = new Set(out.map(pyTypeName));
    if (types.size > 1) {
      const [t1, t2] = Array.from(types);
      throw new ToolError(`'<' not supported between instances of '${t2}' and '${t1}'`);
    }
  }
  return (out as string[]).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** `str.lower()` (ASCII data; JS toLowerCase matches Python for every character the DB holds). */
function lower(value: unknown): string {
  if (typeof value !== "string") throw new ToolError(`'${pyTypeName(value)}' object has no attribute 'lower'`);
  return value.toLowerCase();
}

/** A pydantic `UserAddress(...)`: str fields must be str (lax mode does not coerce numbers). */
function makeAddress(args: Record<string, unknown>): Address {
  const fields = ["address1", "address2", "city", "country", "state", "zip"] as const;
  const bad = fields.filter((f) => typeof args[f] !== "string");
  if (bad.length > 0) {
    const lines = bad.map(
      (f) =>
        `${f}\n  Input should be a valid string [type=string_type, input_value=${pyStr(args[f])}, input_type=${pyTypeName(args[f])}]`,
    );
    throw new ToolError(
      `${bad.length} validation error${bad.length > 1 ? "s" : ""} for UserAddress\n${lines.join("\n")}`,
    );
  }
  const out = {} as Address;
  for (const f of fields) out[f] = args[f] as string;
  return out;
}

const isGiftCard = (m: PaymentMethod): m is GiftCard => m.source === "gift_card";

/** The retail toolkit bound to one (copy-on-write) database view. */
export class RetailTools {
  readonly specs: ToolSpec[];
  private readonly byName: Map<string, ToolSpec>;

  constructor(
    readonly db: RetailDb,
    readonly version: Tau2TaskVersion = "v1.0",
  ) {
    this.specs = retailToolSpecs(version);
    this.byName = new Map(this.specs.map((t) => [t.name, t]));
  }

  spec(name: string): ToolSpec | undefined {
    return this.byName.get(name);
  }

  /**
   * Run one tool call the way tau2's Environment.get_response does: results serialised by
   * `to_json_str` (str raw, models as `json.dumps(model_dump())`), any exception as
   * `Error: <message>` with error=true.
   */
  invoke(name: string, args: Record<string, unknown>): ToolOutcome {
    try {
      const result = this.call(name, args);
      return { content: typeof result === "string" ? result : pyJsonDumps(result), error: false };
    } catch (e) {
      if (e instanceof ToolError) return { content: `Error: ${e.message}`, error: true };
      throw e;
    }
  }

  /** Call a tool by name with keyword arguments; throws ToolError with upstream's text. */
  call(name: string, args: Record<string, unknown>): unknown {
    const spec = this.byName.get(name);
    if (spec === undefined) throw new ToolError(`Tool '${name}' not found.`);
    // CPython binds keywords first (unexpected ones fail at once), then reports missing ones.
    const names = spec.params.map((p) => p.name);
    for (const k of Object.keys(args)) {
      if (!names.includes(k)) throw new ToolError(`RetailTools.${name}() got an unexpected keyword argument '${k}'`);
    }
    const missing = names.filter((n) => !Object.hasOwn(args, n));
    if (missing.length > 0) {
      throw new ToolError(
        `RetailTools.${name}() missing ${missing.length} required positional argument${missing.length > 1 ? "s" : ""}: ${pyMissingArgsText(missing)}`,
      );
    }
    const fn = (this as unknown as Record<string, (a: Record<string, unknown>) => unknown>)[`tool_${name}`];
    return fn.call(this, args);
  }

  // ---- lookups (upstream _get_order, _get_user, …) ----

  private getOrder(id: unknown): Order {
    const k = pyKey(id);
    if (k === undefined || !this.db.hasOrder(k)) throw new ToolError("Order not found");
    return this.db.order(k) as Order;
  }
  private orderForWrite(id: string): Order {
    return this.db.orderForWrite(id);
  }
  private getUser(id: unknown): User {
    const k = pyKey(id);
    if (k === undefined || !this.db.hasUser(k)) throw new ToolError("User not found");
    return this.db.user(k) as User;
  }
  private getProduct(id: unknown): Product {
    const k = pyKey(id);
    if (k === undefined || !this.db.hasProduct(k)) throw new ToolError("Product not found");
    return this.db.product(k) as Product;
  }
  private getVariant(productId: string, variantId: unknown): Variant {
    const product = this.getProduct(productId);
    const k = pyKey(variantId);
    const v = k === undefined ? undefined : product.variants.get(k);
    if (v === undefined) throw new ToolError("Variant not found");
    return v;
  }
  /** Payment methods are looked up in the given user's record (always the order's owner). */
  private getPaymentMethod(userId: string, methodId: unknown): PaymentMethod {
    const user = this.getUser(userId);
    if (!has(user.payment_methods, methodId)) throw new ToolError("Payment method not found");
    return user.payment_methods[methodId];
  }
  /** The same method inside a writable copy of the user record. */
  private paymentMethodForWrite(userId: string, methodId: string): PaymentMethod {
    return this.db.userForWrite(userId).payment_methods[methodId];
  }

  // ---- tools ----

  protected tool_calculate(a: Record<string, unknown>): string {
    return pythonCalculate(a.expression);
  }

  protected tool_cancel_pending_order(a: Record<string, unknown>): Order {
    const found = this.getOrder(a.order_id);
    if (found.status !== "pending") throw new ToolError("Non-pending order cannot be cancelled");
    if (typeof a.reason === "object" && a.reason !== null)
      throw new ToolError(`unhashable type: '${pyTypeName(a.reason)}'`);
    if (a.reason !== "no longer needed" && a.reason !== "ordered by mistake") throw new ToolError("Invalid reason");
    const order = this.orderForWrite(found.order_id);
    const refunds: Order["payment_history"] = [];
    for (const payment of order.payment_history) {
      refunds.push({
        transaction_type: "refund",
        amount: payment.amount,
        payment_method_id: payment.payment_method_id,
      });
      const user = this.getUser(order.user_id);
      const method = this.getPaymentMethod(user.user_id, payment.payment_method_id);
      if (isGiftCard(method)) {
        // Refunded to the gift card at once, as each payment is visited (before the status changes).
        const card = this.paymentMethodForWrite(user.user_id, method.id) as GiftCard;
        card.balance = pyRound2(card.balance + payment.amount);
      }
    }
    order.status = "cancelled";
    order.cancel_reason = a.reason;
    order.payment_history.push(...refunds);
    return order;
  }

  /** Shared by exchange and modify-items: the multiplicity check over the order's item ids. */
  private checkCounts(order: Order, itemIds: unknown[], message: (id: unknown) => string): void {
    const all = order.items.map((i) => i.item_id);
    for (const id of itemIds) {
      if (count(itemIds, id) > count(all, id)) throw new ToolError(message(id));
    }
  }

  protected tool_exchange_delivered_order_items(a: Record<string, unknown>): Order {
    const found = this.getOrder(a.order_id);
    if (found.status !== "delivered") throw new ToolError("Non-delivered order cannot be exchanged");
    const itemIds = pyList(a.item_ids);
    this.checkCounts(found, itemIds, (id) => `Number of ${pyStr(id)} not found.`);
    const newIds = pyList(a.new_item_ids);
    if (itemIds.length !== newIds.length) throw new ToolError("The number of items to be exchanged should match.");
    let diff = 0;
    for (let i = 0; i < itemIds.length; i++) {
      const item = found.items.find((it) => it.item_id === itemIds[i]);
      if (item === undefined) throw new ToolError(`Item ${pyStr(itemIds[i])} not found`);
      const variant = this.getVariant(item.product_id, newIds[i]);
      if (!variant.available) throw new ToolError(`New item ${pyStr(newIds[i])} not found or available`);
      diff += variant.price - item.price;
    }
    // Rounded here (unlike modify-items). With empty lists Python keeps the int 0; we store 0.
    diff = pyRound2(diff);
    const method = this.getPaymentMethod(found.user_id, a.payment_method_id);
    if (isGiftCard(method) && method.balance < diff) {
      throw new ToolError("Insufficient gift card balance to pay for the price difference");
    }
    // No money moves on an exchange request.
    const order = this.orderForWrite(found.order_id);
    order.status = "exchange requested";
    order.exchange_items = pySorted(itemIds);
    order.exchange_new_items = pySorted(newIds);
    order.exchange_payment_method_id = a.payment_method_id as string;
    order.exchange_price_difference = diff;
    return order;
  }

  protected tool_find_user_id_by_name_zip(a: Record<string, unknown>): string {
    const first = lower(a.first_name);
    const last = lower(a.last_name);
    // First match in DB order; names case-insensitive, zip exact.
    for (const [id, user] of this.db.userEntries()) {
      if (
        user.name.first_name.toLowerCase() === first &&
        user.name.last_name.toLowerCase() === last &&
        user.address.zip === a.zip
      ) {
        return id;
      }
    }
    throw new ToolError("User not found");
  }

  protected tool_find_user_id_by_email(a: Record<string, unknown>): string {
    const email = lower(a.email);
    for (const [id, user] of this.db.userEntries()) {
      if (user.email.toLowerCase() === email) return id;
    }
    throw new ToolError("User not found");
  }

  protected tool_get_order_details(a: Record<string, unknown>): Order {
    return this.getOrder(a.order_id);
  }

  protected tool_get_product_details(a: Record<string, unknown>): Product {
    return this.getProduct(a.product_id);
  }

  protected tool_get_item_details(a: Record<string, unknown>): Variant {
    const k = pyKey(a.item_id);
    for (const [, product] of this.db.productEntries()) {
      const v = k === undefined ? undefined : product.variants.get(k);
      if (v !== undefined) return v;
    }
    throw new ToolError("Item not found");
  }

  protected tool_get_user_details(a: Record<string, unknown>): User {
    return this.getUser(a.user_id);
  }

  protected tool_list_all_product_types(): string {
    const map: Record<string, string> = {};
    for (const [, p] of this.db.productEntries()) map[p.name] = p.product_id;
    return pyJsonDumps(map, { sortKeys: true });
  }

  protected tool_modify_pending_order_address(a: Record<string, unknown>): Order {
    const found = this.getOrder(a.order_id);
    // A substring test: "pending (item modified)" passes too.
    if (!found.status.includes("pending")) throw new ToolError("Non-pending order cannot be modified");
    const address = makeAddress(a);
    const order = this.orderForWrite(found.order_id);
    order.address = address;
    return order;
  }

  protected tool_modify_pending_order_items(a: Record<string, unknown>): Order {
    const found = this.getOrder(a.order_id);
    if (found.status !== "pending") throw new ToolError("Non-pending order cannot be modified");
    const itemIds = pyList(a.item_ids);
    this.checkCounts(found, itemIds, (id) => `${pyStr(id)} not found`);
    const newIds = pyList(a.new_item_ids);
    if (itemIds.length !== newIds.length) throw new ToolError("The number of items to be exchanged should match");
    let diff = 0;
    let variant: Variant | undefined;
    for (let i = 0; i < itemIds.length; i++) {
      if (pyEq(itemIds[i], newIds[i])) throw new ToolError("The new item id should be different from the old item id");
      const item = found.items.find((it) => it.item_id === itemIds[i]);
      if (item === undefined) throw new ToolError(`Item ${pyStr(itemIds[i])} not found`);
      variant = this.getVariant(item.product_id, newIds[i]);
      if (!variant.available) throw new ToolError(`New item ${pyStr(newIds[i])} not found or available`);
      diff += variant.price - item.price;
    }
    // Not rounded (unlike exchange).
    const method = this.getPaymentMethod(found.user_id, a.payment_method_id);
    if (isGiftCard(method) && method.balance < diff)
      throw new ToolError("Insufficient gift card balance to pay for the new item");
    const order = this.orderForWrite(found.order_id);
    order.payment_history.push({
      transaction_type: diff > 0 ? "payment" : "refund",
      amount: Math.abs(diff),
      payment_method_id: a.payment_method_id as string,
    });
    if (isGiftCard(method)) {
      const card = this.paymentMethodForWrite(found.user_id, method.id) as GiftCard;
      card.balance = pyRound2(card.balance - diff);
    }
    for (let i = 0; i < itemIds.length; i++) {
      const item = order.items.find((it) => it.item_id === itemIds[i]);
      if (item === undefined) throw new ToolError(`Item ${pyStr(itemIds[i])} not found`);
      item.item_id = newIds[i] as string;
      // Upstream quirk (spec §2): price and options come from the LAST pair's variant for
      // every modified item — the loop variable leaks out of the first loop.
      const last = variant as Variant;
      item.price = last.price;
      item.options = { ...last.options };
    }
    order.status = "pending (item modified)";
    return order;
  }

  protected tool_modify_pending_order_payment(a: Record<string, unknown>): Order {
    const found = this.getOrder(a.order_id);
    if (!found.status.includes("pending")) throw new ToolError("Non-pending order cannot be modified");
    const method = this.getPaymentMethod(found.user_id, a.payment_method_id);
    const history = found.payment_history;
    if (history.length !== 1 || history[0].transaction_type !== "payment") {
      throw new ToolError("There should be exactly one payment for a pending order");
    }
    if (history[0].payment_method_id === a.payment_method_id) {
      throw new ToolError("The new payment method should be different from the current one");
    }
    const amount = history[0].amount;
    if (isGiftCard(method) && method.balance < amount)
      throw new ToolError("Insufficient gift card balance to pay for the order");
    const order = this.orderForWrite(found.order_id);
    const oldId = order.payment_history[0].payment_method_id;
    order.payment_history.push(
      { transaction_type: "payment", amount, payment_method_id: method.id },
      { transaction_type: "refund", amount, payment_method_id: oldId },
    );
    if (isGiftCard(method)) {
      const card = this.paymentMethodForWrite(order.user_id, method.id) as GiftCard;
      card.balance = pyRound2(card.balance - amount);
    }
    const old = this.getPaymentMethod(order.user_id, oldId);
    if (isGiftCard(old)) {
      const card = this.paymentMethodForWrite(order.user_id, old.id) as GiftCard;
      card.balance = pyRound2(card.balance + amount);
    }
    return order;
  }

  protected tool_modify_user_address(a: Record<string, unknown>): User {
    const found = this.getUser(a.user_id);
    const address = makeAddress(a);
    const user = this.db.userForWrite(found.user_id);
    user.address = address;
    return user;
  }

  protected tool_return_delivered_order_items(a: Record<string, unknown>): Order {
    const found = this.getOrder(a.order_id);
    if (found.status !== "delivered") throw new ToolError("Non-delivered order cannot be returned");
    const user = this.getUser(found.user_id);
    const method = this.getPaymentMethod(user.user_id, a.payment_method_id);
    if (!isGiftCard(method) && a.payment_method_id !== found.payment_history[0].payment_method_id) {
      throw new ToolError("Payment method should be the original payment method");
    }
    const itemIds = pyList(a.item_ids);
    this.checkCounts(found, itemIds, () => "Some item not found");
    const order = this.orderForWrite(found.order_id);
    order.status = "return requested";
    order.return_items = pySorted(itemIds);
    order.return_payment_method_id = a.payment_method_id as string;
    return order;
  }

  protected tool_transfer_to_human_agents(_a: Record<string, unknown>): string {
    return "Transfer successful";
  }
}

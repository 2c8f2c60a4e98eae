import { readFileSync } from "node:fs";
import type { ToolSchema } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  type GiftCard,
  type Order,
  type User,
  RetailTools,
  hashRetailDb,
  loadRetailDb,
  retailToolSchemas,
  retailToolSpecs,
} from "../../src/tau2/index.js";

// Each tool's DB effect and error texts (spec tau2-retail.md §2; upstream tools.py).
const ref = JSON.parse(readFileSync(new URL("./fixtures/reference.json", import.meta.url), "utf8")) as {
  calculate: [string, "ok" | "error", string][];
  tool_outputs: Record<string, string>;
};

function setup(version: "v1.0" | "v0.2.0" = "v1.0") {
  const db = loadRetailDb();
  return { db, tools: new RetailTools(db, version), h0: hashRetailDb(db) };
}
const giftBalance = (t: RetailTools, user: string, id: string) =>
  ((t.db.user(user) as User).payment_methods[id] as GiftCard).balance;

describe("tool declarations", () => {
  it("has 16 tools in v1.0 and 15 (no get_item_details) in v0.2.0", () => {
    // Upstream's definition order in tools.py (the agent's tool list order).
    expect(retailToolSpecs("v1.0").map((t) => t.name)).toEqual([
      "calculate",
      "cancel_pending_order",
      "exchange_delivered_order_items",
      "find_user_id_by_name_zip",
      "find_user_id_by_email",
      "get_order_details",
      "get_product_details",
      "get_item_details",
      "get_user_details",
      "list_all_product_types",
      "modify_pending_order_address",
      "modify_pending_order_items",
      "modify_pending_order_payment",
      "modify_user_address",
      "return_delivered_order_items",
      "transfer_to_human_agents",
    ]);
    const v02 = retailToolSpecs("v0.2.0").map((t) => t.name);
    expect(v02).toHaveLength(15);
    expect(v02).not.toContain("get_item_details");
    const writes = retailToolSpecs()
      .filter((t) => t.kind === "WRITE")
      .map((t) => t.name);
    expect(writes.sort()).toEqual([
      "cancel_pending_order",
      "exchange_delivered_order_items",
      "modify_pending_order_address",
      "modify_pending_order_items",
      "modify_pending_order_payment",
      "modify_user_address",
      "return_delivered_order_items",
    ]);
  });

  it("builds pydantic-shaped parameter schemas", () => {
    const byName = new Map(retailToolSchemas().map((s) => [s.function.name, s.function]));
    expect(byName.get("list_all_product_types")?.parameters).toEqual({
      properties: {},
      title: "parameters",
      type: "object",
    });
    const ex = byName.get("exchange_delivered_order_items") as ToolSchema["function"];
    expect(Object.keys((ex.parameters as { properties: object }).properties)).toEqual([
      "order_id",
      "item_ids",
      "new_item_ids",
      "payment_method_id",
    ]);
    expect((ex.parameters as { properties: Record<string, unknown> }).properties.item_ids).toEqual({
      description:
        "The item ids to be exchanged, each such as '1008292230'. There could be duplicate items in the list.",
      items: { type: "string" },
      title: "Item Ids",
      type: "array",
    });
    expect((ex.parameters as { required: string[] }).required).toEqual([
      "order_id",
      "item_ids",
      "new_item_ids",
      "payment_method_id",
    ]);
    expect(ex.description).toBe(
      "Exchange items in a delivered order to new items of the same product type.\n\nFor a delivered order, return or exchange can be only done once by the agent.\nThe agent needs to explain the exchange detail and ask for explicit user confirmation (yes/no) to proceed.",
    );
  });
});

describe("call errors", () => {
  it("unknown tools, and get_item_details under v0.2.0", () => {
    expect(setup().tools.invoke("think", { thought: "x" })).toEqual({
      content: "Error: Tool 'think' not found.",
      error: true,
    });
    expect(setup("v0.2.0").tools.invoke("get_item_details", { item_id: "1" }).content).toBe(
      "Error: Tool 'get_item_details' not found.",
    );
  });
  it("missing and unexpected keyword arguments give Python's TypeError text", () => {
    const { tools } = setup();
    expect(tools.invoke("get_order_details", {}).content).toBe(
      "Error: RetailTools.get_order_details() missing 1 required positional argument: 'order_id'",
    );
    expect(tools.invoke("find_user_id_by_name_zip", { first_name: "a" }).content).toBe(
      "Error: RetailTools.find_user_id_by_name_zip() missing 2 required positional arguments: 'last_name' and 'zip'",
    );
    expect(tools.invoke("modify_user_address", { user_id: "x" }).content).toBe(
      "Error: RetailTools.modify_user_address() missing 6 required positional arguments: 'address1', 'address2', 'city', 'state', 'country', and 'zip'",
    );
    expect(tools.invoke("get_order_details", { order_id: "#W2611340", foo: 1 }).content).toBe(
      "Error: RetailTools.get_order_details() got an unexpected keyword argument 'foo'",
    );
  });
  it("lookups with unhashable ids", () => {
    expect(setup().tools.invoke("get_order_details", { order_id: ["#W2611340"] }).content).toBe(
      "Error: unhashable type: 'list'",
    );
    expect(setup().tools.invoke("get_order_details", { order_id: 5 }).content).toBe("Error: Order not found");
  });
});

describe("read and generic tools", () => {
  it("calculate equals Python's str(round(float(eval(e)), 2)) or its exception text", () => {
    const { tools } = setup();
    for (const [expr, kind, text] of ref.calculate) {
      expect(tools.invoke("calculate", { expression: expr }), expr).toEqual(
        kind === "ok" ? { content: text, error: false } : { content: `Error: ${text}`, error: true },
      );
    }
  });
  it("results are json.dumps of the model in field order, str results raw", () => {
    const { tools } = setup();
    expect(tools.invoke("get_order_details", { order_id: "#W2611340" }).content).toBe(
      ref.tool_outputs["get_order_details #W2611340"],
    );
    expect(tools.invoke("get_user_details", { user_id: "noah_brown_6181" }).content).toBe(
      ref.tool_outputs["get_user_details noah_brown_6181"],
    );
    expect(tools.invoke("get_product_details", { product_id: "9523456873" }).content).toBe(
      ref.tool_outputs["get_product_details 9523456873"],
    );
    expect(tools.invoke("list_all_product_types", {}).content).toBe(ref.tool_outputs.list_all_product_types);
    expect(tools.invoke("transfer_to_human_agents", { summary: "s" })).toEqual({
      content: "Transfer successful",
      error: false,
    });
  });
  it("user lookups: case-insensitive names and email, exact zip", () => {
    const { tools } = setup();
    expect(tools.invoke("find_user_id_by_email", { email: "NOAH.Brown7922@example.com" }).content).toBe(
      "noah_brown_6181",
    );
    expect(tools.invoke("find_user_id_by_email", { email: "nobody@example.com" }).content).toBe(
      "Error: User not found",
    );
    expect(
      tools.invoke("find_user_id_by_name_zip", { first_name: "noah", last_name: "BROWN", zip: "80279" }).content,
    ).toBe("noah_brown_6181");
    expect(
      tools.invoke("find_user_id_by_name_zip", { first_name: "Noah", last_name: "Brown", zip: "80278" }).content,
    ).toBe("Error: User not found");
  });
  it("get_item_details searches every product; get_product_details needs a product id", () => {
    const { tools } = setup();
    expect(JSON.parse(tools.invoke("get_item_details", { item_id: "9612497925" }).content)).toMatchObject({
      item_id: "9612497925",
      price: 50.88,
    });
    expect(tools.invoke("get_item_details", { item_id: "9523456873" }).content).toBe("Error: Item not found");
    expect(tools.invoke("get_product_details", { product_id: "9612497925" }).content).toBe("Error: Product not found");
  });
});

describe("write tools", () => {
  it("cancel_pending_order: refunds every payment, gift cards at once; status and reason", () => {
    const { tools, h0 } = setup();
    expect(tools.invoke("cancel_pending_order", { order_id: "#W2611340", reason: "no longer needed" }).content).toBe(
      "Error: Non-pending order cannot be cancelled",
    );
    expect(tools.invoke("cancel_pending_order", { order_id: "#W8367380", reason: "too expensive" }).content).toBe(
      "Error: Invalid reason",
    );
    expect(hashRetailDb(tools.db)).toBe(h0);
    const out = tools.invoke("cancel_pending_order", { order_id: "#W8367380", reason: "no longer needed" });
    expect(out.content).toBe(ref.tool_outputs["cancel_pending_order #W8367380"]);
    const o = tools.db.order("#W8367380") as Order;
    expect(o.status).toBe("cancelled");
    expect(o.cancel_reason).toBe("no longer needed");
    expect(o.payment_history.at(-1)).toEqual({
      transaction_type: "refund",
      amount: 1003.22,
      payment_method_id: "credit_card_5683823",
    });
  });

  it("cancel_pending_order refunds a gift card immediately (rounded to 2)", () => {
    const { tools } = setup();
    const order = Array.from(tools.db.orderEntries()).find(
      ([, o]) => o.status === "pending" && o.payment_history[0].payment_method_id.startsWith("gift_card"),
    )?.[1] as Order;
    const pid = order.payment_history[0].payment_method_id;
    const before = giftBalance(tools, order.user_id, pid);
    tools.invoke("cancel_pending_order", { order_id: order.order_id, reason: "ordered by mistake" });
    expect(giftBalance(tools, order.user_id, pid)).toBe(
      Math.round((before + order.payment_history[0].amount) * 100) / 100,
    );
  });

  it("modify_pending_order_address: accepts 'pending (item modified)', rejects others, validates str fields", () => {
    const { tools } = setup();
    const addr = { address1: "1 Main St", address2: "", city: "Austin", state: "TX", country: "USA", zip: "73301" };
    expect(tools.invoke("modify_pending_order_address", { order_id: "#W2611340", ...addr }).content).toBe(
      "Error: Non-pending order cannot be modified",
    );
    expect(tools.invoke("modify_pending_order_address", { order_id: "#W8367380", ...addr, zip: 73301 }).content).toBe(
      "Error: 1 validation error for UserAddress\nzip\n  Input should be a valid string [type=string_type, input_value=73301, input_type=int]",
    );
    const out = tools.invoke("modify_pending_order_address", { order_id: "#W8367380", ...addr });
    expect(out.error).toBe(false);
    expect(tools.db.order("#W8367380")?.address).toEqual({
      address1: "1 Main St",
      address2: "",
      city: "Austin",
      country: "USA",
      state: "TX",
      zip: "73301",
    });
    tools.db.orderForWrite("#W8367380").status = "pending (item modified)";
    expect(tools.invoke("modify_pending_order_address", { order_id: "#W8367380", ...addr, city: "Dallas" }).error).toBe(
      false,
    );
  });

  it("modify_pending_order_items: checks in order, unrounded payment entry, last-variant quirk", () => {
    const { tools, h0 } = setup();
    const base = { order_id: "#W5918442", payment_method_id: "credit_card_5051208" };
    expect(
      tools.invoke("modify_pending_order_items", {
        ...base,
        item_ids: ["1725100896", "1725100896"],
        new_item_ids: ["1", "2"],
      }).content,
    ).toBe("Error: 1725100896 not found");
    expect(
      tools.invoke("modify_pending_order_items", { ...base, item_ids: ["1725100896"], new_item_ids: [] }).content,
    ).toBe("Error: The number of items to be exchanged should match");
    expect(
      tools.invoke("modify_pending_order_items", { ...base, item_ids: ["1725100896"], new_item_ids: ["1725100896"] })
        .content,
    ).toBe("Error: The new item id should be different from the old item id");
    expect(
      tools.invoke("modify_pending_order_items", { ...base, item_ids: ["1725100896"], new_item_ids: ["9612497925"] })
        .content,
    ).toBe("Error: Variant not found");
    expect(
      tools.invoke("modify_pending_order_items", {
        ...base,
        item_ids: ["1725100896"],
        new_item_ids: ["1"],
        payment_method_id: "paypal_1",
      }).content,
    ).toBe("Error: Variant not found");
    expect(hashRetailDb(tools.db)).toBe(h0);
    // Two different products: both items end up with the second variant's price and options.
    const order = tools.db.order("#W5918442") as Order;
    const pick = (productId: string, itemId: string) => {
      const p = tools.db.product(productId);
      const v = Array.from(p?.variants.values() ?? []).find(
        (x) => x.available && x.item_id !== itemId && x.price !== order.items.find((i) => i.item_id === itemId)?.price,
      );
      if (!v) throw new Error("fixture: no alternative variant");
      return v;
    };
    const v1 = pick("6858788497", "1725100896");
    const v2 = pick("1968349452", "5312063289");
    const out = tools.invoke("modify_pending_order_items", {
      ...base,
      item_ids: ["1725100896", "5312063289"],
      new_item_ids: [v1.item_id, v2.item_id],
    });
    expect(out.error, out.content).toBe(false);
    const after = tools.db.order("#W5918442") as Order;
    expect(after.status).toBe("pending (item modified)");
    expect(after.items[0]).toMatchObject({
      item_id: v1.item_id,
      price: v2.price,
      options: v2.options,
      product_id: "6858788497",
    });
    expect(after.items[1]).toMatchObject({ item_id: v2.item_id, price: v2.price, options: v2.options });
    const diff = v1.price - 289.66 + (v2.price - 195.15);
    expect(after.payment_history.at(-1)).toEqual({
      transaction_type: diff > 0 ? "payment" : "refund",
      amount: Math.abs(diff),
      payment_method_id: "credit_card_5051208",
    });
    expect(
      tools.invoke("modify_pending_order_items", { ...base, item_ids: [v1.item_id], new_item_ids: ["1725100896"] })
        .content,
    ).toBe("Error: Non-pending order cannot be modified");
  });

  it("modify_pending_order_items with a gift card: balance must cover the difference; balance −= diff rounded", () => {
    const { tools } = setup();
    const found = Array.from(tools.db.orderEntries()).find(
      ([, o]) =>
        o.status === "pending" &&
        o.payment_history.length === 1 &&
        o.payment_history[0].payment_method_id.startsWith("gift_card"),
    );
    const [oid, order] = found as [string, Order];
    const pid = order.payment_history[0].payment_method_id;
    const item = order.items[0];
    const variants = Array.from(tools.db.product(item.product_id)?.variants.values() ?? []).filter(
      (v) => v.available && v.item_id !== item.item_id,
    );
    const dearer = variants.find((v) => v.price > item.price);
    if (!dearer) throw new Error("fixture: no dearer variant");
    tools.db.userForWrite(order.user_id).payment_methods[pid] = { source: "gift_card", id: pid, balance: 0 };
    expect(
      tools.invoke("modify_pending_order_items", {
        order_id: oid,
        item_ids: [item.item_id],
        new_item_ids: [dearer.item_id],
        payment_method_id: pid,
      }).content,
    ).toBe("Error: Insufficient gift card balance to pay for the new item");
    tools.db.userForWrite(order.user_id).payment_methods[pid] = { source: "gift_card", id: pid, balance: 1000 };
    const out = tools.invoke("modify_pending_order_items", {
      order_id: oid,
      item_ids: [item.item_id],
      new_item_ids: [dearer.item_id],
      payment_method_id: pid,
    });
    expect(out.error, out.content).toBe(false);
    expect(giftBalance(tools, order.user_id, pid)).toBe(Math.round((1000 - (dearer.price - item.price)) * 100) / 100);
    expect((tools.db.order(oid) as Order).payment_history.at(-1)).toEqual({
      transaction_type: "payment",
      amount: dearer.price - item.price,
      payment_method_id: pid,
    });
  });

  it("modify_pending_order_payment: one payment, a different method, gift card balances", () => {
    const { tools } = setup();
    expect(
      tools.invoke("modify_pending_order_payment", { order_id: "#W8367380", payment_method_id: "credit_card_5683823" })
        .content,
    ).toBe("Error: The new payment method should be different from the current one");
    expect(
      tools.invoke("modify_pending_order_payment", { order_id: "#W8367380", payment_method_id: "gift_card_1994993" })
        .content,
    ).toBe("Error: Insufficient gift card balance to pay for the order");
    expect(
      tools.invoke("modify_pending_order_payment", { order_id: "#W8367380", payment_method_id: "paypal_0" }).content,
    ).toBe("Error: Payment method not found");
    tools.db.userForWrite("ava_nguyen_6646").payment_methods.gift_card_1994993 = {
      source: "gift_card",
      id: "gift_card_1994993",
      balance: 2000,
    };
    const out = tools.invoke("modify_pending_order_payment", {
      order_id: "#W8367380",
      payment_method_id: "gift_card_1994993",
    });
    expect(out.error, out.content).toBe(false);
    expect((tools.db.order("#W8367380") as Order).payment_history).toEqual([
      { transaction_type: "payment", amount: 1003.22, payment_method_id: "credit_card_5683823" },
      { transaction_type: "payment", amount: 1003.22, payment_method_id: "gift_card_1994993" },
      { transaction_type: "refund", amount: 1003.22, payment_method_id: "credit_card_5683823" },
    ]);
    expect(giftBalance(tools, "ava_nguyen_6646", "gift_card_1994993")).toBe(996.78);
    expect(
      tools.invoke("modify_pending_order_payment", { order_id: "#W8367380", payment_method_id: "credit_card_5683823" })
        .content,
    ).toBe("Error: There should be exactly one payment for a pending order");
  });

  it("modify_user_address replaces the default address", () => {
    const { tools } = setup();
    const out = tools.invoke("modify_user_address", {
      user_id: "noah_brown_6181",
      address1: "a",
      address2: "b",
      city: "c",
      state: "d",
      country: "e",
      zip: "f",
    });
    expect(JSON.parse(out.content).address).toEqual({
      address1: "a",
      address2: "b",
      city: "c",
      country: "e",
      state: "d",
      zip: "f",
    });
    expect(
      tools.invoke("modify_user_address", {
        user_id: "nobody",
        address1: "a",
        address2: "b",
        city: "c",
        state: "d",
        country: "e",
        zip: "f",
      }).content,
    ).toBe("Error: User not found");
  });

  it("return_delivered_order_items: original method or a gift card; multiplicity; sorted ids; no money moves", () => {
    const { tools } = setup();
    const o = "#W4817420";
    expect(
      tools.invoke("return_delivered_order_items", { order_id: "#W8367380", item_ids: [], payment_method_id: "x" })
        .content,
    ).toBe("Error: Non-delivered order cannot be returned");
    expect(
      tools.invoke("return_delivered_order_items", {
        order_id: o,
        item_ids: ["6777246137", "6777246137"],
        payment_method_id: "gift_card_8168843",
      }).content,
    ).toBe("Error: Some item not found");
    const out = tools.invoke("return_delivered_order_items", {
      order_id: o,
      item_ids: ["9624127908", "6777246137"],
      payment_method_id: "gift_card_8168843",
    });
    expect(out.error).toBe(false);
    const after = tools.db.order(o) as Order;
    expect(after.status).toBe("return requested");
    expect(after.return_items).toEqual(["6777246137", "9624127908"]);
    expect(after.return_payment_method_id).toBe("gift_card_8168843");
    expect(after.payment_history).toHaveLength(1);
  });

  it("return_delivered_order_items rejects a non-original non-gift-card method", () => {
    const { tools } = setup();
    const entry = Array.from(tools.db.orderEntries()).find(([, o]) => {
      if (o.status !== "delivered") return false;
      const u = tools.db.user(o.user_id);
      return Object.keys(u?.payment_methods ?? {}).some(
        (k) => !k.startsWith("gift_card") && k !== o.payment_history[0].payment_method_id,
      );
    });
    const [oid, order] = entry as [string, Order];
    const other = Object.keys(tools.db.user(order.user_id)?.payment_methods ?? {}).find(
      (k) => !k.startsWith("gift_card") && k !== order.payment_history[0].payment_method_id,
    );
    expect(
      tools.invoke("return_delivered_order_items", {
        order_id: oid,
        item_ids: [order.items[0].item_id],
        payment_method_id: other,
      }).content,
    ).toBe("Error: Payment method should be the original payment method");
  });

  it("exchange_delivered_order_items: rounded difference, same product, no money moves", () => {
    const { tools } = setup();
    const o = "#W4817420";
    const pm = "gift_card_8168843";
    expect(
      tools.invoke("exchange_delivered_order_items", {
        order_id: "#W8367380",
        item_ids: [],
        new_item_ids: [],
        payment_method_id: pm,
      }).content,
    ).toBe("Error: Non-delivered order cannot be exchanged");
    expect(
      tools.invoke("exchange_delivered_order_items", {
        order_id: o,
        item_ids: ["1"],
        new_item_ids: ["2"],
        payment_method_id: pm,
      }).content,
    ).toBe("Error: Number of 1 not found.");
    expect(
      tools.invoke("exchange_delivered_order_items", {
        order_id: o,
        item_ids: ["6777246137"],
        new_item_ids: [],
        payment_method_id: pm,
      }).content,
    ).toBe("Error: The number of items to be exchanged should match.");
    // new == old is allowed for exchanges (unlike modify).
    const same = tools.invoke("exchange_delivered_order_items", {
      order_id: o,
      item_ids: ["6777246137"],
      new_item_ids: ["6777246137"],
      payment_method_id: pm,
    });
    expect(same.error, same.content).toBe(false);
    const after = tools.db.order(o) as Order;
    expect(after).toMatchObject({
      status: "exchange requested",
      exchange_items: ["6777246137"],
      exchange_new_items: ["6777246137"],
      exchange_payment_method_id: pm,
      exchange_price_difference: 0,
    });
    expect(after.payment_history).toHaveLength(1);
    expect(
      tools.invoke("exchange_delivered_order_items", {
        order_id: o,
        item_ids: ["6777246137"],
        new_item_ids: ["6777246137"],
        payment_method_id: pm,
      }).content,
    ).toBe("Error: Non-delivered order cannot be exchanged");
  });

  it("exchange_delivered_order_items: a gift card must cover the difference", () => {
    const { tools } = setup();
    tools.db.userForWrite("ava_moore_2033").payment_methods.gift_card_8168843 = {
      source: "gift_card",
      id: "gift_card_8168843",
      balance: 0,
    };
    const p = tools.db.product("8600330539");
    const dearer = Array.from(p?.variants.values() ?? []).find((v) => v.available && v.price > 463.04);
    if (!dearer) throw new Error("fixture: no dearer variant");
    expect(
      tools.invoke("exchange_delivered_order_items", {
        order_id: "#W4817420",
        item_ids: ["4900661478"],
        new_item_ids: [dearer.item_id],
        payment_method_id: "gift_card_8168843",
      }).content,
    ).toBe("Error: Insufficient gift card balance to pay for the price difference");
  });
});

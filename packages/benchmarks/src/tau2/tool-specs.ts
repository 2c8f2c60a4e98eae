import type { ToolSchema } from "@kiln/rollout";

// The retail tool declarations (tau2 src/tau2/domains/retail/tools.py). The wire schema is what
// upstream's Tool.openai_schema produces (src/tau2/environment/tool.py): the description is the
// docstring's short description, a blank line and the long description (docstring_parser,
// Google style); `parameters` is the pydantic JSON schema of a model titled "parameters".

/** Upstream ToolType: only WRITE tools are replayed when grading. */
export type ToolKind = "READ" | "WRITE" | "GENERIC";

export type Tau2TaskVersion = "v1.0" | "v0.2.0";

export interface ToolParam {
  name: string;
  type: "string" | "array";
  description: string;
}

export interface ToolSpec {
  name: string;
  kind: ToolKind;
  short: string;
  long?: string;
  params: ToolParam[];
  /** The tool exists only from this task version on (get_item_details arrived in v1.0). */
  since?: Tau2TaskVersion;
}

const ORDER_ID =
  "The order id, such as '#W0000000'. Be careful there is a '#' symbol at the beginning of the order id.";
const PAYMENT_ID_ONE_LINE =
  "The payment method id to pay or receive refund for the item price difference, such as 'gift_card_0000000' or 'credit_card_0000000'. These can be looked up from the user or order details.";
const CONFIRM =
  "The agent needs to explain the modification detail and ask for explicit user confirmation (yes/no) to proceed.";

const s = (name: string, description: string): ToolParam => ({ name, type: "string", description });
const a = (name: string, description: string): ToolParam => ({ name, type: "array", description });

const ADDRESS = [
  s("address1", "The first line of the address, such as '123 Main St'."),
  s("address2", "The second line of the address, such as 'Apt 1' or ''."),
  s("city", "The city, such as 'San Francisco'."),
  s("state", "The state, such as 'CA'."),
  s("country", "The country, such as 'USA'."),
  s("zip", "The zip code, such as '12345'."),
];

/**
 * All 16 retail tools, in upstream's definition order (tools.py), which is the order the
 * toolkit's dict, and so the agent's tool list, has.
 */
export const RETAIL_TOOL_SPECS: readonly ToolSpec[] = [
  {
    name: "calculate",
    kind: "GENERIC",
    short: "Calculate the result of a mathematical expression.",
    params: [
      s(
        "expression",
        "The mathematical expression to calculate, such as '2 + 2'. The expression can contain numbers, operators (+, -, *, /), parentheses, and spaces.",
      ),
    ],
  },
  {
    name: "cancel_pending_order",
    kind: "WRITE",
    short: "Cancel a pending order. If the order is already processed or delivered,",
    long: "it cannot be cancelled. The agent needs to explain the cancellation detail\nand ask for explicit user confirmation (yes/no) to proceed. If the user confirms,\nthe order status will be changed to 'cancelled' and the payment will be refunded.\nThe refund will be added to the user's gift card balance immediately if the payment\nwas made using a gift card, otherwise the refund would take 5-7 business days to process.\nThe function returns the order details after the cancellation.",
    params: [
      s("order_id", ORDER_ID),
      s("reason", "The reason for cancellation, which should be either 'no longer needed' or 'ordered by mistake'."),
    ],
  },
  {
    name: "exchange_delivered_order_items",
    kind: "WRITE",
    short: "Exchange items in a delivered order to new items of the same product type.",
    long: "For a delivered order, return or exchange can be only done once by the agent.\nThe agent needs to explain the exchange detail and ask for explicit user confirmation (yes/no) to proceed.",
    params: [
      s("order_id", ORDER_ID),
      a(
        "item_ids",
        "The item ids to be exchanged, each such as '1008292230'. There could be duplicate items in the list.",
      ),
      a(
        "new_item_ids",
        "The item ids to be exchanged for, each such as '1008292230'.\nThere could be duplicate items in the list. Each new item id should match the item id\nin the same position and be of the same product.",
      ),
      s(
        "payment_method_id",
        "The payment method id to pay or receive refund for the item price difference,\nsuch as 'gift_card_0000000' or 'credit_card_0000000'. These can be looked up\nfrom the user or order details.",
      ),
    ],
  },
  {
    name: "find_user_id_by_name_zip",
    kind: "READ",
    short: "Find user id by first name, last name, and zip code. If the user is not found, the function",
    long: "will return an error message. By default, find user id by email, and only call this function\nif the user is not found by email or cannot remember email.",
    params: [
      s("first_name", "The first name of the customer, such as 'John'."),
      s("last_name", "The last name of the customer, such as 'Doe'."),
      s("zip", "The zip code of the customer, such as '12345'."),
    ],
  },
  {
    name: "find_user_id_by_email",
    kind: "READ",
    short: "Find user id by email. If the user is not found, the function will return an error message.",
    params: [s("email", "The email of the user, such as 'something@example.com'.")],
  },
  {
    name: "get_order_details",
    kind: "READ",
    short: "Get the status and details of an order.",
    params: [s("order_id", ORDER_ID)],
  },
  {
    name: "get_product_details",
    kind: "READ",
    short: "Get the inventory details of a product.",
    params: [
      s("product_id", "The product id, such as '6086499569'. Be careful the product id is different from the item id."),
    ],
  },
  {
    name: "get_item_details",
    kind: "READ",
    short: "Get the inventory details of an item.",
    params: [
      s("item_id", "The item id, such as '6086499569'. Be careful the item id is different from the product id."),
    ],
    since: "v1.0",
  },
  {
    name: "get_user_details",
    kind: "READ",
    short: "Get the details of a user, including their orders.",
    params: [s("user_id", "The user id, such as 'sara_doe_496'.")],
  },
  {
    name: "list_all_product_types",
    kind: "READ",
    short: "List the name and product id of all product types.",
    long: "Each product type has a variety of different items with unique item ids and options.\nThere are only 50 product types in the store.",
    params: [],
  },
  {
    name: "modify_pending_order_address",
    kind: "WRITE",
    short: `Modify the shipping address of a pending order. ${CONFIRM}`,
    params: [s("order_id", ORDER_ID), ...ADDRESS],
  },
  {
    name: "modify_pending_order_items",
    kind: "WRITE",
    short:
      "Modify items in a pending order to new items of the same product type. For a pending order, this function can only be called once. The agent needs to explain the exchange detail and ask for explicit user confirmation (yes/no) to proceed.",
    params: [
      s("order_id", ORDER_ID),
      a(
        "item_ids",
        "The item ids to be modified, each such as '1008292230'. There could be duplicate items in the list.",
      ),
      a(
        "new_item_ids",
        "The item ids to be modified for, each such as '1008292230'. There could be duplicate items in the list. Each new item id should match the item id in the same position and be of the same product.",
      ),
      s("payment_method_id", PAYMENT_ID_ONE_LINE),
    ],
  },
  {
    name: "modify_pending_order_payment",
    kind: "WRITE",
    short: `Modify the payment method of a pending order. ${CONFIRM}`,
    params: [s("order_id", ORDER_ID), s("payment_method_id", PAYMENT_ID_ONE_LINE)],
  },
  {
    name: "modify_user_address",
    kind: "WRITE",
    short: `Modify the default address of a user. ${CONFIRM}`,
    params: [s("user_id", "The user id, such as 'sara_doe_496'."), ...ADDRESS],
  },
  {
    name: "return_delivered_order_items",
    kind: "WRITE",
    short: "Return some items of a delivered order.",
    long: "The order status will be changed to 'return requested'.\nThe agent needs to explain the return detail and ask for explicit user confirmation (yes/no) to proceed.\nThe user will receive follow-up email for how and where to return the item.",
    params: [
      s("order_id", ORDER_ID),
      a(
        "item_ids",
        "The item ids to be returned, each such as '1008292230'. There could be duplicate items in the list.",
      ),
      s(
        "payment_method_id",
        "The payment method id to pay or receive refund for the item price difference, such as 'gift_card_0000000' or 'credit_card_0000000'.\nThese can be looked up from the user or order details.",
      ),
    ],
  },
  {
    name: "transfer_to_human_agents",
    kind: "GENERIC",
    short: "Transfer the user to a human agent, with a summary of the user's issue.",
    long: "Only transfer if\n -  the user explicitly asks for a human agent\n -  given the policy and the available tools, you cannot solve the user's issue.",
    params: [s("summary", "A summary of the user's issue.")],
  },
];

/** The tools of a task version: 16 for v1.0, 15 (no get_item_details) for v0.2.0. */
export function retailToolSpecs(version: Tau2TaskVersion = "v1.0"): ToolSpec[] {
  return RETAIL_TOOL_SPECS.filter((t) => t.since === undefined || version === "v1.0");
}

/** "order_id" → "Order Id": pydantic's default field title. */
function fieldTitle(name: string): string {
  return name
    .split("_")
    .map((w) => (w.length > 0 ? w[0].toUpperCase() + w.slice(1) : w))
    .join(" ");
}

/** One tool in OpenAI function-calling form, as upstream's `Tool.openai_schema`. */
export function toolSchema(spec: ToolSpec): ToolSchema {
  const properties: Record<string, unknown> = {};
  for (const p of spec.params) {
    // pydantic v2 sorts schema keys: description, items, title, type.
    properties[p.name] =
      p.type === "array"
        ? { description: p.description, items: { type: "string" }, title: fieldTitle(p.name), type: "array" }
        : { description: p.description, title: fieldTitle(p.name), type: "string" };
  }
  const parameters: Record<string, unknown> =
    spec.params.length > 0
      ? { properties, required: spec.params.map((p) => p.name), title: "parameters", type: "object" }
      : { properties: {}, title: "parameters", type: "object" };
  return {
    type: "function",
    function: { name: spec.name, description: spec.long ? `${spec.short}\n\n${spec.long}` : spec.short, parameters },
  };
}

/** The tool declarations the agent is given for a task version. */
export function retailToolSchemas(version: Tau2TaskVersion = "v1.0"): ToolSchema[] {
  return retailToolSpecs(version).map(toolSchema);
}

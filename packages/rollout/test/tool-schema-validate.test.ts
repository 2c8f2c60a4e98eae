import { describe, expect, it } from "vitest";
import { validateJsonSchema } from "../src/index.js";

describe("validateJsonSchema", () => {
  const schema = {
    type: "object",
    properties: {
      order_id: { type: "string", pattern: "^#W\\d+$" },
      item_ids: { type: "array", items: { type: "string" }, minItems: 1 },
      qty: { type: ["integer", "null"], minimum: 0 },
      mode: { anyOf: [{ const: "fast" }, { type: "number" }] },
    },
    required: ["order_id"],
    additionalProperties: false,
  };

  it("accepts valid arguments", () => {
    expect(validateJsonSchema({ order_id: "#W123", item_ids: ["a"], qty: null, mode: 3 }, schema)).toEqual([]);
  });

  it("names the argument and the rule for each violation", () => {
    const v = validateJsonSchema({ order_id: "W1", item_ids: [1], qty: -1, mode: "slow", extra: 1 }, schema);
    expect(v.map((x) => x.message)).toEqual([
      'argument "order_id" must match /^#W\\d+$/',
      'argument "item_ids/0" must be string, got number',
      'argument "qty" must be >= 0, got -1',
      'argument "mode" matches none of the allowed alternatives (anyOf)',
      'unexpected argument "extra" (not in the tool\'s parameters)',
    ]);
    expect(validateJsonSchema({}, schema)[0]).toEqual({
      path: "/order_id",
      message: 'missing required argument "order_id"',
    });
    expect(validateJsonSchema([], schema)[0].message).toBe("arguments must be object, got array");
  });
});

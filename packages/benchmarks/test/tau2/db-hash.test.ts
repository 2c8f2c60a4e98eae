import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { RetailTools, hashRetailDb, loadRetailDb, pyFloatRepr, pyJsonDumps, pyRound2 } from "../../src/tau2/index.js";

// Reference values come from fixtures/make_fixtures.py (CPython json.dumps + hashlib).
const ref = JSON.parse(readFileSync(new URL("./fixtures/reference.json", import.meta.url), "utf8")) as {
  states: {
    name: string;
    sha256: string;
    calls?: { name: string; arguments: Record<string, unknown> }[];
    balances?: { user_id: string; payment_method_id: string; balance: string }[];
  }[];
  float_repr: string[];
  round2: [string, string][];
  json_strings: [string, string][];
};

describe("Python number formatting", () => {
  it("pyFloatRepr equals CPython repr on 412 doubles", () => {
    for (const r of ref.float_repr) expect(pyFloatRepr(Number(r))).toBe(r);
  });
  it("pyRound2 equals CPython round(x, 2), ties to even", () => {
    for (const [x, r] of ref.round2) expect(pyFloatRepr(pyRound2(Number(x)))).toBe(r);
  });
});

describe("Python json.dumps strings", () => {
  it("escapes like ensure_ascii (DEL, controls, non-ASCII, surrogate pairs)", () => {
    for (const [s, dumped] of ref.json_strings) expect(pyJsonDumps(s)).toBe(dumped);
    expect(pyJsonDumps({ b: [1.5, null, true], a: "x" }, { sortKeys: true })).toBe(
      '{"a": "x", "b": [1.5, null, true]}',
    );
  });
});

describe("DB hash", () => {
  for (const state of ref.states) {
    it(`matches upstream's get_dict_hash for state "${state.name}"`, () => {
      const db = loadRetailDb();
      const tools = new RetailTools(db);
      for (const call of state.calls ?? []) {
        const out = tools.invoke(call.name, call.arguments);
        expect(out.error, out.content).toBe(false);
      }
      for (const b of state.balances ?? []) {
        const m = db.userForWrite(b.user_id).payment_methods[b.payment_method_id];
        if (m.source !== "gift_card") throw new Error("fixture names a non-gift-card method");
        m.balance = Number(b.balance);
      }
      expect(hashRetailDb(db)).toBe(state.sha256);
    });
  }

  it("a fresh view is not affected by writes to another view", () => {
    const a = loadRetailDb();
    const before = hashRetailDb(a);
    const b = a.fresh();
    new RetailTools(b).invoke("modify_user_address", {
      user_id: "noah_brown_6181",
      address1: "1 A St",
      address2: "",
      city: "X",
      state: "Y",
      country: "USA",
      zip: "00000",
    });
    expect(hashRetailDb(b)).not.toBe(before);
    expect(hashRetailDb(a)).toBe(before);
    expect(hashRetailDb(loadRetailDb())).toBe(before);
  });
});

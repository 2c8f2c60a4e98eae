// interactions.json keeps Python floats as floats: an event's 1.0 is written "1.0", not "1", and
// the recorder stores a copy (later changes to the caller's object do not leak in).
import { describe, expect, it } from "vitest";
import { InteractionsRecorder } from "../../src/clembench/interactions.js";
import { pyFloat, pyJsonDumps } from "../../src/clembench/py.js";

describe("InteractionsRecorder", () => {
  it("logEvent keeps PyFloat values and copies the action", () => {
    const rec = new InteractionsRecorder("g", "e", 0);
    const action = { type: "metadata", content: { goals_achieved: pyFloat(1), list: [pyFloat(2), 3] } };
    rec.logEvent("GM", "GM", action as never);
    action.content.list.push(4);
    const json = pyJsonDumps(rec.interactions.turns[0][0].action);
    expect(json).toContain('"goals_achieved": 1.0');
    expect(json).toMatch(/"list": \[\s*2\.0,\s*3\s*\]/);
  });
});

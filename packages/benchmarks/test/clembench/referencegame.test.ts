import { describe, expect, it } from "vitest";
import {
  gridMatchingFollower,
  gridReadingGiver,
  matchesReferencePattern,
  pyJsonDumps,
  referencegame,
  replay,
} from "../../src/clembench/index.js";
import { ep, play, sentTo, spec } from "./helpers.js";

const s0 = spec("referencegame"); // letter_grids/0, target "first"
const P1 = s0.instance.player_1_response_pattern as string;
const P2 = s0.instance.player_2_response_pattern as string;

describe("referencegame patterns (strict mode)", () => {
  it("giver: 'expression:' any case, one line only", () => {
    expect(matchesReferencePattern(P1, "strict", "Expression: the one with two holes")).not.toBeNull();
    expect(matchesReferencePattern(P1, "strict", "EXPRESSION:the one")).not.toBeNull();
    expect(matchesReferencePattern(P1, "strict", "Expression: a\nmore")).toBeNull();
    expect(matchesReferencePattern(P1, "liberal", "Expression: a\nmore")).not.toBeNull();
    expect(matchesReferencePattern(P1, "strict", "The expression: a")).toBeNull();
  });
  it("follower: 'answer:' + first|second|third|1|2|3, trailing text on the same line allowed", () => {
    expect(matchesReferencePattern(P2, "strict", "Answer: first")?.groups?.response).toBe("first");
    expect(matchesReferencePattern(P2, "strict", "answer: Second grid.")?.groups?.response).toBe("Second");
    expect(matchesReferencePattern(P2, "strict", "Answer: 3")).not.toBeNull();
    expect(matchesReferencePattern(P2, "strict", "Answer: fourth")).toBeNull();
    expect(matchesReferencePattern(P2, "strict", "Answer: first\nbecause")).toBeNull();
  });
});

describe("referencegame episodes", () => {
  it("the follower's prompt carries the giver's whole reply; correct → 100", async () => {
    const r = await play(referencegame, [replay(["Expression: the grid with two holes"]), replay(["Answer: First"])]);
    expect(sentTo(r, "Player 1")[0]).toBe(s0.instance.player_1_prompt_header);
    expect(sentTo(r, "Player 2")[0]).toBe(
      (s0.instance.player_2_prompt_header as string).replace(
        "TARGET_EXPRESSION",
        "Expression: the grid with two holes",
      ),
    );
    expect(ep(r)).toMatchObject({
      Aborted: 0,
      Success: 1,
      Lose: 0,
      "Main Score": 100,
      "Request Count": 2,
      "Generated Expression Length": 35,
      "Generated Expression Number of Tokens": 6,
      "Request Success Ratio": 1,
    });
  });
  it("a wrong label → 0 and Lose", async () => {
    const r = await play(referencegame, [replay(["Expression: x"]), replay(["Answer: 2"])]);
    expect(ep(r)).toMatchObject({ Aborted: 0, Success: 0, Lose: 1, "Main Score": 0 });
  });
  it("giver abort: Success, Lose and Main Score are NaN", async () => {
    const r = await play(referencegame, [replay(["Sure! Expression: x"]), replay([])]);
    const s = ep(r);
    expect(s).toMatchObject({ Aborted: 1, "Aborted at Player 1": 1, "Aborted at Player 2": 0, "Request Count": 1 });
    for (const k of ["Success", "Lose", "Main Score", "Generated Expression Length"])
      expect(Number.isNaN(s[k])).toBe(true);
    expect(pyJsonDumps(r.scores)).toContain('"Success": NaN');
  });
  it("follower abort after two lines in strict mode", async () => {
    const r = await play(referencegame, [replay(["Expression: x"]), replay(["Answer: first\nIt has two holes."])]);
    expect(ep(r)).toMatchObject({
      Aborted: 1,
      "Aborted at Player 2": 1,
      "Request Count": 2,
      "Parsed Request Count": 1,
      "Request Success Ratio": 0.5,
    });
  });
  it("scripted giver/follower solve every experiment's first instance", async () => {
    for (let e = 0; e < 5; e++) {
      const r = await play(referencegame, [gridReadingGiver(), gridMatchingFollower()], e, 0);
      expect(ep(r).Success).toBe(1);
    }
  });
});

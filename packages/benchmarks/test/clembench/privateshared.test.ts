import { describe, expect, it } from "vitest";
import {
  cohenKappa,
  hasContinuation,
  type PrivateSharedWords,
  parseProbingResponse,
  privateshared,
  privateSharedBenchScore,
  privateSharedOracle,
  pyJsonDumps,
  ScriptedBackend,
} from "../../src/clembench/index.js";
import { ep, gmEvents, play, sentTo, spec } from "./helpers.js";

const s0 = spec("privateshared"); // travel-booking/0
const words = { ASIDE: "ASIDE: ", YES: "yes", NO: "no" } as PrivateSharedWords;

describe("privateshared parsing", () => {
  it("probe replies: ASIDE: first, one line, then yes/no as a prefix (lowercased)", () => {
    expect(parseProbingResponse("ASIDE: Yes, I did.", words)).toBe("yes");
    expect(parseProbingResponse("ASIDE: nope", words)).toBe("no"); // prefix quirk
    expect(parseProbingResponse("ASIDE: maybe", words)).toBe("NA");
    expect(parseProbingResponse("aside: yes", words)).toBe("NA");
    expect(parseProbingResponse("ASIDE: yes\nbecause", words)).toBe("NA");
    expect(parseProbingResponse("ASIDE: yes\n\n", words)).toBe("yes");
  });
  it("continuation means a newline left after stripping outer newlines", () => {
    expect(hasContinuation("\nANSWER: x\n")).toBe(false);
    expect(hasContinuation("ANSWER: x\ny")).toBe(true);
  });
  it("kappa as sklearn (NaN with a single label) and the harmonic-mean score", () => {
    expect(cohenKappa([0, 0, 1, 1], [0, 0, 1, 1])).toBe(1);
    expect(cohenKappa([0, 1, 0, 1], [0, 0, 1, 1])).toBe(0);
    expect(Number.isNaN(cohenKappa([1, 1], [1, 1]))).toBe(true);
    expect(privateSharedBenchScore(1, 1)).toBe(100);
    expect(privateSharedBenchScore(0.5, 0)).toBe(0);
    expect(privateSharedBenchScore(1, 0.5)).toBeCloseTo(66.6667, 3);
  });
});

describe("privateshared episodes", () => {
  it("perfect bookkeeping: probes before/after every answer, Main Score 100, Success", async () => {
    const r = await play(privateshared, [privateSharedOracle(s0.instance)]);
    const s = ep(r);
    expect(s).toMatchObject({ Aborted: 0, Success: 1, Lose: 0, "Main Score": 100, Accuracy: 1, Kappa: 1 });
    // 6 probing rounds × 5 probes + 5 answers
    expect(s["Request Count"]).toBe(35);
    const toAnswerer = sentTo(r, "Player 1");
    expect(toAnswerer[0]).toBe(s0.instance.initial_prompt); // pseudo turn
    expect(toAnswerer[1]).toMatch(/^ME: {2}.+ Answer this question with yes or no and then stop\.$/); // two spaces (quirk)
    // requests.json["to"][3], the instance's request index for the first slot ("to")
    expect(toAnswerer[6]).toBe("TRAVEL-AGENT: What is the destination of your trip?");
    expect(r.interactions?.["Played Probe Rounds"]).toBe(6);
  });

  it("probe retries carry the reprompt suffixes; five failures abort", async () => {
    const bad = new ScriptedBackend(() => "I think so.");
    const r = await play(privateshared, [bad]);
    const s = ep(r);
    expect(s).toMatchObject({ Aborted: 1, Success: 0, Lose: 0, "Request Count": 5, "Violated Request Count": 5 });
    expect(Number.isNaN(s["Main Score"])).toBe(true);
    const probes = sentTo(r, "Player 1").slice(1, 6);
    expect(probes[1]).toMatch(/^ME: Please answer this question carefully\. /);
    expect(probes[4]).toMatch(/^ME: Please think about it carefully\. /);
    expect(gmEvents(r, "invalid format")).toEqual(["Abort: invalid format in probing."]);
    expect(pyJsonDumps(r.scores)).toContain('"Kappa": NaN');
  });

  it("a bad answer (no ANSWER: tag) is a violated request, not an abort; its slot gets no probing", async () => {
    const oracle = privateSharedOracle(s0.instance);
    let n = 0;
    const flaky = new ScriptedBackend(async (m, c) => {
      if (!c.content.startsWith("ME:") && n++ === 0) {
        await oracle.respond(m, c); // keep the oracle's counters in step
        return "Paris, I think";
      }
      return oracle.respond(m, c);
    });
    const r = await play(privateshared, [flaky]);
    const s = ep(r);
    expect(s.Aborted).toBe(0);
    expect(s["Violated Request Count"]).toBe(1);
    expect(r.interactions?.["Filled Slots"]).toEqual([true, true, true, true]);
    expect(r.interactions?.["Played Probe Rounds"]).toBe(5);
  });

  it("saying nothing useful: slot filling 0 → Main Score 0 (an int, as Python's 0)", async () => {
    const r = await play(privateshared, [
      new ScriptedBackend((_m, c) => (c.content.startsWith("ME:") ? "ASIDE: no" : "ANSWER: I'd rather not say.")),
    ]);
    expect(ep(r)).toMatchObject({ Aborted: 0, Lose: 1, "Slot-Filling-Accuracy": 0, "Main Score": 0 });
    expect(pyJsonDumps(r.scores)).toContain('"Main Score": 0,');
  });
});

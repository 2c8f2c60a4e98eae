import { describe, expect, it } from "vitest";
import {
  candidateByCandidateGuesser,
  checkGuessWhatQuestion,
  type GuessWhatPatterns,
  guesswhat,
  pyListRepr,
  targetNamingAnswerer,
} from "../../src/clembench/index.js";
import { ep, play, sentTo, spec } from "./helpers.js";

const s0 = spec("guesswhat");
const patterns = s0.experiment as unknown as GuessWhatPatterns;

describe("guesswhat rules", () => {
  it("candidate list enters the prompt as a Python list repr", async () => {
    expect(pyListRepr(["Copper", "it's", 'say "hi"'])).toBe(`['Copper', "it's", 'say "hi"']`);
    const r = await play(guesswhat, [candidateByCandidateGuesser(), targetNamingAnswerer()]);
    expect(sentTo(r, "Player 1")[0]).toContain("List of candidate words: ['Copper', 'Lead', 'Pepsi'");
    expect(sentTo(r, "Player 1")[0]).toContain("questions you can ask to help you narrow down the options is 7.");
  });
  it("content patterns are case-sensitive on the lowercased question; the direct-guess pattern never fires", () => {
    expect(
      checkGuessWhatQuestion("QUESTION: Does the target word contain the letter e?", "QUESTION:", patterns),
    ).toHaveLength(1);
    expect(checkGuessWhatQuestion("QUESTION: Is the target word an adjective?", "QUESTION:", patterns)).toHaveLength(1);
    expect(checkGuessWhatQuestion("QUESTION: Is the target word 'Pepsi'?", "QUESTION:", patterns)).toEqual([]);
    expect(checkGuessWhatQuestion("QUESTION: Is it a drink?", "QUESTION:", patterns)).toEqual([]);
  });
  it("scripted guesser and answerer win; speed by rounds (100 within 5, then 100·(8 − rounds)/3)", async () => {
    for (let i = 0; i < 4; i++) {
      const r = await play(guesswhat, [candidateByCandidateGuesser(), targetNamingAnswerer()], 0, i);
      const s = ep(r);
      expect(s.Success).toBe(1);
      const rounds = r.interactions!.turns.length;
      expect(s["Main Score"]).toBeCloseTo(rounds <= 5 ? 100 : Math.max(0, (100 * (8 - rounds)) / 3), 10);
    }
  });
});

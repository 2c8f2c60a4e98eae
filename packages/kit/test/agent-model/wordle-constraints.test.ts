import { clembench } from "@kiln/benchmarks";
import { mulberry32 } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { clemCorpus } from "../../src/agent-model/clem-players.js";
import { agentModelSettings } from "../../src/agent-model/settings.js";
import { wordleConstraints, wordleDictionary, wordlePlayer } from "../../src/agent-model/wordle-players.js";

/** The history a game of `target` shows after `guesses`: each guess with clembench's feedback for it. */
const played = (target: string, guesses: readonly string[]) =>
  guesses.map((g) => [g, clembench.wordleFeedback(g, target)] as const);

describe("wordleConstraints", () => {
  it("says where letters are, where they are not, and which are out", () => {
    expect(wordleConstraints([])).toBe("");
    expect(wordleConstraints(played("sniff", ["crane"]))).toBe("n is in the word, not 4th; a, c, e and r are out");
    expect(wordleConstraints(played("sniff", ["crane", "snout"]))).toBe(
      "s is 1st; n is 2nd; n is in the word, not 4th; a, c, e, o, r, t and u are out",
    );
    // A letter red in one place but present elsewhere is not called out.
    expect(wordleConstraints(played("sniff", ["fluff"]))).not.toMatch(/\bf\b[^;]*out/);
  });

  it("holds for the target on random games (fresh targets and guesses)", () => {
    const words = wordleDictionary();
    const rng = mulberry32(Date.now() % 1_000_000);
    for (let game = 0; game < 200; game++) {
      const target = words[Math.floor(rng() * words.length)];
      const guesses = Array.from({ length: 1 + Math.floor(rng() * 5) }, () => words[Math.floor(rng() * words.length)]);
      const text = wordleConstraints(played(target, guesses));
      for (const part of text.split("; ").filter((p) => p !== "")) {
        const green = /^([a-z]) is (\d)\w\w$/.exec(part);
        const yellow = /^([a-z]) is in the word, not (.*)$/.exec(part);
        const out = /^(.*) (?:is|are) out$/.exec(part);
        if (green) expect(target[Number(green[2]) - 1], `${target}: ${part}`).toBe(green[1]);
        else if (yellow) {
          expect(target, `${target}: ${part}`).toContain(yellow[1]);
          for (const p of yellow[2].split(" or ")) expect(target[Number.parseInt(p, 10) - 1]).not.toBe(yellow[1]);
        } else if (out) {
          for (const letter of out[1].split(/, | and /)) expect(target, `${target}: ${part}`).not.toContain(letter);
        } else throw new Error(`unexpected part "${part}" of "${text}"`);
      }
    }
  });
});

describe("the Wordle corpus with the constraints spelt out", () => {
  const episodes = { wordle: 4, wordle_withclue: 2 };

  it("is the shipped corpus at rate 0, and spells the feedback at rate 1", async () => {
    const plain = await clemCorpus({ seed: 3, episodes });
    const zero = await clemCorpus({ seed: 3, episodes, wordleConstraintRate: 0 });
    expect(zero).toEqual(plain);
    const spelt = await clemCorpus({ seed: 3, episodes, wordleConstraintRate: 1 });
    const replies = spelt.flatMap((d) =>
      (d.messages ?? []).filter((m) => m.role === "assistant").map((m) => m.content),
    );
    const afterFeedback = replies.filter((r) => !/400 words fit|crane$/.test(r ?? ""));
    expect(afterFeedback.length).toBeGreaterThan(0);
    expect(
      afterFeedback.some((r) => /(is|are) out; \d+ words fit the feedback|the critic has spoken/.test(r ?? "")),
    ).toBe(true);
    expect(replies.some((r) => /is \d(st|nd|rd|th); /.test(r ?? ""))).toBe(true);
  });

  it("takes its rate from kiln agent-model --set, and refuses one outside 0..1", () => {
    expect(agentModelSettings([["corpus.wordleConstraintRate", "0.5"]]).corpus.wordleConstraintRate).toBe(0.5);
    expect(() => agentModelSettings([["corpus.wordleConstraintRate", "2"]])).toThrow(/from 0 to 1, got "2"/);
    expect(() => wordlePlayer("solver", ["crane"], 0, { constraintRate: -1 })).toThrow(RangeError);
  });
});

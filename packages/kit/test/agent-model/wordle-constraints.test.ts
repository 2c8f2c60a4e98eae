import { clembench } from "@kiln/benchmarks";
import { type Message, mulberry32 } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { loadTokenizer } from "@kiln/models";
import { clemCorpus } from "../../src/agent-model/clem-players.js";
import { agentModelDir } from "../../src/agent-model/paths.js";
import { agentModelSettings } from "../../src/agent-model/settings.js";
import {
  readWordleReplies,
  wordleConstraints,
  wordleDictionary,
  wordlePlayer,
} from "../../src/agent-model/wordle-players.js";

/** The history a game of `target` shows after `guesses`: each guess with clembench's feedback for it. */
const played = (target: string, guesses: readonly string[]) =>
  guesses.map((g) => [g, clembench.wordleFeedback(g, target)] as const);

describe("wordleConstraints", () => {
  it("says where letters are, where they are not, and which are out", () => {
    expect(wordleConstraints([])).toBe("");
    expect(wordleConstraints(played("sniff", ["crane"]))).toBe("n not 4; out a c e r");
    expect(wordleConstraints(played("sniff", ["crane", "snout"]))).toBe("s n _ _ _; n not 4; out a c e o r t u");
    // A letter red in one place but present elsewhere is not called out.
    expect(wordleConstraints(played("sniff", ["fluff"]))).toBe("_ _ _ f f; out l u");
  });

  it("holds for the target on random games (fresh targets and guesses)", () => {
    const words = wordleDictionary();
    const rng = mulberry32(Date.now() % 1_000_000);
    for (let game = 0; game < 200; game++) {
      const target = words[Math.floor(rng() * words.length)];
      const guesses = Array.from({ length: 1 + Math.floor(rng() * 5) }, () => words[Math.floor(rng() * words.length)]);
      const text = wordleConstraints(played(target, guesses));
      for (const part of text.split("; ").filter((p) => p !== "")) {
        const greens = /^[a-z_]( [a-z_]){4}$/.test(part) ? part.split(" ") : undefined;
        const yellow = /^([a-z]) not ((?:\d ?)+)$/.exec(part);
        const out = /^out ((?:[a-z] ?)+)$/.exec(part);
        if (greens)
          greens.forEach((letter, p) => {
            if (letter !== "_") expect(target[p], `${target}: ${part}`).toBe(letter);
          });
        else if (yellow) {
          expect(target, `${target}: ${part}`).toContain(yellow[1]);
          for (const p of yellow[2].split(" ")) expect(target[Number.parseInt(p, 10) - 1]).not.toBe(yellow[1]);
        } else if (out) {
          for (const letter of out[1].split(" ")) expect(target, `${target}: ${part}`).not.toContain(letter);
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
      afterFeedback.some((r) => /; out( [a-z])+; \d+ words fit the feedback|the critic has spoken/.test(r ?? "")),
    ).toBe(true);
    expect(replies.some((r) => /explanation: [a-z_]( [a-z_]){4}; /.test(r ?? ""))).toBe(true);
  });

  it("keeps a spelt-out reply within the 64 tokens kiln repro arp gives a reply", async () => {
    // The shipped tokenizer was not learnt on these replies, so it cuts them finer than a build's own would.
    const tokenizer = await loadTokenizer(agentModelDir());
    const spelt = await clemCorpus({
      seed: 5,
      episodes: { wordle: 12, wordle_withcritic: 6 },
      wordleConstraintRate: 1,
    });
    const lengths = spelt.flatMap((d) =>
      (d.messages ?? []).filter((m) => m.role === "assistant").map((m) => tokenizer.encode(m.content ?? "").length),
    );
    const within = lengths.filter((n) => n + 2 <= 64).length;
    expect(within / lengths.length).toBeGreaterThan(0.97);
  });

  it("takes its rate from kiln agent-model --set, and refuses one outside 0..1", () => {
    expect(agentModelSettings([["corpus.wordleConstraintRate", "0.5"]]).corpus.wordleConstraintRate).toBe(0.5);
    expect(() => agentModelSettings([["corpus.wordleConstraintRate", "2"]])).toThrow(/from 0 to 1, got "2"/);
    expect(() => wordlePlayer("solver", ["crane"], 0, { constraintRate: -1 })).toThrow(RangeError);
  });
});

describe("readWordleReplies", () => {
  const feedback = (guess: string, target: string) => ({
    role: "user" as const,
    content: `guess_feedback: ${clembench.wordleFeedback(guess, target)}\n\nProvide your response only in this format.`,
  });
  const reply = (explanation: string, guess: string) => ({
    role: "assistant" as const,
    content: `explanation: ${explanation}\nguess: ${guess}`,
  });

  it("reads the constraint corpus's own player as exact, fitting and never repeating", async () => {
    const words = wordleDictionary();
    const rng = mulberry32(Date.now() % 1_000_000);
    for (let game = 0; game < 20; game++) {
      const target = words[Math.floor(rng() * words.length)];
      const player = wordlePlayer("solver", words, game, { constraintRate: 1 });
      const messages: Message[] = [{ role: "user", content: "Let's play Wordle." }];
      for (let turn = 0; turn < 6; turn++) {
        const { message } = await player.generate(messages);
        messages.push(message);
        const guess = /guess: (\w+)/.exec(message.content ?? "")?.[1] ?? "";
        if (guess === target) break;
        messages.push(feedback(guess, target));
      }
      const readings = readWordleReplies(messages);
      expect(readings.length, target).toBeGreaterThan(0);
      for (const r of readings) {
        expect(r, target).toMatchObject({ constraintsExact: true, fitsFeedback: true, repeatsPrevious: false });
      }
    }
  });

  it("marks a wrong line, a guess the feedback rules out and a repeated guess, and skips the critic's turns", () => {
    const target = "sniff";
    const messages: Message[] = [
      { role: "user", content: "Let's play Wordle." },
      reply("400 words fit the feedback", "crane"),
      feedback("crane", target),
      reply("n not 4; out a c e r; 3 words fit the feedback", "snout"),
      feedback("snout", target),
      // Drops the greens: not the line wordleConstraints writes for this history.
      reply("n not 4; out a c e o r t u; 1 words fit the feedback", "snout"),
      { role: "user", content: "clue: a cold\nguess_agreement: no\nagreement_explanation: no" },
      reply("the critic has spoken, I keep my guess", "snout"),
      feedback("snout", target),
      reply("s n _ _ _; n not 4; out a c e o r t u; 1 words fit the feedback", "sniff"),
    ];
    const readings = readWordleReplies(messages);
    expect(readings.map((r) => r.feedbacks)).toEqual([1, 2, 3]);
    expect(readings.map((r) => r.constraintsExact)).toEqual([true, false, true]);
    expect(readings.map((r) => r.fitsFeedback)).toEqual([true, false, true]);
    expect(readings.map((r) => r.repeatsPrevious)).toEqual([false, true, false]);
  });
});

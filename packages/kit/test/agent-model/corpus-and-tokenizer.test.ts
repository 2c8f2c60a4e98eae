import { GuessNumberEnv, ScriptedPolicy, guessNumberHistory, isSuccessful, runEpisodes } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { trainBpeTokenizer } from "../../src/agent-model/bpe.js";
import { documentRow, documentText } from "../../src/agent-model/build.js";
import { guessNumberCorpus } from "../../src/agent-model/corpus.js";
import { type GuessSkill, guessNumberDiagnose, guessPlayerScript } from "../../src/agent-model/guess-number-players.js";
import { GUESS_NUMBER_LESSON } from "../../src/agent-model/notes.js";
import { cleanStory } from "../../src/agent-model/plain-text.js";

async function successRate(skill: GuessSkill, episodes: number): Promise<number> {
  const r = await runEpisodes({
    makeEnv: () => new GuessNumberEnv(),
    policy: new ScriptedPolicy({ id: skill, script: guessPlayerScript(skill) }),
    episodes,
    baseSeed: 123,
    limits: { maxTurns: 7 },
    concurrency: 1,
  });
  return r.trajectories.filter(isSuccessful).length / episodes;
}

describe("guess-number players", () => {
  it("rank by skill: bisection always solves 1..100 in 7 turns, the stepper and the erratic player mostly do not", async () => {
    const bisect = await successRate("bisect", 60);
    const stepper = await successRate("stepper", 60);
    const erratic = await successRate("erratic", 60);
    expect(bisect).toBe(1);
    expect(stepper).toBeLessThan(0.6);
    expect(erratic).toBeLessThan(0.6);
  });

  it("read the feasible range from the conversation", () => {
    const call = (id: string, n: number) => ({
      role: "assistant" as const,
      content: null,
      tool_calls: [{ id, type: "function" as const, function: { name: "guess", arguments: JSON.stringify({ n }) } }],
    });
    const h = guessNumberHistory([
      { role: "user", content: "I picked a number between 1 and 100. Make a guess." },
      call("a", 50),
      { role: "tool", tool_call_id: "a", content: "higher" },
      call("b", 75),
      { role: "tool", tool_call_id: "b", content: "lower" },
    ]);
    expect(h).toEqual({ low: 51, high: 74, guesses: [50, 75], sawLower: true });
  });
});

describe("guessNumberDiagnose", () => {
  it("flags guesses the feedback ruled out and repairs them with the bisecting guess", async () => {
    const r = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: new ScriptedPolicy({ id: "erratic", script: guessPlayerScript("erratic") }),
      episodes: 40,
      baseSeed: 9,
      limits: { maxTurns: 7 },
      concurrency: 1,
    });
    const { invalidMove, repair } = guessNumberDiagnose();
    let flagged = 0;
    let clean = 0;
    for (const t of r.trajectories)
      t.turns.forEach((turn, i) => {
        const prompt = t.prompt.concat(t.turns.slice(0, i).flatMap((x) => [x.message, ...x.observations]));
        const h = guessNumberHistory(prompt);
        const call = turn.message.tool_calls?.[0];
        let n: number | null = null;
        try {
          n = call ? JSON.parse(call.function.arguments).n : null;
        } catch {
          n = null;
        }
        const expected = !Number.isInteger(n) || (n as number) < h.low || (n as number) > h.high;
        expect(invalidMove(turn.message, t, i)).toBe(expected);
        if (expected) {
          flagged++;
          const fixed = repair(prompt, turn, ["invalid"]);
          const m = JSON.parse(fixed?.tool_calls?.[0].function.arguments ?? "{}").n;
          expect(m).toBe(Math.floor((h.low + h.high) / 2));
        } else clean++;
      });
    // The erratic player both ignores the feedback and plays in range: both branches were exercised.
    expect(flagged).toBeGreaterThan(3);
    expect(clean).toBeGreaterThan(3);
  });
});

describe("agent-model corpus", () => {
  it("is deterministic for a seed, mixes the skills, and puts the lesson only in expert transcripts", async () => {
    const a = await guessNumberCorpus({ seed: 5, episodes: 80, noteRate: 0.5 });
    const b = await guessNumberCorpus({ seed: 5, episodes: 80, noteRate: 0.5 });
    const c = await guessNumberCorpus({ seed: 6, episodes: 80, noteRate: 0.5 });
    expect(a.map(documentText)).toEqual(b.map(documentText));
    expect(a.map(documentText)).not.toEqual(c.map(documentText));
    const skills = new Set(a.map((d) => d.skill));
    expect(skills).toEqual(new Set(["bisect", "stepper", "erratic"]));
    const noted = a.filter((d) => documentText(d).includes(GUESS_NUMBER_LESSON));
    expect(noted.length).toBeGreaterThan(0);
    expect(noted.every((d) => d.skill === "bisect")).toBe(true);
    expect(noted.length).toBeLessThan(a.filter((d) => d.skill === "bisect").length);
  });
});

describe("BPE tokenizer learnt from the corpus", () => {
  it("round-trips every document, keeps digits single, and shortens the text", async () => {
    const docs = await guessNumberCorpus({ seed: 1, episodes: 30 });
    const texts = [...docs.map(documentText), "Once upon a time, a cat sat on the mat.<|endoftext|>"];
    const tok = trainBpeTokenizer(texts, 300);
    // A corpus this small runs out of pairs that occur twice before 300: every word is one token then.
    expect(tok.vocabSize).toBeGreaterThan(150);
    expect(tok.vocabSize).toBeLessThanOrEqual(300);
    expect(trainBpeTokenizer(texts, 160).vocabSize).toBe(160);
    for (const t of texts) expect(tok.decode(tok.encode(t))).toBe(t);
    const ids = tok.encode("guess 57");
    const pieces = ids.map((i) => tok.decode([i]));
    expect(pieces).toContain("5");
    expect(pieces).toContain("7");
    const total = texts.reduce((a, t) => a + tok.encode(t).length, 0);
    expect(total).toBeLessThan(0.5 * texts.reduce((a, t) => a + t.length, 0));
    // The chat template's special tokens are single ids.
    expect(tok.encode("<|im_start|>assistant\n")[0]).toBe(1);
  });

  it("adds the corpus's characters beyond ASCII to the alphabet, and refuses a vocabulary too small for it", () => {
    const tok = trainBpeTokenizer(["a café — au lait", "café"], 110);
    expect(tok.decode(tok.encode("café — ok"))).toBe("café — ok");
    expect(() => trainBpeTokenizer(["café"], 99)).toThrow(/vocabSize/);
  });

  it("puts a windowed document's loss on its last reply only", async () => {
    const docs = await guessNumberCorpus({ seed: 2, episodes: 3 });
    const tok = trainBpeTokenizer(docs.map(documentText), 260);
    const messages = docs[0].messages!;
    const lastReply = messages.map((m) => m.role).lastIndexOf("assistant");
    const doc = { ...docs[0], messages: messages.slice(0, lastReply + 1), lossOn: "last" as const };
    const row = documentRow(doc, tok, 10_000);
    const lossFrom = row.mask.indexOf(1);
    expect(Array.from(row.mask.subarray(lossFrom)).every((m) => m === 1)).toBe(true);
    const reply = tok.decode(Array.from(row.ids.subarray(lossFrom)));
    expect(reply.startsWith("<tool_call>")).toBe(true);
    expect(reply.split("<|im_start|>").length).toBe(1);
    expect(documentRow(docs[0], tok, 10_000).mask.every((m) => m === 1)).toBe(true);
    // Too long: the end (the reply) is kept.
    const cut = documentRow(doc, tok, 20);
    expect(cut.ids.length).toBe(20);
    expect(Array.from(cut.ids)).toEqual(Array.from(row.ids.subarray(row.ids.length - 20)));
  });
});

describe("plain text", () => {
  it("cleans sampled stories to printable ASCII ending at a sentence", () => {
    expect(cleanStory("Tom  said \u201chi\u201d to his friend.\n He ran\u00e9 away and")).toBe(
      'Tom said "hi" to his friend.',
    );
  });
});

import { LocalPolicy } from "@kiln/models";
import type { Message } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { GuidedPolicy, divergence, guidedLogNormaliser, guidedLogprobs } from "../../src/recipes/guided-teacher.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";

const TARGET = "go north";
const conversation: Message[] = [
  { role: "system", content: "You walk a maze." },
  { role: "user", content: "Which way?" },
];
/** The privileged part of a prompt: a trailing system message "target: …". */
const withTarget = (target: string): Message[] => [...conversation, { role: "system", content: `target: ${target}` }];
const split = (messages: Message[]) => {
  const last = messages[messages.length - 1];
  return typeof last.content === "string" && last.content.startsWith("target: ")
    ? { messages: messages.slice(0, -1), target: last.content.slice("target: ".length) }
    : { messages, target: null };
};

function policy(): LocalPolicy {
  return new LocalPolicy({ ...tinyChat({ seed: 3, std: 0.2 }), batching: false });
}

describe("the guided teacher: p_T ∝ p · e^{g·[token continues the target]}", () => {
  it("is a distribution: over a whole vocabulary the guided probabilities sum to 1, the target's token gains", () => {
    const p = [0.5, 0.3, 0.15, 0.05];
    for (const g of [0.5, 3, 8]) {
      for (let n = 0; n < p.length; n++) {
        const z = guidedLogNormaliser(Math.log(p[n]), g);
        const q = p.map((x, i) => Math.exp(Math.log(x) + (i === n ? g : 0) - z));
        expect(q.reduce((a, b) => a + b, 0)).toBeCloseTo(1, 12);
        expect(q[n]).toBeGreaterThan(p[n]);
      }
    }
    // A token the model is sure of stays sure, and a normaliser of an impossible token is 0.
    expect(guidedLogNormaliser(0, 8)).toBeCloseTo(8, 12);
    expect(guidedLogNormaliser(Number.NEGATIVE_INFINITY, 8)).toBe(0);
  });

  it("tilts the tokens that follow the target, the one that leaves it, and none after", () => {
    const target = [5, 6, 7, 2];
    const ids = [5, 6, 9, 2];
    const lp = [Math.log(0.5), Math.log(0.9), Math.log(0.2), Math.log(0.6)];
    expect(divergence(ids, target)).toBe(2);
    const g = 4;
    const targetLp = Math.log(0.3); // the model's log-prob of 7 where the completion made 9
    const out = guidedLogprobs(ids, lp, target, g, targetLp);
    expect(out[0]).toBeCloseTo(Math.log((0.5 * Math.exp(g)) / (0.5 + 0.5 * Math.exp(g))), 12);
    expect(out[1]).toBeCloseTo(Math.log((0.9 * Math.exp(g)) / (0.1 + 0.9 * Math.exp(g))), 12);
    expect(out[2]).toBeCloseTo(Math.log(0.2 / (0.7 + 0.3 * Math.exp(g))), 12);
    expect(out[3]).toBe(lp[3]);
    expect(() => guidedLogprobs(ids, lp, target, g)).toThrow(/where the completion leaves it/);
  });

  it("plays the target greedily when the guidance outweighs the model, and the model's own reply when it is tiny", async () => {
    const inner = policy();
    const plain = await inner.generate(conversation, undefined, { maxTokens: 12, temperature: 0 });
    const strong = new GuidedPolicy(inner, { guidance: 60, split });
    const g = await strong.generate(withTarget(TARGET), undefined, { maxTokens: 40, temperature: 0 });
    expect(g.text).toBe(TARGET);
    expect(g.finishReason).toBe("stop");
    const weak = new GuidedPolicy(inner, { guidance: 1e-9, split });
    const w = await weak.generate(withTarget(TARGET), undefined, { maxTokens: 12, temperature: 0 });
    expect(w.completionTokenIds).toEqual(plain.completionTokenIds);
    // No target: the inner policy, unchanged.
    expect((await strong.generate(conversation, undefined, { maxTokens: 12, temperature: 0 })).text).toBe(plain.text);
    await expect(strong.generate(withTarget(TARGET), undefined, { temperature: 1 })).rejects.toThrow(/greedily/);
    expect(() => new GuidedPolicy(inner, { guidance: 0, split })).toThrow(/guidance/);
    expect(() => new GuidedPolicy(inner, { guidance: Number.POSITIVE_INFINITY, split })).toThrow(/guidance/);
  });

  it("scores a completion as the model on the stripped prompt, tilted on the target's path", async () => {
    const inner = policy();
    const t = new GuidedPolicy(inner, { guidance: 5, split });
    const want = t.targetIds(TARGET);
    const off = [...want.slice(0, 3), inner.tokenizer.encode("s")[0], ...want.slice(4)];
    const base = await inner.score(conversation, off);
    const guided = await t.score(withTarget(TARGET), off);
    expect(guided.tokenIds).toEqual(off);
    for (let i = 0; i < 3; i++) expect(guided.logprobs[i]).toBeGreaterThan(base.logprobs[i]);
    expect(guided.logprobs[3]).toBeLessThan(base.logprobs[3]);
    for (let i = 4; i < off.length; i++) expect(guided.logprobs[i]).toBeCloseTo(base.logprobs[i], 5);
    // The top lists: the target's token, tilted, heads the list at a position on the target.
    const top = await t.score(withTarget(TARGET), off, undefined, { topLogprobs: 3 });
    for (const [i, x] of top.logprobs.entries()) expect(x).toBeCloseTo(guided.logprobs[i], 5);
    expect(top.top?.[0].tokenIds[0]).toBe(want[0]);
    expect(top.top?.[0].logprobs[0]).toBeCloseTo(guided.logprobs[0], 5);
    expect(top.top?.[3].tokenIds).toContain(want[3]);
    // No target: the inner score as it is.
    expect((await t.score(conversation, off)).logprobs).toEqual(base.logprobs);
  });
});

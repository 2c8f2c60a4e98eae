import type { Trajectory } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { conversationBatch, preferenceBatch } from "../../src/trainer/chat-batches.js";
import { diagnoseTrajectory, diagnoseTurn, turnLocalPairs } from "../../src/recipes/diagnose.js";
import { successOnlySftSet } from "../../src/recipes/sft-set.js";
import { expertEpisodes, setup } from "./helpers.js";

function withReply(t: Trajectory, turn: number, content: string, issues = false): Trajectory {
  const c = structuredClone(t);
  c.turns[turn].message = { role: "assistant", content };
  c.turns[turn].toolCallIssues = issues ? [{ kind: "bad_json", index: 0, message: "not JSON" }] : [];
  return c;
}

describe("ARP data: SFT set, diagnoser, turn-local pairs", () => {
  it("keeps only successful episodes, capped per environment", async () => {
    const eps = await expertEpisodes(5);
    expect(eps.every((t) => t.outcome.scores.success === 1)).toBe(true);
    const failed = structuredClone(eps[0]);
    failed.outcome.scores.success = 0;
    failed.episodeId = "failed";
    expect(successOnlySftSet([failed, ...eps]).length).toBe(5);
    const capped = successOnlySftSet([failed, ...eps], { capPerEnv: 3 });
    expect(capped.length).toBe(3);
    expect(capped[0].messages[0].role).toBe("system");
  });

  it("diagnoses repeats, over-length replies and malformed tool calls", async () => {
    const [t] = await expertEpisodes(1, 3);
    expect(t.turns.length).toBeGreaterThan(2);
    expect(diagnoseTrajectory(t)).toEqual([]);
    const repeat = structuredClone(t);
    repeat.turns[2].message = structuredClone(repeat.turns[0].message);
    expect(diagnoseTurn(repeat, 2)).toEqual(["repeat"]);
    expect(diagnoseTurn(withReply(t, 1, "word ".repeat(30)), 1, { maxChars: 100 })).toEqual(["length"]);
    expect(diagnoseTurn(withReply(t, 1, "<tool_call>{oops</tool_call>", true), 1)).toEqual(["invalid"]);
  });

  it("pairs a failing turn with the reference reply at the same state, else a repaired one", async () => {
    const refs = await expertEpisodes(2, 7);
    const bad = withReply(refs[0], 0, "<tool_call>{oops</tool_call>", true);
    const long = withReply(refs[1], 0, `${"let me think ".repeat(10)}`);
    const res = turnLocalPairs([bad, long], refs, { maxChars: 40 });
    expect(res.diagnosed.map((d) => d.modes)).toEqual([["invalid"], ["length"]]);
    expect(res.pairs.length).toBe(2);
    // Reference first: the expert's own turn-0 reply answers exactly this prompt.
    expect(res.pairs[0].source.chosenFrom).toBe("reference");
    expect(res.pairs[0].chosen).toEqual(refs[0].turns[0].message);
    expect(res.pairs[0].rejected.content).toContain("oops");
    // Without references, the over-long plain reply is repaired by truncation at a word boundary.
    const repaired = turnLocalPairs([long], [], { maxChars: 40 });
    expect(repaired.pairs[0].source.chosenFrom).toBe("repair");
    expect((repaired.pairs[0].chosen.content ?? "").length).toBeLessThanOrEqual(40);
    expect(repaired.pairs[0].chosen.content).toMatch(/^let me think/);
    // A malformed call with no reference stays unpaired.
    expect(turnLocalPairs([bad], []).unpaired).toBe(1);
  });

  it("collates assistant-only labels and chosen-then-rejected rows", async () => {
    const { codec } = setup();
    const [t] = await expertEpisodes(1);
    const conv = successOnlySftSet([t]);
    const b = conversationBatch(codec, conv);
    const ids = b.inputIds.dataSync() as Int32Array;
    const labels = b.labels.dataSync() as Int32Array;
    const labelled = Array.from(ids).filter((_, i) => labels[i] !== -100);
    const text = codec.tokenizer.decode(labelled);
    expect(text).toContain('"name": "guess"');
    expect(text).not.toContain("guess-the-number");
    const pb = preferenceBatch(codec, [
      {
        prompt: conv[0].messages.slice(0, 2),
        chosen: { role: "assistant", content: "yes" },
        rejected: { role: "assistant", content: "no!!" },
      },
    ]);
    expect(pb.inputIds.shape[0]).toBe(2);
    const T = pb.inputIds.shape[1];
    const m = pb.completionMask.dataSync() as Float32Array;
    const row = (r: number) =>
      codec.tokenizer.decode(
        Array.from((pb.inputIds.dataSync() as Int32Array).slice(r * T, (r + 1) * T)).filter((_, i) => m[r * T + i]),
      );
    expect(row(0)).toBe("yes<|im_end|>");
    expect(row(1)).toBe("no!!<|im_end|>");
  });
});

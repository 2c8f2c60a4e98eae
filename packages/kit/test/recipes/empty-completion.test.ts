// A first generated token that is a stop token (EOS) gives an empty completion. decode([]) used to
// throw inside the tokenizer, so such episodes errored and were silently counted as failures.
import { LocalPolicy } from "@kiln/models";
import { GuessNumberEnv, runEpisodes } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { setup } from "./helpers.js";

describe("empty completion (EOS as the first token)", () => {
  it("decodes to an empty reply and the episode does not error", async () => {
    const { model, tokenizer, template } = setup(1);
    expect(tokenizer.decode([])).toBe("");
    // Zero final norm → all logits 0 → greedy picks token 0, declared a stop token here.
    model.norm.f32Sync().fill(0);
    const policy = new LocalPolicy({
      id: "eos-first",
      model,
      tokenizer,
      chatTemplate: template,
      defaults: { temperature: 0, maxTokens: 8 },
      sampler: { stopTokenIds: [0] },
    });
    const r = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy,
      episodes: 1,
      concurrency: 1,
      limits: { maxTurns: 2 },
    });
    const t = r.trajectories[0];
    expect(t.outcome.error).toBeUndefined();
    expect(t.outcome.status).not.toBe("error");
    expect(t.turns[0].message.content ?? "").toBe("");
    expect(t.turns[0].completionTokenIds).toEqual([0]);
  });
});

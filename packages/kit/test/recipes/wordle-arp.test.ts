// ARP on a real game: Wordle through clembench's game master as the training environment, with the
// seed's Wordle failure modes diagnosed and paired against the solver's reply at the same state.
import { runEpisodes, turnLocalPairs } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { arpEnvironment } from "../../src/recipes/cli-recipes.js";

describe("kiln arp --env wordle", () => {
  it("plays the solver through the game master; wrong-length, invalid-word and duplicate-field guesses pair with its reply", async () => {
    const setup = arpEnvironment("wordle");
    const source = await runEpisodes({
      makeEnv: setup.makeEnv,
      policy: setup.expert,
      episodes: 1,
      concurrency: 1,
      limits: { maxTurns: 8 },
    });
    const [t] = source.trajectories;
    expect(t.environment.id).toBe("clembench/wordle");
    expect(t.outcome.scores.success).toBe(1);
    const bad = (content: string) => {
      const c = structuredClone(t);
      c.episodeId = `bad-${content.length}`;
      c.turns = [{ ...c.turns[0], message: { role: "assistant", content } }];
      return c;
    };
    const cases: [string, string[]][] = [
      ["explanation: short\nguess: cat", ["length"]],
      ["explanation: made up\nguess: qxzvj", ["invalid"]],
      ["explanation: twice\nguess: crane\nguess: slate", ["duplicate_field"]],
      ["no guess at all", ["invalid"]],
    ];
    const res = turnLocalPairs(
      cases.map(([text]) => bad(text)),
      [t],
      { ...setup.diagnose, maxChars: 400 },
    );
    expect(res.diagnosed.map((d) => d.modes)).toEqual(cases.map(([, modes]) => modes));
    expect(res.pairs.length).toBe(4);
    for (const p of res.pairs) expect(p.chosen).toEqual(t.turns[0].message);
    // Evaluation instances are held out from the training ones.
    const trainIds = new Set<unknown>();
    const evalIds = new Set<unknown>();
    const train = setup.makeEnv();
    const held = setup.makeEvalEnv!();
    for (let s = 0; s < 40; s++) {
      trainIds.add((await train.reset({ seed: s })).info?.instance);
      evalIds.add((await held.reset({ seed: s })).info?.instance);
    }
    expect([...evalIds].some((id) => trainIds.has(id))).toBe(false);
  });
});

// ARP's data over the clembench games: acquisition on training instances only with a per-game cap,
// and the synthetic Wordle turn pairs of B1/B2 (each rejected reply is its chosen reply with one
// fault, in the same context, and faulty by the game's own rules).
import { clembench } from "@kiln/benchmarks";
import { type FailureMode, type Policy, messagesBeforeTurn, mulberry32, runEpisodes } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { acquireClemEpisodes, arpClemGame, wordleDiagnose, wordleTurnCorruption } from "../../src/repro/arp-games.js";
import { isHeldOutInstance } from "../../src/agent-model/clem-split.js";
import { branchDpoPairs } from "../../src/recipes/arp.js";
import { syntheticTurnPairs } from "../../src/recipes/arp-pairs.js";
import { successOnlySftSet } from "../../src/recipes/sft-set.js";

const words = clembench.loadInstances("wordle").experiments[0].lang_keywords as clembench.WordleWords;
const rules = clembench.wordleRules(words);

/** Game ids of a game's instances, by index in its full list. */
function instanceIds(game: string): string[] {
  const def = clembench.getGame(game);
  return clembench
    .listEpisodes(def.name, clembench.loadInstances(def.dataPath ?? def.name))
    .map((e) => `${e.experiment.name}/${e.instance.game_id}`);
}

describe("ARP data over the clembench games", () => {
  it("acquires expert episodes on training instances only, and phase A caps them per game", async () => {
    const games = ["referencegame", "taboo"].map((g) => arpClemGame(g));
    const source = await acquireClemEpisodes(games, 60);
    for (const g of games) {
      const mine = source.filter((t) => t.environment.id === g.envId);
      expect(mine.length).toBe(60);
      const ids = instanceIds(g.game);
      const heldOut = new Set(ids.filter((_, i) => isHeldOutInstance(i)));
      expect(heldOut.size).toBeGreaterThan(0);
      for (const t of mine) {
        const info = t.metadata.resetInfo as { experiment?: string; instance?: number };
        const id = `${info.experiment}/${info.instance}`;
        expect(heldOut.has(id), `${g.game} ${id} is held out`).toBe(false);
      }
      // The evaluation side plays only held-out instances.
      const env = g.makeEvalEnv();
      for (let seed = 0; seed < 8; seed++) {
        const r = await env.reset({ seed });
        expect(heldOut.has(`${r.info?.experiment}/${r.info?.instance}`)).toBe(true);
      }
    }
    expect(source.every((t) => t.outcome.scores.success === 1)).toBe(true);
    const corpus = successOnlySftSet(source, { capPerEnv: 7, seed: 3 });
    expect(corpus.length).toBe(14);
    const referenceTurns = corpus.filter((c) => /Expression:/.test(c.messages[1]?.content ?? "")).length;
    expect(referenceTurns).toBe(7);
  });

  it("synthetic Wordle pairs: same context, the chosen reply with one fault, faulty by the game's rules; counted per mode", async () => {
    const wordle = arpClemGame("wordle");
    const source = await acquireClemEpisodes([wordle], 8);
    const modes: FailureMode[] = ["repeat", "length", "invalid", "duplicate_field"];
    const options = {
      modes,
      corrupt: wordleTurnCorruption(),
      pairsPerMode: 12,
      variantsPerTurn: 2,
      seed: 5,
      diagnose: { ...wordleDiagnose(), maxChars: 400 },
    };
    const r = syntheticTurnPairs(source, options);
    expect(r.goodTurns).toBe(source.reduce((a, t) => a + t.turns.length, 0));
    for (const m of modes) {
      expect(r.candidates[m]).toBeGreaterThan(12);
      expect(r.byMode[m]).toBe(12);
      expect(r.pairs.filter((p) => p.mode === m).length).toBe(12);
    }
    for (const p of r.pairs) {
      const t = source.find((x) => x.episodeId === p.source.episodeId);
      if (!t) throw new Error(`no episode ${p.source.episodeId}`);
      expect(p.prompt).toEqual(messagesBeforeTurn(t, p.source.turn));
      expect(p.chosen).toEqual(t.turns[p.source.turn].message);
      const earlier = clembench.wordleEarlierGuesses(p.prompt, rules);
      expect(clembench.judgeWordleReply(p.chosen.content ?? "", rules, earlier).ok).toBe(true);
      expect(clembench.judgeWordleReply(p.rejected.content ?? "", rules, earlier)).toMatchObject({
        ok: false,
        fault: p.mode,
      });
      const [a, b] = [p.chosen.content ?? "", p.rejected.content ?? ""];
      if (p.mode === "duplicate_field") expect(b.startsWith(`${a}\nguess: `)).toBe(true);
      else expect(b.replace(/guess: \S+$/m, "")).toBe(a.replace(/guess: \S+$/m, ""));
    }
    // Seeded: the same data gives the same pairs; no repeat on a first turn.
    expect(syntheticTurnPairs(source, options).pairs).toEqual(r.pairs);
    expect(r.pairs.some((p) => p.mode === "repeat" && p.source.turn === 0)).toBe(false);
  });

  it("branch pairs: only replies whose downstream scores differ by minMargin, the ties counted", async () => {
    const wordle = arpClemGame("wordle");
    const solver = wordle.experts[0];
    // Half the time the solver's reply, half a wrong-length guess (the game aborts: score 0).
    const rng = mulberry32(11);
    const mixed: Policy = {
      id: "mixed",
      async generate(messages, tools, params) {
        const r = await solver.generate(messages, tools, params);
        if (rng() < 0.5) return r;
        const text = "explanation: a guess\nguess: cat";
        return { ...r, message: { role: "assistant", content: text }, text };
      },
    };
    const forks = (
      await runEpisodes({
        makeEnv: wordle.makeEnv,
        policy: solver,
        episodes: 4,
        concurrency: 1,
        limits: { maxTurns: 12 },
      })
    ).trajectories;
    let candidates = 0;
    let ties = 0;
    const minMargin = 0.05;
    const pairs = await branchDpoPairs({
      trajectories: forks,
      makeEnv: wordle.makeEnv,
      policy: mixed,
      k: 4,
      limits: { maxTurns: 12 },
      minMargin,
      pickTurn: () => 1,
      onFork: (c) => {
        candidates += c.candidates;
        ties += c.ties;
      },
    });
    expect(pairs.length).toBeGreaterThan(0);
    for (const p of pairs) expect(p.chosenScore - p.rejectedScore).toBeGreaterThanOrEqual(minMargin);
    expect(candidates).toBe(pairs.length + ties);
    // With no margin every distinct reply pairs with the best one, ties included.
    let all = 0;
    const again = await branchDpoPairs({
      trajectories: forks,
      makeEnv: wordle.makeEnv,
      policy: mixed,
      k: 4,
      limits: { maxTurns: 12 },
      minMargin: Number.NEGATIVE_INFINITY,
      pickTurn: () => 1,
      onFork: (c) => {
        all += c.candidates;
      },
    });
    expect(again.length).toBe(all);
  });
});

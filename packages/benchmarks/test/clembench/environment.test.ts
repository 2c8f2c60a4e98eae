import { ScriptedPolicy, branchEpisode, runEpisodes } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  ClemGameEnvironment,
  type WordleWords,
  RunnerOptionsError,
  loadGameInstances,
  loadInstances,
  policyFromBackend,
  privateSharedOracle,
  reversingDescriber,
  reversingGuesser,
  wordleSolver,
} from "../../src/clembench/index.js";
import { dataDir, spec } from "./helpers.js";

const words = spec("wordle").experiment.lang_keywords as WordleWords;
const makeEnv = () => new ClemGameEnvironment({ game: "wordle", dataDir, filter: { limitPerExperiment: 2 } });

describe("a clembench game as a rollout environment", () => {
  it("the Wordle solver plays through the game master and scores Main Score / 100", async () => {
    const policy = policyFromBackend(wordleSolver(words.official_words_list), "solver");
    const r = await runEpisodes({ makeEnv, policy, episodes: 2, concurrency: 1, limits: { maxTurns: 8 } });
    for (const t of r.trajectories) {
      expect(t.outcome.status).not.toBe("error");
      expect(t.outcome.scores.success).toBe(1);
      expect(t.outcome.score).toBeGreaterThan(0);
      expect(t.outcome.score).toBeCloseTo(t.outcome.scores.main_score / 100, 12);
      expect(t.prompt[0].content).toMatch(/guess/i);
      expect(t.turns[0].message.content).toMatch(/^explanation: .*\nguess: crane$/);
    }
  });

  it("a malformed reply aborts the game (score 0), and a saved state replays to the same position", async () => {
    const bad = new ScriptedPolicy({ id: "bad", script: () => "guess: party" });
    const r = await runEpisodes({ makeEnv, policy: bad, episodes: 1, concurrency: 1, limits: { maxTurns: 3 } });
    expect(r.trajectories[0].outcome.scores).toMatchObject({ aborted: 1, success: 0 });
    expect(r.trajectories[0].outcome.score).toBe(0);
    // Branch the solver's episode after its first guess: the continuations start from the same feedback.
    const solver = policyFromBackend(wordleSolver(words.official_words_list), "solver");
    const [parent] = (
      await runEpisodes({ makeEnv, policy: solver, episodes: 1, concurrency: 1, limits: { maxTurns: 8 } })
    ).trajectories;
    expect(parent.turns.length).toBeGreaterThan(1);
    const branched = await branchEpisode({
      trajectory: parent,
      turn: 1,
      k: 2,
      makeEnv,
      policy: solver,
      concurrency: 1,
    });
    expect(branched.branches.length).toBe(2);
    for (const c of branched.branches) {
      expect(c.turns[0].message).toEqual(parent.turns[0].message);
      expect(c.outcome.scores.success).toBe(1);
    }
    expect(() => new ClemGameEnvironment({ game: "taboo", dataDir })).toThrow(/give 1 partner backend/);
  });

  it("loads a game's instances by its name, through its data path where it has one", () => {
    expect(loadGameInstances("taboo", dataDir)).toEqual(loadInstances("taboo", dataDir));
    const bbh = loadGameInstances("bbh", dataDir);
    expect(bbh).toEqual(loadInstances("static/bbh", dataDir));
    expect(bbh.experiments.length).toBeGreaterThan(0);
    expect(() => loadGameInstances("chess", dataDir)).toThrow(RunnerOptionsError);
  });

  it("plays instances given in place of the data directory's, validated like the file", async () => {
    const file = loadInstances("taboo", dataDir);
    const given = {
      experiments: file.experiments.map((e) => ({
        ...e,
        game_instances: [
          {
            game_id: 7,
            target_word: "lantern",
            related_word: ["lamp", "light", "candle"],
            target_word_stem: "lantern",
            related_word_stem: ["lamp", "light", "candl"],
          },
        ],
      })),
    };
    const env = new ClemGameEnvironment({ game: "taboo", dataDir, instances: given, partners: [reversingGuesser()] });
    expect(env.instances).toBe(file.experiments.length);
    const r = await runEpisodes({
      makeEnv: () => env,
      policy: policyFromBackend(reversingDescriber(), "describer"),
      episodes: 1,
      concurrency: 1,
      limits: { maxTurns: 4 },
    });
    const t = r.trajectories[0];
    expect(t.prompt.map((m) => m.content).join("\n")).toContain("lantern");
    expect(t.turns[0].message.content).toBe("CLUE: nretnal backwards");
    expect(t.outcome.scores.success).toBe(1);
    expect(
      () => new ClemGameEnvironment({ game: "taboo", dataDir, instances: { experiments: [{ name: "x" }] } as never }),
    ).toThrow(/instances given for taboo: experiment "x" has no "game_instances" list/);
  });

  it("a game that asks before its first await (privateshared) is played, and its pseudo turn opens the prompt", async () => {
    const s0 = spec("privateshared");
    const env = new ClemGameEnvironment({ game: "privateshared", dataDir, filter: { limitPerExperiment: 1 } });
    const r = await runEpisodes({
      makeEnv: () => env,
      policy: policyFromBackend(privateSharedOracle(s0.instance)),
      episodes: [{ id: "ps", seed: 0 }],
      concurrency: 1,
      limits: { maxTurns: 60 },
    });
    const t = r.trajectories[0];
    expect(t.outcome.status).not.toBe("error");
    expect(t.prompt.map((m) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(t.prompt[0].content).toBe(s0.instance.initial_prompt);
    expect(t.prompt[2].content).toMatch(/^ME: /);
    expect(t.outcome.scores.main_score).toBe(100);
  });
});

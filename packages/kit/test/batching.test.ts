// Continuous batching under LocalPolicy (@kiln/models BatchScheduler) on the embedded agent model:
// the same seed gives the same guess-number trajectories, token for token and log-prob for
// log-prob, whether episodes run one at a time or sixteen at once; and a training recipe's rollouts
// (OPD's, on the tiny random chat model) are those of one episode at a time.
import { rmSync } from "node:fs";
import { join } from "node:path";
import { GuessNumberEnv, type Trajectory, episodeSpecs, readTrajectories, runEpisodes } from "@kiln/rollout";
import { LocalPolicy, loadModel, loadTokenizer } from "@kiln/models";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModelDir } from "../src/agent-model/paths.js";
import { scaffoldedTeacher } from "../src/recipes/opd-samples.js";
import { runOpdRounds } from "../src/recipes/opd.js";
import { opdTinyConfig } from "../src/recipes/presets.js";
import { ROLLOUT_CONCURRENCY } from "../src/recipes/recipe-run.js";
import { makeEnv, setup, tmpRoot } from "./recipes/helpers.js";

beforeAll(async () => {
  await initBackend("wasm", { threads: 1 });
});
afterAll(() => {
  setBackend("js");
  disposeWasmBackend();
});

const turnsOf = (ts: Trajectory[]) =>
  ts.map((t) => t.turns.map((u) => ({ tokens: u.completionTokenIds, logprobs: u.logprobs })));

describe("LocalPolicy batching on the agent model", () => {
  for (const [label, params] of [
    ["greedy", { temperature: 0 }],
    ["temperature 1, seeded", { temperature: 1 }],
  ] as const) {
    it(`${label}: concurrency 1 and 16 play the same trajectories`, async () => {
      const dir = agentModelDir();
      const model = await loadModel(dir);
      const tokenizer = await loadTokenizer(dir);
      const play = async (concurrency: number) => {
        const policy = new LocalPolicy({ model, tokenizer });
        const r = await runEpisodes({
          makeEnv: () => new GuessNumberEnv(),
          policy,
          episodes: 16,
          concurrency,
          baseSeed: 5,
          params: { ...params, maxTokens: 40, logprobs: true },
          limits: { maxTurns: 2 },
        });
        return { turns: turnsOf(r.trajectories), stats: policy.stats() };
      };
      const one = await play(1);
      const many = await play(16);
      expect(one.stats?.peakRunning).toBe(1);
      // One at a time, decode forwards ran narrower than 16 rows (wasm: checked to give the same bits per row).
      expect(Math.max(...Object.keys(one.stats?.decodeWidths ?? {}).map(Number))).toBeLessThan(16);
      // The sixteen episodes really shared decode steps.
      expect(many.stats?.peakRunning).toBe(16);
      expect(many.stats?.decodeSteps).toBeLessThan((one.stats?.decodeSteps ?? 0) / 4);
      // Most of the 16 episodes reach their second turn (a guess can end one at the first).
      expect(many.turns.flat().length).toBeGreaterThan(24);
      expect(many.turns).toEqual(one.turns);
      // Every sequence's cache went back.
      expect(many.stats?.kvReservedBytes).toBe(0);
      expect(many.stats?.running).toBe(0);
    });
  }
});

// A training recipe's rollouts batch too (ROLLOUT_CONCURRENCY episodes in flight): OPD's round-1
// rollouts, sampled at temperature 1 by the recipe, are the trajectories one episode at a time plays
// with the same model and seeds.
describe("a recipe's rollouts through the scheduler", () => {
  it("OPD round 1 at ROLLOUT_CONCURRENCY = the same episodes played one at a time", async () => {
    const root = tmpRoot();
    try {
      const seedOfModel = 21;
      const config = opdTinyConfig();
      Object.assign(config, {
        rounds: 1,
        episodesPerRound: ROLLOUT_CONCURRENCY,
        rollout: { temperature: 1, maxTokens: 12, maxTurns: 2 },
        eval: { seeds: [1, 2, 3] },
      });
      Object.assign(config.train, { maxSteps: 1, microBatchSize: 2, gradAccum: 1, checkpointEvery: 1 });
      let student: LocalPolicy | null = null;
      const { model, codec } = setup(seedOfModel);
      const res = await runOpdRounds({
        model,
        codec,
        makeEnv,
        teacher: (s) => {
          student = s as LocalPolicy;
          return scaffoldedTeacher(s, "Hint: bisect the range and call guess.");
        },
        config,
        out: root,
        name: "opd",
        progress: false,
        log: () => {},
      });
      const batched = (await readTrajectories(join(res.runDir, "rollouts", "round-1.jsonl.gz"))).trajectories;
      // The student's scheduler held the sixteen episodes at once.
      expect((student as LocalPolicy | null)?.stats()?.peakRunning).toBe(ROLLOUT_CONCURRENCY);

      // The same base weights (the recipe's fresh LoRA adds exactly zero), one episode at a time.
      const fresh = setup(seedOfModel);
      const alone = new LocalPolicy({ model: fresh.model, tokenizer: fresh.tokenizer, chatTemplate: fresh.template });
      const one = await runEpisodes({
        makeEnv,
        policy: alone,
        episodes: episodeSpecs(config.episodesPerRound, config.seed + 1, "round-1"),
        params: { temperature: 1, maxTokens: 12, logprobs: true },
        limits: { maxTurns: 2 },
        concurrency: 1,
      });
      expect(alone.stats()?.peakRunning).toBe(1);
      expect(batched.map((t) => t.episodeId)).toEqual(one.trajectories.map((t) => t.episodeId));
      expect(turnsOf(batched).flat().length).toBeGreaterThanOrEqual(ROLLOUT_CONCURRENCY);
      expect(
        turnsOf(batched)
          .flat()
          .every((u) => (u.tokens?.length ?? 0) > 0),
      ).toBe(true);
      expect(turnsOf(batched)).toEqual(turnsOf(one.trajectories));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

// Continuous batching under LocalPolicy (@kiln/models BatchScheduler) on the embedded agent model:
// the same seed gives the same guess-number trajectories, token for token and log-prob for
// log-prob, whether episodes run one at a time or sixteen at once.
import { GuessNumberEnv, type Trajectory, runEpisodes } from "@kiln/rollout";
import { LocalPolicy, loadModel, loadTokenizer } from "@kiln/models";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { agentModelDir } from "../src/agent-model/paths.js";

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
      // The sixteen episodes really shared decode steps.
      expect(many.stats?.peakRunning).toBe(16);
      expect(many.stats?.decodeSteps).toBeLessThan((one.stats?.decodeSteps ?? 0) / 4);
      expect(many.turns.flat().length).toBe(32);
      expect(many.turns).toEqual(one.turns);
      // Every sequence's cache went back.
      expect(many.stats?.kvReservedBytes).toBe(0);
      expect(many.stats?.running).toBe(0);
    });
  }
});

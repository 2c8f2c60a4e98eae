import { describe, expect, it } from "vitest";
import {
  episodeSpecs,
  GuessNumberEnv,
  guessNumberScript,
  type Policy,
  RolloutConfigError,
  runEpisodes,
  ScriptedPolicy,
} from "../src/index.js";

describe("runEpisodes", () => {
  it("never has more than `concurrency` episodes in flight and keeps the caller's order", async () => {
    const inner = new ScriptedPolicy({ script: guessNumberScript(), latencyMs: 2 });
    let inFlight = 0;
    let peak = 0;
    const counting: Policy = {
      id: "counting",
      async generate(...args) {
        inFlight++;
        peak = Math.max(peak, inFlight);
        try {
          return await inner.generate(...args);
        } finally {
          inFlight--;
        }
      },
    };
    const specs = episodeSpecs(12, 3);
    const run = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: counting,
      episodes: specs,
      concurrency: 3,
    });
    expect(peak).toBe(3);
    expect(run.trajectories.map((t) => t.episodeId)).toEqual(specs.map((s) => s.id));
    expect(run.summary.episodes).toBe(12);
    expect(run.episodesPerSecond).toBeGreaterThan(0);
  });

  it("measures the malformed tool-call attractor", async () => {
    const run = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: new ScriptedPolicy({ script: guessNumberScript({ malformedRate: 0.4 }) }),
      episodes: 40,
      limits: { maxConsecutiveMalformed: 2 },
    });
    const s = run.summary;
    const turns = run.trajectories.reduce((n, t) => n + t.turns.length, 0);
    const malformedTurns = run.trajectories.reduce(
      (n, t) => n + t.turns.filter((x) => x.toolCallIssues.length > 0).length,
      0,
    );
    expect(s.replies).toBe(turns);
    expect(s.malformedReplies).toBe(malformedTurns);
    expect(s.malformedReplyRate).toBeCloseTo(malformedTurns / turns);
    expect(s.malformedReplyRate).toBeGreaterThan(0.2);
    expect(s.malformedReplyRate).toBeLessThan(0.6);
    // All four broken shapes of the script are seen and told apart.
    expect(Object.keys(s.malformedCalls).sort()).toEqual([
      "bad_json",
      "schema_violation",
      "unclosed_tag",
      "unknown_tool",
    ]);
    expect(s.malformedAborts).toBe(s.byStatus.malformed_limit);
    expect(s.malformedAborts).toBeGreaterThan(0);
    expect((s.byStatus.done ?? 0) + s.malformedAborts).toBe(40);
  });

  it("validates its options", async () => {
    const base = { makeEnv: () => new GuessNumberEnv(), policy: new ScriptedPolicy({ script: guessNumberScript() }) };
    await expect(runEpisodes({ ...base, episodes: 2, concurrency: 0 })).rejects.toThrow(RolloutConfigError);
    await expect(
      runEpisodes({
        ...base,
        episodes: [
          { id: "a", seed: 1 },
          { id: "a", seed: 2 },
        ],
      }),
    ).rejects.toThrow(/"a" appears twice/);
    await expect(runEpisodes({ ...base, episodes: 1, limits: { maxTurns: 0 } })).rejects.toThrow(
      /maxTurns must be >= 1/,
    );
  });
});

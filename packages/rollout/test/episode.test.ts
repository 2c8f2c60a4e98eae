import { describe, expect, it } from "vitest";
import {
  type Environment,
  GuessNumberEnv,
  guessNumberScript,
  type Policy,
  runEpisode,
  ScriptedPolicy,
  trajectoryMessages,
  trajectorySchema,
} from "../src/index.js";

const player = (opts: Parameters<typeof guessNumberScript>[0] = {}) =>
  new ScriptedPolicy({ id: "bisect", script: guessNumberScript(opts) });

describe("runEpisode", () => {
  it("plays guess-number to the end with rewards, tokens and log-probs per turn", async () => {
    const traj = await runEpisode({ env: new GuessNumberEnv(), policy: player(), seed: 7 });
    expect(trajectorySchema.safeParse(traj).success).toBe(true);
    expect(traj.outcome.status).toBe("done");
    expect(traj.outcome.totalReward).toBe(1);
    expect(traj.outcome.scores.success).toBe(1);
    expect(traj.turns.length).toBeLessThanOrEqual(7); // bisection over 1..100
    for (const t of traj.turns) {
      expect(t.completionTokenIds!.length).toBeGreaterThan(0);
      expect(t.logprobs!.length).toBe(t.completionTokenIds!.length);
      expect(t.promptTokenIds!.length).toBeGreaterThan(0);
      expect(t.action).toHaveLength(1);
      expect(t.message.tool_calls![0].id).toBe(t.action[0].id);
      expect(t.observations[0]).toMatchObject({ role: "tool", tool_call_id: t.action[0].id });
    }
    // The prompt of turn t+1 extends the prompt of turn t (the conversation only grows).
    expect(traj.turns[1].promptTokenIds!.length).toBeGreaterThan(traj.turns[0].promptTokenIds!.length);
    const messages = trajectoryMessages(traj);
    expect(messages.at(-1)).toMatchObject({ role: "tool", content: "correct" });
    expect(traj.stats.completionTokens).toBe(traj.turns.reduce((s, t) => s + t.completionTokenIds!.length, 0));
  });

  it("is deterministic for a seed and differs across seeds", async () => {
    const strip = (t: unknown) => JSON.parse(JSON.stringify(t, (k, v) => (k === "timings" ? undefined : v)));
    const opts = { exploreRate: 0.5, malformedRate: 0.2 };
    const a = await runEpisode({ env: new GuessNumberEnv(), policy: player(opts), seed: 3 });
    const b = await runEpisode({ env: new GuessNumberEnv(), policy: player(opts), seed: 3 });
    const c = await runEpisode({ env: new GuessNumberEnv(), policy: player(opts), seed: 4 });
    expect(strip(a)).toEqual(strip(b));
    expect(strip(a)).not.toEqual(strip(c));
  });

  it("answers malformed replies with an error observation and aborts after N in a row", async () => {
    const traj = await runEpisode({
      env: new GuessNumberEnv(),
      policy: player({ malformedRate: 1 }),
      seed: 1,
      limits: { maxConsecutiveMalformed: 4 },
    });
    expect(traj.outcome.status).toBe("malformed_limit");
    expect(traj.turns).toHaveLength(4);
    expect(traj.stats.malformedReplies).toBe(4);
    expect(traj.stats.maxMalformedStreak).toBe(4);
    const counted = Object.values(traj.stats.malformedCalls).reduce((s, n) => s + (n ?? 0), 0);
    expect(counted).toBe(4);
    for (const t of traj.turns) {
      expect(t.action).toEqual([]);
      expect(t.toolCallIssues.length).toBeGreaterThan(0);
      const obs = t.observations.map((o) => o.content).join("\n");
      expect(obs).toContain("Error:");
      expect(obs).toContain(t.toolCallIssues[0].message);
      if (t.message.tool_calls) expect(t.observations.every((o) => o.role === "tool")).toBe(true);
      else expect(t.observations).toMatchObject([{ role: "user" }]);
    }
  });

  it("resets the malformed streak on a good reply", async () => {
    const traj = await runEpisode({
      env: new GuessNumberEnv(),
      policy: player({ malformedRate: 0.5 }),
      seed: 11,
      limits: { maxConsecutiveMalformed: 100, maxTurns: 40 },
    });
    expect(traj.outcome.status).toBe("done");
    expect(traj.stats.malformedReplies).toBeGreaterThan(0);
    expect(traj.stats.maxMalformedStreak).toBeLessThan(traj.stats.malformedReplies + 1);
  });

  it("stops at the turn and token limits", async () => {
    const slow = player({ exploreRate: 1 });
    const t1 = await runEpisode({ env: new GuessNumberEnv(), policy: slow, seed: 5, limits: { maxTurns: 2 } });
    expect(t1.outcome.status).toBe("turn_limit");
    expect(t1.turns).toHaveLength(2);
    const t2 = await runEpisode({ env: new GuessNumberEnv(), policy: slow, seed: 5, limits: { maxEpisodeTokens: 30 } });
    expect(t2.outcome.status).toBe("token_limit");
    expect(t2.stats.completionTokens).toBeGreaterThanOrEqual(30);
    const t3 = await runEpisode({ env: new GuessNumberEnv(), policy: slow, seed: 5, params: { maxTokens: 8 } });
    expect(t3.turns[0].finishReason).toBe("length");
    expect(t3.turns[0].completionTokenIds).toHaveLength(8);
  });

  it("records a policy error as an episode error instead of throwing", async () => {
    let calls = 0;
    const flaky: Policy = {
      id: "flaky",
      async generate(messages, tools, params) {
        if (++calls === 2) throw new Error("server exploded");
        return player().generate(messages, tools, params);
      },
    };
    const traj = await runEpisode({ env: new GuessNumberEnv(), policy: flaky, seed: 9 });
    expect(traj.outcome.status).toBe("error");
    expect(traj.outcome.error).toMatchObject({ kind: "policy", turn: 1 });
    expect(traj.outcome.error!.message).toContain("server exploded");
    expect(traj.turns).toHaveLength(1);
  });

  it("fails a turn that exceeds turnTimeoutMs", async () => {
    const slow = new ScriptedPolicy({ id: "slow", script: guessNumberScript(), latencyMs: 200 });
    const traj = await runEpisode({ env: new GuessNumberEnv(), policy: slow, seed: 1, limits: { turnTimeoutMs: 20 } });
    expect(traj.outcome).toMatchObject({ status: "error", error: { kind: "policy", turn: 0 } });
    expect(traj.outcome.error!.message).toContain("turnTimeoutMs = 20 ms");
  });

  it("records an environment error", async () => {
    const env = new GuessNumberEnv();
    const broken: Environment = Object.assign(Object.create(Object.getPrototypeOf(env)), env, {
      step() {
        throw new TypeError("db locked");
      },
    });
    const traj = await runEpisode({ env: broken, policy: player(), seed: 2 });
    expect(traj.outcome).toMatchObject({ status: "error", error: { kind: "environment", turn: 0 } });
  });

  it("starts from a saved state and records states when asked", async () => {
    const first = await runEpisode({ env: new GuessNumberEnv(), policy: player(), seed: 8, recordStates: true });
    const mid = first.turns[1].stateAfter as { guesses: number[]; low: number; high: number };
    expect(mid.guesses).toHaveLength(2);
    const resumed = await runEpisode({ env: new GuessNumberEnv(), policy: player(), seed: 8, startState: mid });
    expect(resumed.startState).toEqual(mid);
    expect(resumed.prompt[1].content).toContain(`between ${mid.low} and ${mid.high}`);
    expect(resumed.outcome.status).toBe("done");
    expect(resumed.outcome.scores.guesses).toBe(first.outcome.scores.guesses);
  });
});

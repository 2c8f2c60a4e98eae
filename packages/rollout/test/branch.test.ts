import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  BranchReplayError,
  branchEpisode,
  branchPairs,
  collectSeededStarts,
  GuessNumberEnv,
  guessNumberScript,
  isSuccessful,
  messagesBeforeTurn,
  parseSeededStarts,
  preferencePairToRow,
  readJsonlFile,
  runEpisode,
  runEpisodes,
  ScriptedPolicy,
  SeededStartError,
  seededStartSpecs,
  successRows,
  trajectoryToMessagesRow,
  writeJsonlFile,
} from "../src/index.js";

const dir = mkdtempSync(join(tmpdir(), "kiln-branch-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const explorer = () => new ScriptedPolicy({ id: "explorer", script: guessNumberScript({ exploreRate: 1 }) });

describe("branchEpisode", () => {
  it("forks at turn t, keeps the prefix, samples K different replies and scores each downstream", async () => {
    const parent = await runEpisode({ env: new GuessNumberEnv(), policy: explorer(), seed: 21 });
    expect(parent.turns.length).toBeGreaterThanOrEqual(3);
    const turn = 1;
    const result = await branchEpisode({
      trajectory: parent,
      turn,
      k: 6,
      makeEnv: () => new GuessNumberEnv(),
      policy: explorer(),
    });
    expect(result.branches).toHaveLength(6);
    expect(result.prompt).toEqual(messagesBeforeTurn(parent, turn));
    for (const [i, b] of result.branches.entries()) {
      expect(b.episodeId).toBe(`${parent.episodeId}/t1/b${i}`);
      expect(b.metadata.branch).toMatchObject({ parent: parent.episodeId, turn, index: i });
      expect(b.turns.slice(0, turn).map((t) => t.message)).toEqual(parent.turns.slice(0, turn).map((t) => t.message));
      expect(b.outcome.status).toBe("done");
      expect(b.outcome.scores.success).toBe(1);
      // The environment was really replayed: the game ends with "correct" on the same secret.
      expect(b.turns.at(-1)!.observations[0].content).toBe("correct");
      expect(b.turns.at(-1)!.action[0].arguments.n).toBe(parent.turns.at(-1)!.action[0].arguments.n);
    }
    const replies = new Set(result.branches.map((b) => JSON.stringify(b.turns[turn].action)));
    expect(replies.size).toBeGreaterThan(1);
    const scores = result.branches.map((b) => b.outcome.score);
    expect(Math.max(...scores)).toBeGreaterThan(Math.min(...scores));

    const pairs = branchPairs(result);
    expect(pairs.length).toBeGreaterThan(0);
    for (const p of pairs) {
      expect(p.chosenScore).toBeGreaterThan(p.rejectedScore);
      expect(p.chosen).not.toEqual(p.rejected);
      expect(p.source).toEqual({ episodeId: parent.episodeId, turn });
    }
    const all = branchPairs(result, { mode: "all" });
    expect(all.length).toBeGreaterThanOrEqual(pairs.length);
    const row = preferencePairToRow(pairs[0]);
    expect(row.prompt.at(-1)!.role).toBe("tool");
    expect(row.chosen[0].tool_calls![0].function.arguments).toEqual(
      JSON.parse(pairs[0].chosen.tool_calls![0].function.arguments),
    );
  });

  it("is deterministic and refuses a non-reproducible environment", async () => {
    const parent = await runEpisode({ env: new GuessNumberEnv(), policy: explorer(), seed: 4 });
    const opts = { trajectory: parent, turn: 1, k: 3, makeEnv: () => new GuessNumberEnv(), policy: explorer() };
    const a = await branchEpisode(opts);
    const b = await branchEpisode(opts);
    const strip = (t: unknown) => JSON.parse(JSON.stringify(t, (k, v) => (k === "timings" ? undefined : v)));
    expect(strip(a)).toEqual(strip(b));
    const tampered = structuredClone(parent);
    tampered.seed = parent.seed + 1; // another secret: replaying the recorded guesses gives other answers
    await expect(branchEpisode({ ...opts, trajectory: tampered })).rejects.toThrow(BranchReplayError);
    await expect(branchEpisode({ ...opts, turn: 99 })).rejects.toThrow(/turn must be an integer in/);
  });
});

describe("seeded starts", () => {
  it("collects wall states, saves them, and runs episodes from them", async () => {
    const run = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: explorer(),
      episodes: 4,
      recordStates: true,
    });
    // "Wall" here: states after a wrong guess late in the episode.
    const starts = collectSeededStarts(run.trajectories, (_t, turn) => turn.index === 2 && turn.reward === 0);
    expect(starts.length).toBeGreaterThan(0);
    const path = join(dir, "starts.jsonl.gz");
    await writeJsonlFile(path, starts);
    const loaded = parseSeededStarts(await readJsonlFile(path));
    expect(loaded).toEqual(starts);
    const env = new GuessNumberEnv();
    const specs = seededStartSpecs(loaded, env, 2);
    expect(specs).toHaveLength(2 * starts.length);
    const again = await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: explorer(), episodes: specs });
    for (const t of again.trajectories) {
      const start = loaded.find((s) => s.id === t.metadata.seededStart)!;
      expect(t.startState).toEqual(start.state);
      expect(t.outcome.scores.guesses).toBeGreaterThan((start.state as { guesses: number[] }).guesses.length);
    }
    expect(() => seededStartSpecs(loaded, { id: "other", version: "1" })).toThrow(SeededStartError);
    expect(() => parseSeededStarts([{ id: "x", seed: 1.5 }])).toThrow(/seeded start 1: seed/);
    expect(() => collectSeededStarts(again.trajectories, () => true)).toThrow(/recordStates/);
  });
});

describe("TRL export", () => {
  it("writes SFT rows from successful episodes only, capped per environment", async () => {
    const run = await runEpisodes({
      makeEnv: () => new GuessNumberEnv(),
      policy: new ScriptedPolicy({ id: "p", script: guessNumberScript({ malformedRate: 0.6 }) }),
      episodes: 10,
      limits: { maxConsecutiveMalformed: 2 },
    });
    const ok = run.trajectories.filter((t) => t.outcome.score >= 0.5);
    expect(ok.length).toBeGreaterThan(0);
    expect(ok.length).toBeLessThan(10);
    const rows = successRows(run.trajectories, { minScore: 0.5, capPerEnvironment: 3 });
    expect(rows).toHaveLength(Math.min(3, ok.length));
    // Without a threshold, success is rollout's one rule (isSuccessful), as in every recipe.
    const successes = run.trajectories.filter(isSuccessful);
    expect(successRows(run.trajectories)).toHaveLength(successes.length);
    expect(successRows(run.trajectories).map((r) => r.messages.length)).toEqual(
      successes.map((t) => trajectoryToMessagesRow(t).messages.length),
    );
    const row = trajectoryToMessagesRow(ok[0]);
    expect(row.tools![0].function.name).toBe("guess");
    expect(row.messages[0].role).toBe("system");
    const call = row.messages.find((m) => m.tool_calls)!;
    expect(typeof call.tool_calls![0].function.arguments).toBe("object");
    const strRow = trajectoryToMessagesRow(ok[0], { argumentsAsObjects: false });
    expect(typeof strRow.messages.find((m) => m.tool_calls)!.tool_calls![0].function.arguments).toBe("string");
    const path = join(dir, "sft.jsonl");
    await writeJsonlFile(path, rows);
    expect(await readJsonlFile(path)).toEqual(JSON.parse(JSON.stringify(rows)));
  });
});

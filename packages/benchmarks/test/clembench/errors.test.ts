import { describe, expect, it } from "vitest";
import {
  InstanceError,
  listEpisodes,
  parseInstancesFile,
  pyRound,
  ResourceError,
  replay,
  resolveDataDir,
  RunnerOptionsError,
  runBenchmark,
} from "../../src/clembench/index.js";
import { dataDir } from "./helpers.js";

describe("typed errors name the thing and the rule", () => {
  it("instances file shape", () => {
    expect(() => parseInstancesFile({}, "x.json")).toThrow(InstanceError);
    expect(() => parseInstancesFile({ experiments: [{ name: "e" }] }, "x.json")).toThrow(
      /experiment "e" has no "game_instances"/,
    );
    expect(() => parseInstancesFile({ experiments: [{ name: "e", game_instances: [{}] }] }, "x.json")).toThrow(
      /no "game_id"/,
    );
  });
  it("data directory", () => {
    expect(() => resolveDataDir("/nonexistent/clembench")).toThrow(/has no LICENSE-clembench/);
    expect(resolveDataDir(dataDir)).toBe(dataDir);
    expect(resolveDataDir()).toBe(dataDir);
    const saved = process.env.KILN_CLEMBENCH_DATA;
    try {
      process.env.KILN_CLEMBENCH_DATA = dataDir;
      expect(resolveDataDir()).toBe(dataDir);
    } finally {
      if (saved === undefined) delete process.env.KILN_CLEMBENCH_DATA;
      else process.env.KILN_CLEMBENCH_DATA = saved;
    }
    expect(new ResourceError("x")).toBeInstanceOf(Error);
  });
  it("runner options", async () => {
    await expect(
      runBenchmark({ games: ["taboo"], players: [replay([]), replay([]), replay([])], dataDir }),
    ).rejects.toThrow(/taboo has 2 LLM role\(s\)/);
    await expect(runBenchmark({ games: ["wordle"], players: [], dataDir })).rejects.toThrow(RunnerOptionsError);
    await expect(runBenchmark({ games: ["wordle"], players: [replay([])], concurrency: 0, dataDir })).rejects.toThrow(
      /concurrency must be a positive integer/,
    );
  });
  it("instance filters select experiments, ids (numbers or strings) and a per-experiment limit", () => {
    const file = parseInstancesFile(
      {
        experiments: [
          { name: "a", game_instances: [{ game_id: 0 }, { game_id: 1 }, { game_id: 2 }] },
          { name: "b", game_instances: [{ game_id: "0" }, { game_id: "1" }] },
        ],
      },
      "t",
    );
    expect(
      listEpisodes("g", file, { limitPerExperiment: 1 }).map((e) => `${e.experiment.name}${e.instance.game_id}`),
    ).toEqual(["a0", "b0"]);
    expect(listEpisodes("g", file, { gameIds: [1] }).length).toBe(2);
    expect(
      listEpisodes("g", file, { experiments: ["b"] }).every((e) => e.experiment.game_instances === undefined),
    ).toBe(true);
  });
  it("Python's round: exact binary value, ties to even", () => {
    expect(pyRound(2.675, 2)).toBe(2.67);
    expect(pyRound(0.5)).toBe(0);
    expect(pyRound(1.5)).toBe(2);
    expect(pyRound(100 / 3, 2)).toBe(33.33);
    expect(pyRound(0.125, 2)).toBe(0.12);
  });
});

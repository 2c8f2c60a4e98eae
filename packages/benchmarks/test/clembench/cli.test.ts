import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createOpenAIServer } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  parsePyJson,
  policyFromBackend,
  runBenchmark,
  runClemCli,
  type WordleWords,
  wordleSolver,
} from "../../src/clembench/index.js";
import { dataDir, spec } from "./helpers.js";

const words = (spec("wordle").experiment.lang_keywords as WordleWords).official_words_list;

function capture() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { stdout: (s: string) => void out.push(s), stderr: (s: string) => void err.push(s) }, out, err };
}

describe("clem CLI", () => {
  it("plays wordle over HTTP against an OpenAI-compatible server and writes clemcore's layout", async () => {
    const server = await createOpenAIServer({ policy: policyFromBackend(wordleSolver(words), "solver") });
    try {
      const dir = mkdtempSync(join(tmpdir(), "clem-cli-"));
      const { io, out } = capture();
      const code = await runClemCli(
        [
          "run",
          "--model",
          "solver",
          "--base-url",
          server.url,
          "--games",
          "wordle",
          "--experiments",
          "high_frequency_words_no_clue_no_critic",
          "--limit",
          "2",
          "--concurrency",
          "2",
          "--results",
          dir,
          "--data-dir",
          dataDir,
          "--no-progress",
        ],
        io,
      );
      expect(code).toBe(0);
      const ep = join(dir, "solver", "wordle", "high_frequency_words_no_clue_no_critic", "instance_00001");
      for (const f of ["instance.json", "interactions.json", "scores.json"]) expect(existsSync(join(ep, f))).toBe(true);
      expect(
        existsSync(join(dir, "solver", "wordle", "high_frequency_words_no_clue_no_critic", "experiment.json")),
      ).toBe(true);
      const scores = parsePyJson(readFileSync(join(ep, "scores.json"), "utf8")) as Record<
        string,
        Record<string, number>
      >;
      expect(scores["episode scores"].Success).toBe(1);
      const csv = readFileSync(join(dir, "results.csv"), "utf8").split("\n");
      expect(csv[0]).toBe(
        ',"-, clemscore","all, Average % Played","all, Average Quality Score","wordle, % Played","wordle, Quality Score","wordle, Quality Score (std)"',
      );
      expect(csv[1].startsWith("solver,")).toBe(true);
      expect(existsSync(join(dir, "results.md"))).toBe(true);
      expect(out.join("")).toContain("| solver | wordle | 2 | 100.00 |");
    } finally {
      await server.close();
    }
  });

  it("score re-aggregates a results directory", async () => {
    const dir = mkdtempSync(join(tmpdir(), "clem-score-"));
    const run = await runBenchmark({
      games: ["wordle"],
      players: [wordleSolver(words)],
      resultsDir: dir,
      dataDir,
      filter: { experiments: ["high_frequency_words_no_clue_no_critic"], gameIds: [1] },
    });
    const { io, out } = capture();
    expect(await runClemCli(["score", dir], io)).toBe(0);
    const main = Number(run.results[0].scores?.["episode scores"]["Main Score"]);
    expect(run.table.rows[0].clemscore).toBe(main);
    expect(out.join("")).toContain(`| programmatic | ${main.toFixed(2)} | 100.00 | ${main.toFixed(2)} |`);
  });

  it("rejects bad options with a usage message and exit code 2", async () => {
    const { io, err } = capture();
    expect(await runClemCli(["run", "--base-url", "http://x"], io)).toBe(2);
    expect(err.join("")).toMatch(/--model once/);
    expect(await runClemCli(["run", "--model", "m", "--base-url", "http://x", "--concurrency", "x"], io)).toBe(2);
    expect(await runClemCli(["run", "--model", "m", "--base-url", "http://x", "--games", "chess"], io)).toBe(2);
    expect(err.join("")).toMatch(/unknown clembench game "chess"/);
  });
});

describe("policy replies", () => {
  it("drop a leftover <think> block and surrounding whitespace, as clemcore's backends", async () => {
    const { cleanReply, PolicyBackend } = await import("../../src/clembench/index.js");
    expect(cleanReply("<think>hmm\nok</think>\n\nGUESS: winter \n")).toBe("GUESS: winter");
    expect(cleanReply("  CLUE: x\n")).toBe("CLUE: x");
    const seen: unknown[] = [];
    const backend = new PolicyBackend(
      {
        id: "p",
        async generate(messages, _tools, params) {
          seen.push(messages, params);
          return { message: { role: "assistant", content: " ANSWER: yes\n" }, text: "", finishReason: "stop" };
        },
      },
      { maxTokens: 5000, enableThinking: false },
    );
    const reply = await backend.respond([
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
      { role: "user", content: "c" },
      { role: "user", content: "d" },
    ]);
    expect(reply).toBe("ANSWER: yes");
    // consecutive user turns are merged with a blank line; temperature 0 by default
    expect(seen[0]).toEqual([
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
      { role: "user", content: "c\n\nd" },
    ]);
    expect(seen[1]).toEqual({ temperature: 0, maxTokens: 5000, enableThinking: false });
  });
});

describe("statscore", () => {
  it("clem score splits interactive games (clemscore) from static benchmarks (statscore)", async () => {
    const { ScriptedBackend } = await import("../../src/clembench/index.js");
    const dir = mkdtempSync(join(tmpdir(), "clem-stat-"));
    const fixed = new ScriptedBackend((_m, c) => (c.content.includes("emotional") ? "I cannot say." : "8"), "m");
    const run = await runBenchmark({
      games: ["bbh", "eqbench"],
      players: [fixed],
      resultsDir: dir,
      dataDir,
      filter: { limitPerExperiment: 2, experiments: ["object_counting", "eq_bench"] },
    });
    await runBenchmark({
      games: ["wordle"],
      players: [new ScriptedBackend(() => "explanation: x\nguess: crane", "m")],
      resultsDir: dir,
      dataDir,
      filter: { experiments: ["high_frequency_words_no_clue_no_critic"], limitPerExperiment: 1 },
    });
    // object_counting instance 0 has target "8": one right, one wrong; eqbench aborts both
    const bbhMain = run.results
      .filter((r) => r.game === "bbh")
      .map((r) => Number(r.scores?.["episode scores"]["Main Score"]));
    expect(bbhMain).toEqual([100, 0]);
    const { io, out } = capture();
    expect(await runClemCli(["score", dir], io)).toBe(0);
    // statscore: played (100 + 0)/2 = 50, quality 50 (eqbench has none) → 25; clemscore: wordle lost → 0
    expect(out.join("")).toContain("m: clemscore 0.00 / statscore 25.00");
  });
});

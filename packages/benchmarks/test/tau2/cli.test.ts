import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { Tau2Error, parseTau2Args, tau2Main } from "../../src/tau2/index.js";

describe("tau2 command line", () => {
  it("parses flags with defaults", () => {
    expect(parseTau2Args(["--agent", "oracle"])).toMatchObject({
      agent: { kind: "oracle" },
      user: { kind: "scripted" },
      split: "test",
      version: "v1.0",
      trials: 3,
      concurrency: 4,
      maxSteps: 200,
      maxErrors: 10,
      progress: true,
    });
    expect(
      parseTau2Args([
        "--agent-url",
        "http://127.0.0.1:8000",
        "--agent-model",
        "qwen",
        "--user-url",
        "http://u",
        "--user-model",
        "m",
        "--tasks",
        "5, 9",
        "--no-progress",
      ]),
    ).toMatchObject({
      agent: { kind: "http", url: "http://127.0.0.1:8000", model: "qwen" },
      user: { kind: "http" },
      taskIds: ["5", "9"],
      progress: false,
    });
  });

  it("rejects bad input with a message naming the flag", () => {
    expect(() => parseTau2Args([])).toThrow(/no agent given/);
    expect(() => parseTau2Args(["--agent", "oracle", "--trials", "0"])).toThrow(/--trials must be a positive integer/);
    expect(() => parseTau2Args(["--agent", "oracle", "--split", "dev"])).toThrow(Tau2Error);
    expect(() => parseTau2Args(["--agent-url", "http://x"])).toThrow(/--agent-url and --agent-model go together/);
    expect(() => parseTau2Args(["--agent", "oracle", "--bogus", "1"])).toThrow(/unknown flag --bogus/);
  });

  it("runs the oracle and writes the results files", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tau2-cli-"));
    try {
      const lines: string[] = [];
      const code = await tau2Main(
        [
          "--agent",
          "oracle",
          "--task-version",
          "v0.2.0",
          "--tasks",
          "36,62",
          "--trials",
          "2",
          "--out",
          dir,
          "--no-progress",
        ],
        (l) => lines.push(l),
      );
      expect(code).toBe(0);
      expect(lines[0]).toBe("pass^1 = 100.0% ± 0.0");
      for (const f of ["results.json", "results.md", "trajectories.jsonl", "trajectories.rollout.jsonl.gz"])
        expect(existsSync(join(dir, f))).toBe(true);
      expect(JSON.parse(readFileSync(join(dir, "results.json"), "utf8")).config).toMatchObject({
        agent: "oracleAgent",
        numTrials: 2,
        taskIds: ["36", "62"],
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { verifyManifest } from "@kiln/hub-io";
import { afterAll, describe, expect, it, vi } from "vitest";
import { RunDir, UsageError, resolvePolicy, runCli } from "../src/index.js";

const tmp = mkdtempSync(join(tmpdir(), "kiln-kit-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("CLI arguments", () => {
  it("unknown commands and bad flags exit 2 with a message naming them", async () => {
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    expect(await runCli(["frobnicate"])).toBe(2);
    expect(err.mock.calls.flat().join(" ")).toMatch(/unknown command "frobnicate"/);
    expect(await runCli(["demo", "--steps", "many"])).toBe(2);
    expect(err.mock.calls.flat().join(" ")).toMatch(/--steps needs an integer, got "many"/);
    expect(await runCli(["eval", "nope"])).toBe(2);
    expect(err.mock.calls.flat().join(" ")).toMatch(/unknown command "eval nope"/);
    err.mockRestore();
  });

  it("a policy spec that is neither a URL nor a directory is refused clearly", async () => {
    await expect(resolvePolicy(join(tmp, "missing"))).rejects.toThrow(
      /neither an http\(s\) URL .* nor a model directory/,
    );
    expect(new UsageError("x").name).toBe("UsageError");
  });

  it("eval questworld with the expert writes Core-3 reports", async () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    const out = join(tmp, "qw");
    expect(await runCli(["eval", "questworld", "--policy", "expert", "--seeds", "4", "--out", out])).toBe(0);
    const json = JSON.parse(readFileSync(join(out, "core3.json"), "utf8"));
    expect(json.score.mean).toBe(30);
    log.mockRestore();
  });
});

describe("benchmark CLIs forwarded by kit", () => {
  it("eval tau2 with the oracle agent and scripted user writes pass^k results", async () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    const out = join(tmp, "tau2");
    const code = await runCli([
      "eval",
      "tau2",
      "--agent",
      "oracle",
      "--user",
      "scripted",
      "--trials",
      "1",
      "--tasks",
      "5,9",
      "--out",
      out,
      "--no-progress",
    ]);
    expect(code).toBe(0);
    const results = JSON.parse(readFileSync(join(out, "results.json"), "utf8"));
    expect(JSON.stringify(results)).toMatch(/pass/);
    await expect(
      runCli(["eval", "tau2", "--agent", "oracle", "--tasks", "0", "--out", out, "--no-progress"]),
    ).rejects.toThrow(/task ids 0 are not in the test split/);
    log.mockRestore();
  });

  it("eval clem score aggregates a results tree (empty tree → a clear error or an empty table)", async () => {
    const log = vi.spyOn(console, "log").mockImplementation(() => {});
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    const code = await runCli(["eval", "clem", "bogus-subcommand"]);
    expect(code).not.toBe(0);
    log.mockRestore();
    err.mockRestore();
  });
});

describe("run directory", () => {
  it("writes config, metadata with dataset hashes, metrics lines, and a verifiable SHA256SUMS", async () => {
    const run = await RunDir.create(tmp, "run1", { lr: 1e-3 }, { seeds: { data: 1 } });
    const data = join(tmp, "run1", "data.txt");
    await run.writeText("data.txt", "hello");
    const digest = await run.recordDataset("data.txt", data);
    expect(digest).toBe("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824");
    run.logMetrics({ step: 1, loss: 2.5 });
    run.logMetrics({ step: 2, loss: 2.0 });
    await run.finalize();
    const lines = readFileSync(join(tmp, "run1", "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.loss)).toEqual([2.5, 2.0]);
    const meta = JSON.parse(readFileSync(join(tmp, "run1", "metadata.json"), "utf8"));
    expect(meta.seeds).toEqual({ data: 1 });
    expect(meta.packages["@kiln/tensor"]).toMatch(/^\d+\.\d+\.\d+/);
    expect(meta.datasets["data.txt"]).toBe(digest);
    const report = await verifyManifest(join(tmp, "run1"));
    expect(report.ok).toBe(true);
  });
});

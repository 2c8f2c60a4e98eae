import { existsSync, rmSync } from "node:fs";
import { join } from "node:path";
import { verifyManifest } from "@kiln/hub-io";
import { ScriptedPolicy, guessNumberScript } from "@kiln/rollout";
import { afterAll, describe, expect, it, vi } from "vitest";
import { runCli } from "../../src/index.js";
import { branchDpoPairs } from "../../src/recipes/arp.js";
import { expertEpisodes, makeEnv, tmpRoot } from "./helpers.js";

const root = tmpRoot();
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe("branch-DPO pairs and the recipe CLI", () => {
  it("forks at a turn, samples K continuations and pairs them by downstream score", async () => {
    const parents = await expertEpisodes(3, 4);
    // An exploring player: its guesses at the fork differ, and so do the episodes' scores.
    const policy = new ScriptedPolicy({ id: "explore", script: guessNumberScript({ exploreRate: 0.9 }) });
    const pairs = await branchDpoPairs({ trajectories: parents, makeEnv, policy, k: 4, pickTurn: () => 1 });
    expect(pairs.length).toBeGreaterThan(0);
    for (const p of pairs) {
      expect(p.chosenScore).toBeGreaterThan(p.rejectedScore);
      expect(p.source.turn).toBe(1);
      expect(p.prompt[p.prompt.length - 1].role).not.toBe("assistant");
      expect(JSON.stringify(p.chosen)).not.toBe(JSON.stringify(p.rejected));
    }
  });

  it("kiln oel runs on the tiny defaults and writes a verified run directory", async () => {
    const out = vi.spyOn(console, "log").mockImplementation(() => {});
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    try {
      const code = await runCli([
        "oel",
        "--out",
        root,
        "--tasks",
        "2",
        "--steps",
        "2",
        "--trials",
        "1",
        "--max-tokens",
        "6",
        "--max-turns",
        "1",
        "--backend",
        "js",
      ]);
      expect(code).toBe(0);
      expect((await verifyManifest(join(root, "oel"))).ok).toBe(true);
      expect(existsSync(join(root, "oel", "checkpoints", "step-2", "adapter_config.json"))).toBe(true);
      expect(await runCli(["opd", "--env", "mars"])).toBe(2);
      expect(err.mock.calls.flat().join(" ")).toMatch(/--env must be questworld or guess-number, got mars/);
    } finally {
      out.mockRestore();
      err.mockRestore();
      stderr.mockRestore();
    }
  });
});

import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readPeftAdapter, toFloat32, verifyManifest } from "@kiln/hub-io";
import { ScriptedPolicy, guessNumberScript } from "@kiln/rollout";
import { afterAll, describe, expect, it, vi } from "vitest";
import { arpSeedConfig, runCli, writeMergedModel } from "../../src/index.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";
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

  it("--preset seed prints the seed card; --config and --set override fields with type checks", async () => {
    const out = vi.spyOn(console, "log").mockImplementation(() => {});
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    try {
      expect(await runCli(["arp", "--preset", "seed", "--print-config"])).toBe(0);
      const printed = JSON.parse(out.mock.calls.at(-1)![0] as string);
      expect(printed).toEqual(arpSeedConfig());
      // The card's values (issue "Seed presets", ARP).
      expect(printed.seed).toBe(42);
      expect(printed.lora).toMatchObject({ r: 16, alpha: 32, dropout: 0.05, targetModules: "all-linear" });
      expect(printed.data).toMatchObject({ capPerGame: 700, holdoutFraction: 0.05 });
      expect(printed.sft).toMatchObject({
        lr: 2e-4,
        microBatchSize: 8,
        gradAccum: 4,
        maxLength: 2048,
        gradientCheckpointing: true,
        schedule: "cosine",
        warmupRatio: 0.03,
        epochs: 1,
      });
      for (const stage of ["turnDpo1", "turnDpo2"])
        expect(printed[stage]).toMatchObject({
          lr: 5e-6,
          beta: 0.1,
          microBatchSize: 1,
          gradAccum: 16,
          maxLength: 1024,
        });
      expect(printed.turnDpo1.modes).toEqual(["repeat", "length"]);
      expect(printed.turnDpo2.modes).toEqual(["invalid", "duplicate_field"]);
      expect(printed.branchDpo.beta).toBe(0.2);
      expect(printed).toMatchObject({ scale: 0.85, mergeDtype: "f32" });
      expect(err.mock.calls.flat().join(" ")).toMatch(/does not state/);

      const file = join(root, "over.json");
      writeFileSync(file, JSON.stringify({ sft: { lr: 1e-3 }, turnDpo1: { modes: ["repeat"] } }));
      expect(await runCli(["arp", "--config", file, "--set", "branchDpo.beta=0.3;seed=7", "--print-config"])).toBe(0);
      const over = JSON.parse(out.mock.calls.at(-1)![0] as string);
      expect(over.sft.lr).toBe(1e-3);
      expect(over.turnDpo1.modes).toEqual(["repeat"]);
      expect(over.branchDpo.beta).toBe(0.3);
      expect(over.seed).toBe(7);
      expect(await runCli(["arp", "--set", "sft.lr=fast", "--print-config"])).toBe(2);
      expect(err.mock.calls.flat().join(" ")).toMatch(/sft.lr needs a number, got "fast"/);
      expect(await runCli(["arp", "--set", "sft.nope=1", "--print-config"])).toBe(2);
      expect(err.mock.calls.flat().join(" ")).toMatch(/config has no field "sft.nope"/);
      expect(await runCli(["opd", "--preset", "huge", "--print-config"])).toBe(2);
      expect(await runCli(["opd", "--preset", "seed", "--print-config"])).toBe(0);
      expect(JSON.parse(out.mock.calls.at(-1)![0] as string)).toMatchObject({
        lora: { r: 64, alpha: 64, useRslora: false },
        objective: { clamp: 3, earlyTurnWeight: 1.5, objective: "ppo" },
      });
      // Rollouts on llama.cpp need the base as a directory it can export (and an f32 base).
      expect(await runCli(["opd", "--rollout-engine", "llama-cpp", "--model", "random-tiny", "--out", root])).toBe(2);
      expect(err.mock.calls.flat().join(" ")).toMatch(/--rollout-engine llama-cpp needs a model directory/);
      expect(await runCli(["opd", "--rollout-engine", "llama-cpp", "--set", "baseDtype=bf16", "--out", root])).toBe(2);
      expect(err.mock.calls.flat().join(" ")).toMatch(/plays the f32 base; baseDtype is bf16/);
      expect(await runCli(["opd", "--rollout-engine", "vllm", "--print-config"])).toBe(2);
      // OEL's deploy episodes take the same engine, with the same checks.
      err.mockClear();
      expect(await runCli(["oel", "--rollout-engine", "llama-cpp", "--model", "random-tiny", "--out", root])).toBe(2);
      expect(err.mock.calls.flat().join(" ")).toMatch(/--rollout-engine llama-cpp needs a model directory/);
      err.mockClear();
      expect(await runCli(["oel", "--rollout-engine", "llama-cpp", "--set", "baseDtype=bf16", "--out", root])).toBe(2);
      expect(err.mock.calls.flat().join(" ")).toMatch(/plays the f32 base; baseDtype is bf16/);
      expect(await runCli(["oel", "--rollout-engine", "vllm", "--print-config"])).toBe(2);
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  });

  it("kiln oel runs on the tiny preset, refuses to reuse the run, resumes it, and kiln scale / merge ship its adapter", async () => {
    const out = vi.spyOn(console, "log").mockImplementation(() => {});
    const err = vi.spyOn(console, "error").mockImplementation(() => {});
    const stderr = vi.spyOn(process.stderr, "write").mockImplementation(() => true);
    const small = "tasks=2;train.maxSteps=2;eval.trials=1;rollout.maxTokens=6;rollout.maxTurns=1;lora.r=2;lora.alpha=4";
    const args = ["oel", "--model", "random-tiny", "--out", root, "--set", small, "--backend", "js"];
    try {
      expect(await runCli(args)).toBe(0);
      const run = join(root, "oel");
      expect((await verifyManifest(run)).ok).toBe(true);
      expect(existsSync(join(run, "checkpoints", "consolidate", "step-2", "adapter_config.json"))).toBe(true);
      await expect(runCli(args)).rejects.toThrow(/already exists: pass --resume .* or --overwrite/);
      const metrics = readFileSync(join(run, "metrics.jsonl"), "utf8");
      expect(await runCli([...args, "--resume"])).toBe(0);
      // Resuming a finished run replays nothing: metrics.jsonl holds the same records (times aside).
      const records = (text: string) =>
        text
          .trim()
          .split("\n")
          .map((l) => {
            const { time: _t, ...rest } = JSON.parse(l);
            return rest;
          });
      expect(records(readFileSync(join(run, "metrics.jsonl"), "utf8"))).toEqual(records(metrics));
      await expect(runCli([...args, "--resume", "--set", `${small};lora.r=3`])).rejects.toThrow(
        /differs from this run's configuration/,
      );
      // kiln scale halves the delta; kiln merge of base + adapter reproduces the shipped model's weights.
      const base = join(root, "base");
      const tiny = tinyChat({ seed: 42, std: 0.2 });
      await writeMergedModel(base, tiny.model, {
        tokenizer: tiny.tokenizer,
        template: tiny.template,
        baseModel: "tiny",
        title: "base",
      });
      expect(await runCli(["scale", join(run, "adapter"), "--scale", "0.5", "--out", join(root, "half")])).toBe(0);
      const full = readPeftAdapter(join(run, "adapter"));
      const half = readPeftAdapter(join(root, "half"));
      const [f, h] = await Promise.all([full, half]);
      const [module, layer] = [...f.layers][0];
      const fb = toFloat32(layer.B);
      const hb = toFloat32(h.layers.get(module)!.B);
      expect(fb.some((v) => v !== 0)).toBe(true);
      for (let i = 0; i < fb.length; i++) expect(hb[i]).toBe(Math.fround(fb[i] * 0.5));
      expect(
        await runCli([
          "merge",
          base,
          "--adapter",
          join(run, "adapter"),
          "--out",
          join(root, "merged"),
          "--backend",
          "js",
        ]),
      ).toBe(0);
      expect(
        Buffer.compare(
          readFileSync(join(root, "merged", "model.safetensors")),
          readFileSync(join(run, "model", "model.safetensors")),
        ),
      ).toBe(0);
      expect(await runCli(["scale", join(run, "adapter"), "--scale", "x", "--out", join(root, "bad")])).toBe(2);
    } finally {
      out.mockRestore();
      err.mockRestore();
      stderr.mockRestore();
    }
  });
});

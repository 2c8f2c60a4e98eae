import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { verifyManifest } from "@kiln/hub-io";
import { attachLora } from "@kiln/lora";
import { LocalPolicy } from "@kiln/models";
import { runEpisodes } from "@kiln/rollout";
import { disposeWasmBackend, initBackend, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AdamW, backward } from "@kiln/tensor";
import { type OelTask, consolidationSamples, passHatKEval, runOel } from "../../src/recipes/oel.js";
import { consolidationLoss } from "../../src/trainer/objectives/index.js";
import { oelSeedConfig, oelTinyConfig } from "../../src/recipes/presets.js";
import { makeEnv, setup, tmpRoot } from "./helpers.js";

const root = tmpRoot();
beforeAll(async () => {
  await initBackend("wasm", { threads: 1 });
});
afterAll(() => {
  setBackend("js");
  disposeWasmBackend();
  rmSync(root, { recursive: true, force: true });
});

const tasks: OelTask[] = [
  { id: "t1", seed: 1, memory: "Memory: the secret is 42." },
  { id: "t2", seed: 2, memory: "Memory: start at 50, then bisect." },
];

describe("OEL on a tiny random Qwen3", () => {
  it("consolidation samples put the memory only in the teacher's prompt; full-KL fitting lowers the loss", async () => {
    const { model, codec, tokenizer, template } = setup(21, 0.5);
    const policy = new LocalPolicy({
      model,
      tokenizer,
      chatTemplate: template,
      defaults: { temperature: 1, maxTokens: 10 },
    });
    const r = await runEpisodes({
      makeEnv,
      policy,
      episodes: tasks.map((t) => ({ id: t.id, seed: t.seed })),
      limits: { maxTurns: 2 },
      concurrency: 1,
    });
    const samples = consolidationSamples(codec, r.trajectories, (t) => tasks.find((x) => x.id === t.episodeId)!.memory);
    expect(samples.length).toBe(
      r.trajectories.reduce((n, t) => n + t.turns.filter((x) => x.completionTokenIds?.length).length, 0),
    );
    expect(samples.length).toBeGreaterThan(1);
    const s0 = samples[0];
    expect(tokenizer.decode(s0.teacherPromptIds)).toContain("the secret is 42");
    expect(tokenizer.decode(s0.studentPromptIds)).not.toContain("Memory:");
    expect(s0.teacherPromptIds.length).toBeGreaterThan(s0.studentPromptIds.length);

    const adapter = attachLora(model, { r: 8, alpha: 16, targetModules: "all-linear", seed: 21 });
    const teacher = (ids: Parameters<typeof model.forward>[0], attention: Parameters<typeof model.forward>[0]) =>
      adapter.withDisabled(() => model.forward(ids, { attentionMask: attention }));
    // With an identity adapter and the memory in both prompts, student == teacher: KL is 0.
    const same = samples.map((s) => ({ ...s, studentPromptIds: s.teacherPromptIds }));
    expect(consolidationLoss(model, teacher, same).loss.item()).toBeLessThan(1e-5);
    const opt = new AdamW(adapter.parameters(), { lr: 1e-2 });
    const losses: number[] = [];
    for (let i = 0; i < 10; i++) {
      opt.zeroGrad();
      const out = consolidationLoss(model, teacher, samples);
      backward(out.loss);
      opt.step();
      losses.push(out.loss.item());
    }
    expect(losses[0]).toBeGreaterThan(0);
    expect(losses[9]).toBeLessThan(losses[0] * 0.7);
  });

  it("pass^k trials of one task replay the same game (same seed), greedy in runOel's evaluation", async () => {
    const { model, tokenizer, template } = setup(23, 0.5);
    const policy = new LocalPolicy({ model, tokenizer, chatTemplate: template, defaults: { maxTokens: 6 } });
    const r = await passHatKEval({
      makeEnv,
      policy,
      tasks,
      trials: 3,
      params: { temperature: 0, maxTokens: 6 },
      limits: { maxTurns: 1 },
    });
    for (const task of tasks) {
      const trials = r.trajectories.filter((t) => t.metadata.task === task.id);
      expect(trials.length).toBe(3);
      expect(new Set(trials.map((t) => t.seed))).toEqual(new Set([task.seed]));
      // Greedy decoding of the same game: the trials are identical.
      expect(new Set(trials.map((t) => JSON.stringify(t.turns.map((x) => x.message))))).toHaveProperty("size", 1);
    }
    expect(oelTinyConfig().eval.temperature).toBe(0);
    expect(oelSeedConfig().eval.temperature).toBe(0);
  });

  it("runOel deploys, consolidates, merges and reports pass^k with SE in a verified run directory", async () => {
    const { model, codec } = setup(22, 0.5);
    const config = oelTinyConfig();
    Object.assign(config, {
      lora: { r: 4, alpha: 8, dropout: 0, targetModules: "all-linear", useRslora: false },
      rollout: { temperature: 1, maxTokens: 8, maxTurns: 2 },
      eval: { trials: 2, temperature: 0 },
    });
    Object.assign(config.train, { maxSteps: 3, lr: 1e-2, microBatchSize: 2, checkpointEvery: 1 });
    const res = await runOel({
      model,
      codec,
      makeEnv,
      tasks,
      config,
      out: root,
      name: "oel",
      progress: false,
      log: () => {},
    });
    expect(res.samples).toBeGreaterThan(1);
    expect(res.lossLast).toBeLessThan(res.lossFirst);
    for (const phase of [res.before, res.after]) {
      expect(phase.tasks).toBe(2);
      expect(phase.simulations).toBe(4);
      expect(phase["pass^1"]).toBeGreaterThanOrEqual(0);
      expect(Number.isFinite(phase["pass^2_se"])).toBe(true);
    }
    expect(res.phases.map((p) => p.phase)).toEqual(["base", "consolidated"]);
    expect(res.phases[1].delta?.n).toBe(2);
    expect((await verifyManifest(res.runDir)).ok).toBe(true);
    for (const f of [
      "rollouts/deploy.jsonl.gz",
      "rollouts/eval-consolidated.jsonl.gz",
      "checkpoints/consolidate/step-3/adapter_config.json",
      "adapter/adapter_model.safetensors",
      "model/model.safetensors",
      "report.html",
    ])
      expect(existsSync(join(res.runDir, f)), f).toBe(true);
    const metrics = readFileSync(join(res.runDir, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const steps = metrics.filter((m) => m.stage === "consolidate" && !m.eval);
    expect(steps.length).toBe(3);
    expect(steps.every((m) => m.entropy > 0 && m.grad_norm > 0)).toBe(true);
  });
});

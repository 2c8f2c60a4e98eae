import { rmSync } from "node:fs";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseSafetensors, verifyManifest } from "@kiln/hub-io";
import { attachLora, loadAdapter, mergeAdapter } from "@kiln/lora";
import { loadModel } from "@kiln/models";
import { Tensor, disposeWasmBackend, initBackend, noGrad, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { conversationBatch, preferenceBatch } from "../../src/trainer/chat-batches.js";
import { runArp } from "../../src/recipes/arp.js";
import { arpTinyConfig } from "../../src/recipes/presets.js";
import { successOnlySftSet } from "../../src/recipes/sft-set.js";
import { dpoObjective, sftObjective } from "../../src/trainer/objectives/index.js";
import { train } from "../../src/trainer/trainer.js";
import { expertEpisodes, makeEnv, setup, tmpRoot } from "./helpers.js";

const root = tmpRoot();
beforeAll(async () => {
  await initBackend("wasm", { threads: 1 });
});
afterAll(() => {
  setBackend("js");
  disposeWasmBackend();
  rmSync(root, { recursive: true, force: true });
});

describe("ARP on a tiny random Qwen3", () => {
  it("LoRA SFT on assistant-only labels lowers the loss on a fixed batch", async () => {
    const { model, codec } = setup(1);
    const data = successOnlySftSet(await expertEpisodes(2));
    expect(conversationBatch(codec, data).inputIds.shape[0]).toBe(2);
    const adapter = attachLora(model, { r: 8, alpha: 16, targetModules: "all-linear", seed: 1 });
    const { history: h } = await train({
      stage: "sft",
      adapter,
      data,
      objective: sftObjective(model, codec),
      config: { lr: 1e-2, maxSteps: 12, microBatchSize: 2, shuffle: false },
      progress: null,
    });
    expect(h[h.length - 1].loss).toBeLessThan(h[0].loss * 0.9);
  });

  it("DPO against the adapter-off reference raises the reward margin from 0", async () => {
    const { model, codec } = setup(2);
    const [t] = await expertEpisodes(1, 5);
    const prompt = successOnlySftSet([t])[0].messages.slice(0, 2);
    const pairs = [
      { prompt, chosen: t.turns[0].message, rejected: { role: "assistant" as const, content: "I will not guess." } },
      {
        prompt,
        chosen: t.turns[0].message,
        rejected: { role: "assistant" as const, content: "guess guess guess guess" },
      },
    ];
    expect(preferenceBatch(codec, pairs).pairs).toBe(2);
    const adapter = attachLora(model, { r: 8, alpha: 16, targetModules: "all-linear", seed: 2 });
    const { history: h } = await train({
      stage: "dpo",
      adapter,
      data: pairs,
      objective: dpoObjective(model, adapter, codec, { beta: 0.1 }),
      config: { lr: 1e-2, maxSteps: 10, microBatchSize: 1, gradAccum: 2, shuffle: false, schedule: "constant" },
      progress: null,
    });
    // Step 1: policy == reference (B = 0), so loss = ln 2 and the margin is 0 (TRL invariant).
    expect(h[0].loss).toBeCloseTo(Math.LN2, 5);
    expect(Math.abs(Number(h[0]["rewards/margins"]))).toBeLessThan(1e-5);
    expect(Number(h[h.length - 1]["rewards/margins"])).toBeGreaterThan(0.05);
    expect(h[h.length - 1].loss).toBeLessThan(Math.LN2);
    expect(h[h.length - 1]["rewards/accuracies"]).toBe(1);
  });

  it("the s-scaled fp32 merge reproduces the adapter model scaled by s", () => {
    const { model } = setup(3);
    const adapter = attachLora(model, { r: 4, alpha: 8, targetModules: "all-linear", seed: 3 });
    // Give B values so the delta is not zero.
    for (const p of adapter.parameters()) {
      const d = p.dataSync() as Float32Array;
      for (let i = 0; i < d.length; i++) d[i] = d[i] === 0 ? 0.05 * Math.sin(i + 1) : d[i];
    }
    const ids = new Tensor(Int32Array.from([1, 5, 9, 30, 44, 2, 60, 7]), [2, 4], "i32");
    const base = noGrad(() => model.forward(ids)).toFloat32Array();
    adapter.setScale(0.85);
    const scaled = noGrad(() => model.forward(ids)).toFloat32Array();
    adapter.setScale(1);
    mergeAdapter(adapter, { scale: 0.85, dtype: "f32", keepOriginal: false });
    const merged = noGrad(() => model.forward(ids)).toFloat32Array();
    let diffBase = 0;
    let err = 0;
    for (let i = 0; i < merged.length; i++) {
      err = Math.max(err, Math.abs(merged[i] - scaled[i]));
      diffBase = Math.max(diffBase, Math.abs(scaled[i] - base[i]));
    }
    expect(diffBase).toBeGreaterThan(1e-3);
    expect(err).toBeLessThan(1e-4);
  });

  it("runArp runs the seed's stages and writes a servable merged model, the scaled adapter and a report", async () => {
    const { model, codec } = setup(4);
    const source = await expertEpisodes(4, 0);
    const config = arpTinyConfig();
    const dpo = { maxSteps: 2, microBatchSize: 2, gradAccum: 1, checkpointEvery: 1, lr: 1e-2 };
    Object.assign(config, {
      lora: { r: 4, alpha: 8, dropout: 0.05, targetModules: "all-linear", useRslora: false },
      data: { capPerGame: 4, holdoutFraction: 0.25, sourceEpisodes: 4 },
      eval: { episodes: 2, baseSeed: 100_000 },
      rollout: { temperature: 1, maxTokens: 16, maxTurns: 2 },
      maxChars: 12,
    });
    Object.assign(config.sft, { epochs: 1, microBatchSize: 2, gradAccum: 1, lr: 1e-2, maxLength: 300 });
    Object.assign(config.turnDpo1, dpo, { studentEpisodes: 2 });
    Object.assign(config.turnDpo2, dpo, { studentEpisodes: 2 });
    Object.assign(config.branchDpo, dpo, { forks: 1, k: 2 });
    const options = {
      model,
      codec,
      makeEnv,
      sourceTrajectories: source,
      out: root,
      name: "arp",
      progress: false,
      log: () => {},
      config,
    };
    const res = await runArp(options);
    expect(res.sftSize).toBe(3);
    expect(res.holdoutSize).toBe(1);
    // Students of a random model ramble past 12 characters: B1 (length) has pairs from the expert's replies.
    expect(res.turnPairs.b1).toBeGreaterThan(0);
    expect(res.phases.map((p) => p.phase)).toEqual(["base", "sft", "turn-dpo-1", "turn-dpo-2", "branch-dpo", "final"]);
    for (const p of res.phases.slice(1)) {
      expect(p.n).toBe(2);
      expect(p.delta?.n).toBe(2);
      expect(Number.isFinite(p.delta?.se)).toBe(true);
    }
    expect((await verifyManifest(res.runDir)).ok).toBe(true);
    const metrics = readFileSync(join(res.runDir, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    const order = metrics.map((m) => m.stage).filter((s, i, a) => s !== a[i - 1]);
    // Separate DPO runs, each after the previous stage's merge and evaluation; branch data from the B2 policy.
    expect(order.indexOf("branch-dpo-data")).toBeGreaterThan(order.indexOf("eval-turn-dpo-2"));
    expect(order.indexOf("turn-dpo-2-data")).toBeGreaterThan(order.indexOf("eval-turn-dpo-1"));
    expect(metrics.filter((m) => m.stage === "sft" && !m.eval).length).toBe(2);
    expect(metrics.some((m) => m.stage === "sft" && m.eval && Number.isFinite(m.holdout_loss))).toBe(true);
    expect(metrics.filter((m) => m.stage === "turn-dpo-1").length).toBe(2);
    expect(metrics.some((m) => m.stage === "merge" && m.scale === 0.85)).toBe(true);
    for (const f of [
      "model/config.json",
      "model/model.safetensors",
      "model/tokenizer.json",
      "model/chat_template.jinja",
      "model/generation_config.json",
      "model/README.md",
      "adapter/adapter_config.json",
      "adapter/README.md",
      "report.html",
      "checkpoints/sft/step-2/optimizer.safetensors",
      "checkpoints/turn-dpo-1/step-2/trainer_state.json",
    ])
      expect(existsSync(join(res.runDir, f)), f).toBe(true);
    const weights = parseSafetensors(readFileSync(join(res.runDir, "model/model.safetensors")));
    expect([...weights.tensors.values()].every((t) => t.dtype === "F32")).toBe(true);
    expect(readFileSync(join(res.runDir, "report.html"), "utf8")).toMatch(/Δ score vs base[\s\S]*<svg/);
    // The shipped model is the base plus the scaled adapter: load both ways and compare logits.
    const shipped = await loadModel(join(res.runDir, "model"));
    const again = setup(4).model;
    await loadAdapter(again, join(res.runDir, "adapter"));
    const ids = new Tensor(Int32Array.from([1, 5, 9, 30, 44, 2, 60, 7]), [1, 8], "i32");
    const a = noGrad(() => shipped.forward(ids)).toFloat32Array();
    const b = noGrad(() => again.forward(ids)).toFloat32Array();
    const c = noGrad(() => setup(4).model.forward(ids)).toFloat32Array();
    let err = 0;
    let moved = 0;
    for (let i = 0; i < a.length; i++) {
      err = Math.max(err, Math.abs(a[i] - b[i]));
      moved = Math.max(moved, Math.abs(a[i] - c[i]));
    }
    expect(err).toBeLessThan(1e-4);
    expect(moved).toBeGreaterThan(1e-4);
    const meta = JSON.parse(readFileSync(join(res.runDir, "metadata.json"), "utf8"));
    expect(meta.datasets["rollouts/source.jsonl.gz"]).toMatch(/^[0-9a-f]{64}$/);
    expect(typeof meta.dirtyTree === "boolean" || meta.dirtyTree === null).toBe(true);
    expect(meta.baseModel.source).toBe("in-memory model");
    // The adapter's card reports the shipped model's evaluation and the run's data revision.
    const adapterCard = readFileSync(join(res.runDir, "adapter/README.md"), "utf8");
    expect(adapterCard).toMatch(/^---\nlibrary_name: peft\n/);
    expect(adapterCard).toContain("## Evaluation");
    expect(adapterCard).toContain(`rollouts/source.jsonl.gz: \`${meta.datasets["rollouts/source.jsonl.gz"]}\``);

    // The same name again is refused; resuming the finished run replays no training and ships the same bytes.
    await expect(runArp({ ...options, model: setup(4).model })).rejects.toThrow(/already exists/);
    const before = readFileSync(join(res.runDir, "model/model.safetensors"));
    const resumed = await runArp({ ...options, model: setup(4).model, mode: "resume" });
    expect(Buffer.compare(readFileSync(join(resumed.runDir, "model/model.safetensors")), before)).toBe(0);
    const lines = readFileSync(join(res.runDir, "metrics.jsonl"), "utf8").trim().split("\n");
    expect(lines.length).toBe(metrics.length); // nothing is appended twice
  });
});

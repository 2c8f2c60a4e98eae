import { rmSync } from "node:fs";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { parseSafetensors, verifyManifest } from "@kiln/hub-io";
import { attachLora, mergeAdapter } from "@kiln/lora";
import { Tensor, disposeWasmBackend, initBackend, noGrad, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { conversationBatch, preferenceBatch } from "../../src/recipes/batches.js";
import { runArp } from "../../src/recipes/arp.js";
import { trainDpo } from "../../src/recipes/dpo-trainer.js";
import { successOnlySftSet } from "../../src/recipes/sft-set.js";
import { trainSft } from "../../src/sft-trainer.js";
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
    const batch = conversationBatch(codec, successOnlySftSet(await expertEpisodes(2)));
    const adapter = attachLora(model, { r: 8, alpha: 16, targetModules: "all-linear", seed: 1 });
    const h = trainSft(model, adapter.parameters(), () => batch, { steps: 12, lr: 1e-2, warmupRatio: 0 });
    expect(h[h.length - 1].loss).toBeLessThan(h[0].loss * 0.9);
  });

  it("DPO against the adapter-off reference raises the reward margin from 0", async () => {
    const { model, codec } = setup(2);
    const [t] = await expertEpisodes(1, 5);
    const prompt = successOnlySftSet([t])[0].messages.slice(0, 2);
    const batch = preferenceBatch(codec, [
      { prompt, chosen: t.turns[0].message, rejected: { role: "assistant", content: "I will not guess." } },
      { prompt, chosen: t.turns[0].message, rejected: { role: "assistant", content: "guess guess guess guess" } },
    ]);
    const adapter = attachLora(model, { r: 8, alpha: 16, targetModules: "all-linear", seed: 2 });
    const h = trainDpo(model, adapter, () => batch, { steps: 10, lr: 1e-2, beta: 0.1, warmupRatio: 0 });
    // Step 1: policy == reference (B = 0), so loss = ln 2 and the margin is 0 (TRL invariant).
    expect(h[0].loss).toBeCloseTo(Math.LN2, 5);
    expect(Math.abs(h[0]["rewards/margins"])).toBeLessThan(1e-5);
    expect(h[h.length - 1]["rewards/margins"]).toBeGreaterThan(0.05);
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

  it("runArp writes a verified run directory with metrics, PEFT checkpoints, rollouts and pairs", async () => {
    const { model, codec } = setup(4);
    const source = await expertEpisodes(3, 0);
    const res = await runArp({
      model,
      codec,
      makeEnv,
      sourceTrajectories: source,
      out: root,
      name: "arp",
      progress: false,
      log: () => {},
      lora: { r: 4, alpha: 8 },
      sft: { steps: 4, lr: 1e-2, batchSize: 2 },
      dpo: { steps: 3, lr: 1e-2, batchSize: 2 },
      studentEpisodes: 3,
      maxChars: 12,
      branch: { k: 2, maxTrajectories: 1 },
      params: { maxTokens: 16 },
      limits: { maxTurns: 2 },
      evalEpisodes: 1,
    });
    // Students of a random model ramble: every reply exceeds 12 characters, and the expert's
    // episode with the same seed supplies the chosen reply at turn 0.
    expect(res.sftSize).toBe(3);
    expect(res.turnPairs).toBeGreaterThan(0);
    expect(res.sftLoss!.last).toBeLessThan(res.sftLoss!.first);
    expect(res.dpoMargins).not.toBeNull();
    expect((await verifyManifest(res.runDir)).ok).toBe(true);
    for (const f of [
      "config.json",
      "metadata.json",
      "summary.json",
      "pairs.json",
      "rollouts/source.jsonl.gz",
      "rollouts/student.jsonl.gz",
      "checkpoints/step-4/adapter_config.json",
      "checkpoints/step-7/adapter_model.safetensors",
    ])
      expect(existsSync(join(res.runDir, f)), f).toBe(true);
    const metrics = readFileSync(join(res.runDir, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(metrics.filter((m) => m.phase === "sft").length).toBe(4);
    expect(metrics.filter((m) => m.phase === "dpo").length).toBe(3);
    expect(metrics.some((m) => m.phase === "merge" && m.scale === 0.85)).toBe(true);
    // The DPO checkpoint carries the optimizer's moments, keyed by the adapter's PEFT names.
    const opt = parseSafetensors(readFileSync(join(res.runDir, "checkpoints/step-7/optimizer.safetensors")));
    expect(opt.metadata?.kind).toBe("adamw");
    expect(opt.metadata?.step).toBe("3");
    const names = res.adapter.namedParameters().map(([n]) => n);
    expect([...opt.tensors.keys()].sort()).toEqual(names.flatMap((n) => [`exp_avg.${n}`, `exp_avg_sq.${n}`]).sort());
    const meta = JSON.parse(readFileSync(join(res.runDir, "metadata.json"), "utf8"));
    expect(meta.datasets["rollouts/source.jsonl.gz"]).toMatch(/^[0-9a-f]{64}$/);
  });
});

import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { verifyManifest } from "@kiln/hub-io";
import { attachLora, loadAdapter } from "@kiln/lora";
import { LocalPolicy, loadModel } from "@kiln/models";
import { type Policy, runEpisodes } from "@kiln/rollout";
import { Tensor, backward, disposeWasmBackend, initBackend, noGrad, setBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type OpdSample,
  packEpisodeTurns,
  scaffoldedTeacher,
  scoreWithTeacher,
} from "../../src/recipes/opd-samples.js";
import { opdBatchLoss } from "../../src/trainer/objectives/opd.js";
import { runOpdRounds } from "../../src/recipes/opd.js";
import { opdTinyConfig } from "../../src/recipes/presets.js";
import { opdObjective } from "../../src/trainer/objectives/index.js";
import { train } from "../../src/trainer/trainer.js";
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

async function studentRollouts(seed: number) {
  const s = setup(seed);
  const adapter = attachLora(s.model, { r: 8, alpha: 8, targetModules: "all-linear", seed });
  const policy = new LocalPolicy({
    model: s.model,
    tokenizer: s.tokenizer,
    chatTemplate: s.template,
    defaults: { temperature: 1, maxTokens: 10, logprobs: true },
  });
  const r = await runEpisodes({
    makeEnv,
    policy,
    episodes: 2,
    baseSeed: seed,
    limits: { maxTurns: 2 },
    concurrency: 1,
  });
  return { ...s, adapter, policy, trajectories: r.trajectories };
}

describe("OPD rounds on a tiny random Qwen3", () => {
  it("a teacher that prefers the sampled tokens gives positive advantages", async () => {
    const { model, trajectories } = await studentRollouts(11);
    // This teacher is certain of every token the student sampled: log p_teacher = 0.
    const sure: Policy = {
      id: "sure",
      generate: () => Promise.reject(new Error("unused")),
      score: async (_m, completion) => ({
        tokenIds: completion as number[],
        logprobs: (completion as number[]).map(() => 0),
      }),
    };
    const { samples } = await scoreWithTeacher(trajectories, sure);
    expect(samples.length).toBe(4);
    const out = opdBatchLoss(model, samples, { clamp: 3, earlyTurnWeight: 1.5 });
    expect(out.metrics["advantage/min"]).toBeGreaterThan(0);
    expect(out.metrics.teacher_kl).toBeLessThan(0);
    // Early-turn weight: turn-0 advantages reach 1.5 × the clamp.
    expect(out.metrics["advantage/max"]).toBeLessThanOrEqual(4.5 + 1e-6);
    // An unsure teacher (log p = −20 everywhere) gives negative, clamped advantages.
    const unsure = samples.map((s): OpdSample => ({ ...s, teacherLogps: s.teacherLogps.map(() => -20) }));
    const neg = opdBatchLoss(model, unsure, { clamp: 3 });
    expect(neg.metrics["advantage/max"]).toBeLessThan(0);
    expect(neg.metrics["advantage/min"]).toBeCloseTo(-4.5, 5);
  });

  it("with policy = teacher the advantages and the LoRA gradient vanish", async () => {
    const { model, adapter, policy, trajectories } = await studentRollouts(12);
    // The teacher is the student itself (same weights, same template), scoring the same tokens.
    const { samples } = await scoreWithTeacher(trajectories, policy);
    for (const s of samples)
      for (let j = 0; j < s.samplerLogps.length; j++) expect(s.teacherLogps[j]).toBeCloseTo(s.samplerLogps[j], 3);
    const out = opdBatchLoss(model, samples, { clamp: 3 });
    backward(out.loss);
    let gradSq = 0;
    for (const p of adapter.parameters()) for (const g of p.grad!.dataSync() as Float32Array) gradSq += g * g;
    expect(Math.abs(out.metrics["advantage/mean"])).toBeLessThan(1e-3);
    expect(Math.sqrt(gradSq)).toBeLessThan(1e-3);

    // Contrast: a different teacher (another random model) gives a clearly non-zero gradient.
    const other = setup(99);
    const teacher = new LocalPolicy({ model: other.model, tokenizer: other.tokenizer, chatTemplate: other.template });
    const scored = await scoreWithTeacher(trajectories, teacher);
    for (const p of adapter.parameters()) p.grad = null;
    backward(opdBatchLoss(model, scored.samples, { clamp: 3 }).loss);
    let otherSq = 0;
    for (const p of adapter.parameters()) for (const g of p.grad!.dataSync() as Float32Array) otherSq += g * g;
    expect(Math.sqrt(otherSq)).toBeGreaterThan(100 * Math.sqrt(gradSq));
  });

  it("the PPO-clipped IS loss decreases on a fixed teacher-scored batch", async () => {
    const { model, adapter, trajectories } = await studentRollouts(13);
    const other = setup(98);
    const teacher = new LocalPolicy({ model: other.model, tokenizer: other.tokenizer, chatTemplate: other.template });
    const { samples } = await scoreWithTeacher(trajectories, teacher);
    const { history: h } = await train({
      stage: "opd",
      adapter,
      data: samples,
      objective: opdObjective(model, { clamp: 3, objective: "ppo" }),
      config: { lr: 3e-3, maxSteps: 6, microBatchSize: 2, gradAccum: 2, shuffle: false, schedule: "constant" },
      progress: null,
    });
    expect(Number(h[h.length - 1].loss)).toBeLessThan(Number(h[0].loss));
    // Distillation steps log the student's entropy on the completion tokens.
    expect(h.every((r) => Number(r.entropy) > 0)).toBe(true);
  });

  it("the top-k divergence objective: zero with policy = teacher, decreasing against another teacher", async () => {
    const { model, adapter, policy, trajectories } = await studentRollouts(14);
    const self = await scoreWithTeacher(trajectories, policy, { topLogprobs: 8 });
    expect(self.samples.every((s) => s.teacherTop?.length === s.completionIds.length)).toBe(true);
    const same = opdBatchLoss(model, self.samples, { divergence: "reverse_kl" });
    expect(Math.abs(same.loss.item())).toBeLessThan(1e-4);
    // Without top-k scores the objective says what is missing.
    const plain = await scoreWithTeacher(trajectories, policy);
    expect(() => opdBatchLoss(model, plain.samples, { divergence: "reverse_kl" })).toThrow(/teacher top-k/);

    const other = setup(97);
    const teacher = new LocalPolicy({ model: other.model, tokenizer: other.tokenizer, chatTemplate: other.template });
    const { samples } = await scoreWithTeacher(trajectories, teacher, { topLogprobs: 8 });
    const before = opdBatchLoss(model, samples, { divergence: "reverse_kl", earlyTurnWeight: 1 }).loss.item();
    expect(before).toBeGreaterThan(0.01);
    const { history: h } = await train({
      stage: "opd-rkl",
      adapter,
      data: samples,
      objective: opdObjective(model, { divergence: "reverse_kl" }),
      config: { lr: 3e-3, maxSteps: 6, microBatchSize: 2, gradAccum: 2, shuffle: false, schedule: "constant" },
      progress: null,
    });
    expect(Number(h[h.length - 1].loss)).toBeLessThan(Number(h[0].loss));
    expect(h.every((r) => Number(r.divergence) >= 0)).toBe(true);
  });

  it("packEpisodeTurns: one sample per episode, the same per-token loss and gradient as per-turn samples", async () => {
    const { model, adapter, trajectories } = await studentRollouts(15);
    const other = setup(96);
    const teacher = new LocalPolicy({ model: other.model, tokenizer: other.tokenizer, chatTemplate: other.template });
    const { samples } = await scoreWithTeacher(trajectories, teacher, { topLogprobs: 6 });
    const packed = packEpisodeTurns(samples);
    // Two episodes of two turns each: the chat template re-renders history as generated, so they pack.
    expect(samples).toHaveLength(4);
    expect(packed).toHaveLength(2);
    const tokens = samples.reduce((a, s) => a + s.completionIds.length, 0);
    expect(packed.reduce((a, s) => a + s.trainMask!.reduce((m, v) => m + v, 0), 0)).toBe(tokens);
    for (const options of [{ clamp: 3 }, { divergence: "reverse_kl" as const }]) {
      const grads = (batch: OpdSample[]) => {
        for (const p of adapter.parameters()) p.grad = null;
        const out = opdBatchLoss(model, batch, options);
        backward(out.loss);
        return { loss: out.loss.item(), g: adapter.parameters().map((p) => Array.from(p.grad!.dataSync())) };
      };
      const a = grads(samples);
      const b = grads(packed);
      expect(b.loss).toBeCloseTo(a.loss, 5);
      let diff = 0;
      let norm = 0;
      for (const [i, g] of a.g.entries())
        for (const [j, v] of g.entries()) {
          diff = Math.max(diff, Math.abs(v - b.g[i][j]));
          norm = Math.max(norm, Math.abs(v));
        }
      expect(norm).toBeGreaterThan(0);
      expect(diff).toBeLessThan(1e-4 * norm + 1e-6);
    }
  });

  it("runOpdRounds chains fresh LoRAs over rounds, writes each round's adapter and merged model", async () => {
    const { model, codec } = setup(14);
    const config = opdTinyConfig();
    Object.assign(config, {
      rounds: 2,
      episodesPerRound: 1,
      lora: { r: 8, alpha: 8, dropout: 0, targetModules: "all-linear", useRslora: false },
      rollout: { temperature: 1, maxTokens: 8, maxTurns: 2 },
      eval: { seeds: [1, 2, 3] },
    });
    Object.assign(config.train, { maxSteps: 2, microBatchSize: 2, gradAccum: 1, checkpointEvery: 1 });
    const res = await runOpdRounds({
      model,
      codec,
      makeEnv,
      // Teacher: the same model with a scaffold prompt.
      teacher: (student) => scaffoldedTeacher(student, "Hint: bisect the range and call guess."),
      config,
      starts: () => [
        { id: "wall", seed: 5, state: { secret: 40, low: 30, high: 50, guesses: [20, 60], solved: false } },
      ],
      out: root,
      name: "opd",
      progress: false,
      log: () => {},
    });
    expect(res.rounds.map((r) => r.round)).toEqual([1, 2]);
    expect(res.rounds.every((r) => r.samples >= 2 && Number.isFinite(r.teacherKlFirst))).toBe(true);
    // Evaluation: n ≥ 3 instances, so the SE exists, and the paired Δ against the base.
    expect(res.baseline.n).toBe(3);
    expect(res.rounds.every((r) => r.eval.delta?.n === 3 && Number.isFinite(r.eval.score.se))).toBe(true);
    expect((await verifyManifest(res.runDir)).ok).toBe(true);
    for (const f of [
      "rollouts/round-1.jsonl.gz",
      "rollouts/round-2.jsonl.gz",
      "checkpoints/round-1/step-2/adapter_config.json",
      "checkpoints/round-2/step-1/optimizer.safetensors",
      "rounds/r1/adapter/adapter_model.safetensors",
      "rounds/r2/model/model.safetensors",
      "report.html",
    ])
      expect(existsSync(join(res.runDir, f)), f).toBe(true);
    const cfg = JSON.parse(readFileSync(join(res.runDir, "rounds/r2/adapter/adapter_config.json"), "utf8"));
    expect(cfg.r).toBe(8);
    expect(cfg.use_rslora).toBe(false);
    const metrics = readFileSync(join(res.runDir, "metrics.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(metrics.filter((m) => /^round-\d$/.test(m.stage)).length).toBe(4);
    // After the last round no adapter is left attached: the model is the merged one.
    expect(model.namedLinears().every(([, l]) => l.adapters.length === 0)).toBe(true);
    // Round 2's adapter is relative to the merged round 1: r1 + r2 on the base equals the r2 model.
    const chained = setup(14).model;
    await loadAdapter(chained, join(res.runDir, "rounds/r1/adapter"), { name: "r1" });
    await loadAdapter(chained, join(res.runDir, "rounds/r2/adapter"), { name: "r2" });
    const merged = await loadModel(join(res.runDir, "rounds/r2/model"));
    const ids = new Tensor(Int32Array.from([1, 5, 9, 30, 44, 2]), [1, 6], "i32");
    const a = noGrad(() => chained.forward(ids)).toFloat32Array();
    const b = noGrad(() => merged.forward(ids)).toFloat32Array();
    let err = 0;
    for (let i = 0; i < a.length; i++) err = Math.max(err, Math.abs(a[i] - b[i]));
    expect(err).toBeLessThan(1e-4);
  });
});

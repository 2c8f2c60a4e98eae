import { attachLora } from "@kiln/lora";
import { GuessNumberEnv, ScriptedPolicy, guessNumberScript, runEpisodes, trajectoryMessages } from "@kiln/rollout";
import { cosineSchedule, warmupSteps } from "@kiln/tensor";
import { beforeAll, describe, expect, it } from "vitest";
import type { Conversation } from "../../src/trainer/chat-batches.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";
import { fitToLength, sftObjective } from "../../src/trainer/objectives/index.js";
import { TrainerError, epochOrder, plannedSteps, stageWarmupSteps, train } from "../../src/index.js";

let data: Conversation[] = [];
beforeAll(async () => {
  const r = await runEpisodes({
    makeEnv: () => new GuessNumberEnv(),
    policy: new ScriptedPolicy({ id: "bisect", script: guessNumberScript() }),
    episodes: 4,
    baseSeed: 5,
    concurrency: 1,
    limits: { maxTurns: 2 },
  });
  data = r.trajectories.map((t) => ({ messages: trajectoryMessages(t) }));
});

function fresh() {
  const chat = tinyChat({ seed: 11 });
  const adapter = attachLora(chat.model, { r: 2, alpha: 4, targetModules: ["q_proj", "down_proj"], seed: 3 });
  // B starts at zero; give it values so the first step's gradient reaches A too.
  for (const [, p] of adapter.namedParameters()) {
    const v = p.f32Sync();
    for (let i = 0; i < v.length; i++) v[i] = Math.sin(i + 1) * 0.05;
  }
  const objective = sftObjective(
    chat.model,
    { tokenizer: chat.tokenizer, template: chat.template },
    { maxLength: 220 },
  );
  return { adapter, objective };
}

const weights = (a: ReturnType<typeof fresh>["adapter"]) => a.parameters().flatMap((p) => Array.from(p.f32Sync()));

describe("the trainer loop", () => {
  it("micro-batch 2 × accumulation 2 makes the same update as one batch of 4 (token-normalised)", async () => {
    const one = fresh();
    const two = fresh();
    const base = { lr: 1e-2, maxSteps: 1, shuffle: false, progress: null, maxGradNorm: 0 } as const;
    const r1 = await train({
      stage: "a",
      adapter: one.adapter,
      data,
      objective: one.objective,
      config: { ...base, microBatchSize: 4 },
      progress: null,
    });
    const r2 = await train({
      stage: "b",
      adapter: two.adapter,
      data,
      objective: two.objective,
      config: { ...base, microBatchSize: 2, gradAccum: 2 },
      progress: null,
    });
    expect(r2.history[0].loss).toBeCloseTo(r1.history[0].loss, 5);
    expect(r2.history[0].grad_norm).toBeCloseTo(r1.history[0].grad_norm, 4);
    const [w1, w2] = [weights(one.adapter), weights(two.adapter)];
    expect(w1.some((v, i) => Math.abs(v - Math.sin((i % 1000) + 1) * 0.05) > 0)).toBe(true);
    for (let i = 0; i < w1.length; i++) expect(Math.abs(w1[i] - w2[i])).toBeLessThan(1e-6);
  });

  it("lets the event loop turn between steps, so a Ctrl-C is handled before the stage ends", async () => {
    const { adapter, objective } = fresh();
    let stepsDone = 0;
    let firedAfter = -1;
    // A timer due at once fires only when the event loop turns: before this, not until the stage had ended.
    setTimeout(() => {
      firedAfter = stepsDone;
    }, 0);
    await train({
      stage: "t",
      adapter,
      data,
      objective,
      config: { lr: 1e-2, maxSteps: 4, microBatchSize: 1, shuffle: false },
      progress: null,
      onStep: () => {
        stepsDone++;
      },
    });
    expect(stepsDone).toBe(4);
    expect(firedAfter).toBeGreaterThanOrEqual(0);
    expect(firedAfter).toBeLessThan(4);
  });

  it("logs the pre-clip gradient norm, the warmup-cosine lr, and refuses bad settings", async () => {
    const { adapter, objective } = fresh();
    const r = await train({
      stage: "s",
      adapter,
      data,
      objective,
      config: { lr: 1e-2, epochs: 2, microBatchSize: 2, warmupRatio: 0.25, maxGradNorm: 1e-6, seed: 7 },
      progress: null,
    });
    expect(r.steps).toBe(plannedSteps(4, { lr: 1, epochs: 2, microBatchSize: 2 }));
    expect(r.steps).toBe(4);
    const sched = cosineSchedule(warmupSteps(4, 0.25), 4);
    r.history.forEach((h, i) => {
      expect(h.lr).toBeCloseTo(1e-2 * sched(i), 12);
      expect(h.grad_norm).toBeGreaterThan(1e-3);
    });
    expect(r.history.map((h) => h.epoch)).toEqual([0, 0, 1, 1]);
    await expect(
      train({ stage: "x", adapter, data: [], objective, config: { lr: 1 }, progress: null }),
    ).rejects.toThrow(TrainerError);
    await expect(
      train({ stage: "x", adapter, data, objective, config: { lr: 1, gradAccum: 0 }, progress: null }),
    ).rejects.toThrow(/gradAccum must be a positive integer/);
  });

  it("a 1- or 2-step stage with warmup still moves the weights (warmup capped below the stage's steps)", async () => {
    // Before the cap, ceil(steps · 0.03) = 1 warmup step made every step of a 1-step stage run at lr 0.
    expect([1, 2, 3, 4, 100].map((n) => stageWarmupSteps(n, 0.03))).toEqual([0, 0, 1, 1, 3]);
    expect(stageWarmupSteps(4, 0.25)).toBe(warmupSteps(4, 0.25));
    for (const maxSteps of [1, 2]) {
      const { adapter, objective } = fresh();
      const before = weights(adapter);
      const r = await train({
        stage: `short-${maxSteps}`,
        adapter,
        data,
        objective,
        config: { lr: 1e-2, maxSteps, warmupRatio: 0.03, schedule: "cosine", seed: 7 },
        progress: null,
      });
      expect(r.history[0].lr).toBeCloseTo(1e-2, 12);
      const after = weights(adapter);
      const moved = after.reduce((m, v, i) => Math.max(m, Math.abs(v - before[i])), 0);
      expect(moved).toBeGreaterThan(1e-5);
    }
  });

  it("shuffles each epoch with a seeded permutation", () => {
    const a = epochOrder(50, 42, 0);
    expect([...a].sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(epochOrder(50, 42, 0)).toEqual(a);
    expect(epochOrder(50, 42, 1)).not.toEqual(a);
    expect(epochOrder(50, 43, 0)).not.toEqual(a);
    expect([...epochOrder(5, 1, 0, false)]).toEqual([0, 1, 2, 3, 4]);
  });
});

describe("max length in the distillation objectives", () => {
  it("cuts the prompt's start first, then the completion's end with its per-token log-probs", () => {
    const s = {
      promptIds: [1, 2, 3, 4],
      completionIds: [5, 6, 7],
      samplerLogps: [-1, -2, -3],
      teacherLogps: [-4, -5, -6],
    };
    expect(fitToLength(s, 10)).toBe(s);
    expect(fitToLength(s, 5, ["samplerLogps", "teacherLogps"])).toEqual({
      promptIds: [3, 4],
      completionIds: [5, 6, 7],
      samplerLogps: [-1, -2, -3],
      teacherLogps: [-4, -5, -6],
    });
    expect(fitToLength(s, 3, ["samplerLogps", "teacherLogps"])).toEqual({
      promptIds: [4],
      completionIds: [5, 6],
      samplerLogps: [-1, -2],
      teacherLogps: [-4, -5],
    });
  });
});

// Values and gradients against PyTorch float64 transcriptions of the reference formulas
// (test/fixtures/make_fixtures.py → reference.json, committed).
import { readFileSync } from "node:fs";
import { backward, tensor } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import {
  type DpoLossType,
  type PolicyObjective,
  distillationLoss,
  dpoLossFromLogits,
  opdAdvantages,
  policyGradientLoss,
  sampledTokenKl,
  sftLoss,
} from "../src/index.js";
import { expectClose } from "./reference.js";

// biome-ignore lint/suspicious/noExplicitAny: fixture JSON
const ref: any = JSON.parse(readFileSync(new URL("./fixtures/reference.json", import.meta.url), "utf8"));
const f32 = (a: number[]) => Float32Array.from(a);
const i32 = (a: number[]) => Int32Array.from(a);

describe("PyTorch reference fixtures", () => {
  it("SFT causal-LM loss (mean and sum / num_items_in_batch), gradient, accuracy, entropy", () => {
    for (const c of ref.sft) {
      const x = tensor(f32(c.logits), [c.B, c.T, c.V]).requireGrad();
      const { loss, metrics } = sftLoss(x, tensor(i32(c.labels), [c.B, c.T], "i32"), {
        numItemsInBatch: c.num_items_in_batch ?? undefined,
        entropy: true,
      });
      expect(loss.item()).toBeCloseTo(c.loss, 5);
      expect(metrics.mean_token_accuracy).toBeCloseTo(c.mean_token_accuracy, 10);
      expect(metrics.entropy).toBeCloseTo(c.entropy, 5);
      backward(loss);
      expectClose(x.grad?.dataSync() as Float32Array, c.grad, 1e-7, 1e-4);
    }
  });

  it("DPO sigmoid / robust / hinge / ipo from logits: loss, metrics, gradient; ln 2 at policy = reference", () => {
    for (const c of ref.dpo) {
      const shape = [2 * c.P, c.T, c.V];
      const x = tensor(f32(c.policy_logits), shape).requireGrad();
      const { loss, metrics } = dpoLossFromLogits(
        {
          policyLogits: x,
          inputIds: tensor(i32(c.input_ids), [2 * c.P, c.T], "i32"),
          completionMask: tensor(f32(c.completion_mask), [2 * c.P, c.T]),
          reference: { logits: () => tensor(f32(c.ref_logits), shape) },
        },
        { beta: c.beta, lossType: c.loss_type as DpoLossType, labelSmoothing: c.label_smoothing },
      );
      expect(loss.item()).toBeCloseTo(c.loss, 5);
      if (c.metrics === null) {
        expect(loss.item()).toBeCloseTo(Math.LN2, 7);
        continue;
      }
      for (const [k, v] of Object.entries(c.metrics)) expect(metrics[k], k).toBeCloseTo(v as number, 4);
      backward(loss);
      expectClose(x.grad?.dataSync() as Float32Array, c.grad, 1e-6, 1e-4);
    }
  });

  it("GKD generalized JSD (β = 0, 1, 0.5, 0.3 with temperature), batchmean over labels", () => {
    for (const c of ref.gkd) {
      const x = tensor(f32(c.student), [c.B, c.T, c.V]).requireGrad();
      const { loss } = distillationLoss(x, tensor(f32(c.teacher), [c.B, c.T, c.V]), {
        kind: "jsd",
        beta: c.beta,
        temperature: c.temperature,
        mask: c.labels.map((l: number) => (l !== -100 ? 1 : 0)),
      });
      expect(loss.item()).toBeCloseTo(c.loss, 5);
      backward(loss);
      expectClose(x.grad?.dataSync() as Float32Array, c.grad, 1e-7, 1e-4);
    }
  });

  it("SDFT top-k with tail bucket (α = 0.5, 0, 1)", () => {
    for (const c of ref.topk) {
      const x = tensor(f32(c.student), [c.N, c.V]).requireGrad();
      const { loss } = distillationLoss(x, tensor(f32(c.teacher), [c.N, c.V]), {
        kind: "jsd",
        beta: c.alpha,
        topK: c.k,
        mask: c.mask,
      });
      expect(loss.item()).toBeCloseTo(c.loss, 5);
      backward(loss);
      expectClose(x.grad?.dataSync() as Float32Array, c.grad, 1e-7, 1e-4);
    }
  });

  it("sampled-token reverse-KL surrogate with the capped importance weight", () => {
    for (const c of ref.sampled_token) {
      const x = tensor(f32(c.student)).requireGrad();
      const { loss } = sampledTokenKl(
        { studentLogps: x, teacherLogps: tensor(f32(c.teacher)), oldLogps: tensor(f32(c.old)), mask: c.mask },
        { isClip: c.is_clip },
      );
      expect(loss.item()).toBeCloseTo(c.loss, 5);
      backward(loss);
      expectClose(x.grad?.dataSync() as Float32Array, c.grad, 1e-6, 1e-4);
    }
  });

  it("on-policy distillation: advantages, teacher_kl and the IS / PPO / CISPO objectives (Tinker)", () => {
    for (const c of ref.pg) {
      const { advantages, metrics: m } = opdAdvantages({
        samplerLogps: tensor(f32(c.sampler)),
        teacherLogps: tensor(f32(c.teacher)),
        mask: c.mask,
      });
      expectClose(advantages.dataSync() as Float32Array, c.advantages, 1e-6, 1e-5);
      expect(m.teacher_kl).toBeCloseTo(c.teacher_kl, 5);
      const x = tensor(f32(c.logp)).requireGrad();
      const { loss } = policyGradientLoss(
        { policyLogps: x, samplerLogps: tensor(f32(c.sampler)), advantages, mask: c.mask },
        { objective: c.objective as PolicyObjective },
      );
      expect(loss.item()).toBeCloseTo(c.loss, 4);
      backward(loss);
      expectClose(x.grad?.dataSync() as Float32Array, c.grad, 1e-6, 1e-4);
    }
  });
});

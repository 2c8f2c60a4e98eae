// Composites against fixtures produced by PyTorch (test/fixtures/make_fixtures.py).
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { expectClose } from "./helpers.js";

const fx = JSON.parse(readFileSync(new URL("./fixtures/torch-fixtures.json", import.meta.url), "utf8"));
const f32 = (a: number[]) => Float32Array.from(a);

describe("PyTorch parity", () => {
  it("GQA causal attention with key padding: forward and backward", () => {
    const a = fx.attention;
    const [B, H, Hkv, Tn, D] = a.shape;
    const q = new T.Tensor(f32(a.q), [B, H, Tn, D]).requireGrad();
    const k = new T.Tensor(f32(a.k), [B, Hkv, Tn, D]).requireGrad();
    const v = new T.Tensor(f32(a.v), [B, Hkv, Tn, D]).requireGrad();
    const out = T.attention(q, k, v, { causal: true, keyMask: Uint8Array.from(a.key_mask) });
    expectClose(out.toFloat32Array(), a.out, 1e-5, 1e-5);
    T.backward(out, new T.Tensor(f32(a.grad_out), out.shape));
    expectClose(q.grad!.toFloat32Array(), a.dq, 1e-4, 1e-5);
    expectClose(k.grad!.toFloat32Array(), a.dk, 1e-4, 1e-5);
    expectClose(v.grad!.toFloat32Array(), a.dv, 1e-4, 1e-5);
  });

  it("cross-entropy with ignore_index: loss and gradient", () => {
    const c = fx.cross_entropy;
    const logits = new T.Tensor(f32(c.logits), c.shape).requireGrad();
    const loss = T.crossEntropy(logits, T.tensor(c.targets, [c.targets.length], "i32"));
    expect(Math.abs(loss.item() - c.loss)).toBeLessThan(1e-5);
    T.backward(loss);
    expectClose(logits.grad!.toFloat32Array(), c.grad, 1e-4, 1e-6);
  });

  it("10 AdamW steps with clip_grad_norm_ and cosine warmup schedule", () => {
    const a = fx.adamw;
    const W = new T.Tensor(f32(a.W0), [4, 3]).requireGrad();
    const b = new T.Tensor(f32(a.b0), [4]).requireGrad();
    const x = new T.Tensor(f32(a.x), [5, 3]);
    const y = new T.Tensor(f32(a.y), [5, 4]);
    const opt = new T.AdamW([W, b], { lr: a.base_lr, betas: [0.9, 0.999], eps: 1e-8, weightDecay: 0.01 });
    const warmup = T.warmupSteps(a.total_steps, a.warmup_ratio);
    const sched = new T.LrScheduler(opt, a.base_lr, T.cosineSchedule(warmup, a.total_steps));
    for (let step = 0; step < a.total_steps; step++) {
      opt.zeroGrad();
      const loss = T.sum(T.square(T.sub(T.linear(x, W, b), y)));
      T.backward(loss);
      const norm = T.clipGradNorm([W, b], a.max_norm);
      expect(Math.abs(opt.lr - a.lrs[step])).toBeLessThan(1e-9);
      expect(Math.abs(norm - a.grad_norms[step]) / a.grad_norms[step]).toBeLessThan(1e-5);
      expect(Math.abs(loss.item() - a.losses[step]) / Math.abs(a.losses[step])).toBeLessThan(1e-5);
      opt.step();
      sched.step();
    }
    expectClose(W.toFloat32Array(), a.W, 1e-5, 1e-6);
    expectClose(b.toFloat32Array(), a.b, 1e-5, 1e-6);
  });

  it("bf16 and f16 rounding bit-exact with torch (ties to even, subnormals, overflow)", () => {
    const r = fx.rounding;
    const vals = f32(r.values);
    expect(Array.from(vals, (v) => T.f32ToBf16Bits(v))).toEqual(r.bf16_bits);
    expect(Array.from(vals, (v) => T.f32ToF16Bits(v))).toEqual(r.f16_bits);
    const t = new T.Tensor(vals, [vals.length]);
    expect(Array.from(t.to("bf16").dataSync())).toEqual(r.bf16_bits);
    expect(Array.from(t.to("f16").dataSync())).toEqual(r.f16_bits);
  });
});

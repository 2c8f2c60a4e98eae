import { describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { expectClose, randomTensor } from "./helpers.js";

describe("autograd", () => {
  it("accumulates gradients across backward calls until zeroGrad", () => {
    const w = randomTensor([3]);
    T.backward(T.sum(T.mul(w, 2)));
    T.backward(T.sum(T.mul(w, 3)));
    expectClose(w.grad!.toFloat32Array(), [5, 5, 5]);
    T.zeroGrad([w]);
    expect(w.grad).toBeNull();
  });

  it("sums gradients of a tensor used twice (diamond graph)", () => {
    const x = randomTensor([4]);
    const y = T.mul(x, x);
    T.backward(T.sum(T.add(y, T.exp(x))));
    const expected = Array.from(x.dataSync(), (v) => 2 * v + Math.exp(v));
    expectClose(x.grad!.toFloat32Array(), expected, 1e-5, 1e-6);
  });

  it("noGrad and detach stop the tape", () => {
    const x = randomTensor([2]);
    const y = T.noGrad(() => T.mul(x, 3));
    expect(y.requiresGrad).toBe(false);
    expect(y.node).toBeNull();
    const z = T.mul(x.detach(), 3);
    expect(z.requiresGrad).toBe(false);
    expect(() => T.backward(T.sum(z))).toThrow(T.AutogradError);
  });

  it("backward on a non-scalar needs an explicit gradient", () => {
    const x = randomTensor([2]);
    expect(() => T.backward(T.mul(x, 2))).toThrow(/implicit gradient only for scalars/);
  });

  it("handles a deep chain without recursion limits", () => {
    const x = randomTensor([1]);
    let y = x;
    for (let i = 0; i < 20000; i++) y = T.add(y, 0);
    T.backward(T.sum(y));
    expect(x.grad!.item()).toBe(1);
  });

  it("gradient checkpointing gives the same gradients with recomputation", () => {
    const w1 = randomTensor([6, 6]);
    const w2 = randomTensor([6, 6]);
    const x = randomTensor([3, 6], -1, 1, false);
    const block = (h: T.Tensor) => T.silu(T.linear(T.gelu(T.linear(h, w1)), w2));
    T.backward(T.sum(T.square(block(block(x)))));
    const g1 = w1.grad!.toFloat32Array();
    const g2 = w2.grad!.toFloat32Array();
    T.zeroGrad([w1, w2]);
    const h = T.checkpoint(block, x);
    const out = T.checkpoint(block, h);
    expect(out.requiresGrad).toBe(true);
    T.backward(T.sum(T.square(out)));
    expectClose(w1.grad!.toFloat32Array(), g1, 1e-5, 1e-6);
    expectClose(w2.grad!.toFloat32Array(), g2, 1e-5, 1e-6);
  });

  it("checkpoint frees the gradients of its recomputed inputs: a training loop's memory does not grow", () => {
    const w1 = randomTensor([6, 6]);
    const w2 = randomTensor([6, 6]);
    const x = randomTensor([3, 6], -1, 1, false);
    const block = (h: T.Tensor) => T.silu(T.linear(h, w2));
    const live: number[] = [];
    for (let step = 0; step < 4; step++) {
      T.tidy(() => {
        for (const w of [w1, w2]) {
          w.grad?.dispose();
          w.grad = null;
        }
        // The checkpointed block's input needs a gradient (it comes from w1), so its detached copy gets one.
        T.backward(T.sum(T.square(T.checkpoint(block, T.linear(x, w1)))));
      });
      live.push(T.memory().allocations);
    }
    expect(live.slice(1), `live allocations after each step: ${live.join(", ")}`).toEqual([live[0], live[0], live[0]]);
  });

  it("gradient accumulation over micro-batches equals one large batch (sum reduction)", () => {
    const w = randomTensor([4, 3]);
    const x = randomTensor([6, 3], -1, 1, false);
    T.backward(T.sum(T.square(T.linear(x, w))));
    const full = w.grad!.toFloat32Array();
    T.zeroGrad([w]);
    for (const [s, e] of [
      [0, 2],
      [2, 6],
    ]) {
      T.backward(T.sum(T.square(T.linear(T.narrow(x, 0, s, e), w))));
    }
    expectClose(w.grad!.toFloat32Array(), full, 1e-5, 1e-6);
  });
});

describe("dtypes and RNG", () => {
  it("bf16/f16 round trip of representable values and NaN handling", () => {
    for (const v of [1, -2, 0.5, 3, 65504]) expect(T.f16BitsToF32(T.f32ToF16Bits(v))).toBe(v);
    for (const v of [1, -2, 0.5, 3, 2 ** 100]) expect(T.bf16BitsToF32(T.f32ToBf16Bits(v))).toBe(v);
    expect(Number.isNaN(T.bf16BitsToF32(T.f32ToBf16Bits(Number.NaN)))).toBe(true);
    expect(Number.isNaN(T.f16BitsToF32(T.f32ToF16Bits(Number.NaN)))).toBe(true);
    expect(T.f32ToF16Bits(1e6)).toBe(0x7c00);
  });

  it("Philox4x32-10 matches the Random123 known-answer vectors", () => {
    const out = new Uint32Array(4);
    T.philox4x32(0, 0, 0, 0, 0, 0, out);
    expect(Array.from(out, (v) => v.toString(16))).toEqual(["6627e8d5", "e169c58d", "bc57ac4c", "9b00dbd8"]);
    T.philox4x32(0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, out);
    expect(Array.from(out, (v) => v.toString(16))).toEqual(["408f276d", "41c83b0e", "a20bc7c6", "6d5451fd"]);
  });

  it("same seed gives the same stream; offsets address it randomly", () => {
    const a = new T.Rng(42).uniform(10);
    const b = T.uniformFloats(42, 0, 10);
    expect(Array.from(a)).toEqual(Array.from(b));
    expect(Array.from(T.uniformFloats(42, 3, 7))).toEqual(Array.from(a.subarray(3)));
    const n = new T.Rng(5).normal(20000);
    const mean = n.reduce((s, v) => s + v, 0) / n.length;
    const variance = n.reduce((s, v) => s + (v - mean) ** 2, 0) / n.length;
    expect(Math.abs(mean)).toBeLessThan(0.03);
    expect(Math.abs(variance - 1)).toBeLessThan(0.05);
    expect(T.randn([3], { seed: 1 }).toArray()).toEqual(T.randn([3], { seed: 1 }).toArray());
  });
});

describe("schedules", () => {
  it("linear and constant with warmup follow transformers' lambdas", () => {
    const lin = T.linearSchedule(2, 10);
    expect([0, 1, 2, 6, 10, 12].map(lin)).toEqual([0, 0.5, 1, 0.5, 0, 0]);
    const c = T.constantSchedule(4);
    expect([0, 2, 4, 9].map(c)).toEqual([0, 0.5, 1, 1]);
    expect(T.warmupSteps(10, 0.15)).toBe(2);
  });

  it("SGD with momentum matches the torch recurrence", () => {
    const p = new T.Tensor(Float32Array.of(1, -1), [2]).requireGrad();
    const opt = new T.SGD([p], 0.1, 0.9);
    const gs = [
      [0.5, -0.2],
      [0.1, 0.3],
    ];
    const v = [0, 0];
    const ref = [1, -1];
    gs.forEach((g, step) => {
      p.grad = new T.Tensor(Float32Array.from(g), [2]);
      opt.step();
      for (let i = 0; i < 2; i++) {
        v[i] = step === 0 ? g[i] : 0.9 * v[i] + g[i];
        ref[i] -= 0.1 * v[i];
      }
    });
    expectClose(p.toFloat32Array(), ref, 1e-6, 1e-7);
  });
});

describe("leaf gradient storage", () => {
  it("two leaves fed the same gradient buffer get separate storage (clipping one never scales the other)", () => {
    const a = randomTensor([4]);
    const b = randomTensor([4]);
    T.backward(T.sum(T.add(a, b))); // add's backward hands the same gradient to both inputs
    expect(a.grad!.dataSync().buffer).not.toBe(b.grad!.dataSync().buffer);
    T.clipGradNorm([a], 0.1);
    expect(Array.from(b.grad!.dataSync())).toEqual([1, 1, 1, 1]);
  });

  it("the caller's seed gradient is never taken over", () => {
    const x = randomTensor([3]);
    const seed = new T.Tensor(Float32Array.of(1, 2, 3), [3]);
    T.backward(T.reshape(x, [3]), seed);
    expect(x.grad!.dataSync().buffer).not.toBe(seed.dataSync().buffer);
    T.backward(T.reshape(x, [3]), seed);
    expect(Array.from(seed.dataSync())).toEqual([1, 2, 3]);
    expect(Array.from(x.grad!.dataSync())).toEqual([2, 4, 6]);
  });
});

describe("checkpointing with randomness", () => {
  it("a dropout block recomputed under checkpoint redraws the forward's mask (same gradients)", () => {
    const w = randomTensor([6, 6]);
    const x = randomTensor([4, 6], -1, 1, false);
    const block = (h: T.Tensor) => T.linear(T.dropout(h, 0.5, { seed: 9, offset: T.nextRngSequence() * h.size }), w);
    const start = T.rngSequencePosition();
    T.backward(T.sum(T.square(block(x))));
    const plain = w.grad!.toFloat32Array();
    T.zeroGrad([w]);
    T.setRngSequencePosition(start);
    T.backward(T.sum(T.square(T.checkpoint(block, x))));
    expectClose(w.grad!.toFloat32Array(), plain, 1e-6, 1e-7);
  });
});

// The fused LoRA linear op against an independent float64 computation (forward) and central finite
// differences of it (every gradient), on fresh random inputs; then fused = unfused on a model.
import { createModel } from "@kiln/models";
import * as T from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LoraError, LoraLayer, attachLora, loraLinear } from "../src/index.js";

let seed = 500;
function rand(n: number, scale = 1): Float32Array {
  return new T.Rng(seed++).uniform(n).map((u) => (2 * u - 1) * scale);
}
function tensor(shape: number[], grad: boolean, scale = 1): T.Tensor {
  const t = new T.Tensor(
    rand(
      shape.reduce((a, b) => a * b, 1),
      scale,
    ),
    shape,
  );
  return t.requireGrad(grad);
}

function expectClose(actual: ArrayLike<number>, expected: ArrayLike<number>, rtol: number, atol: number): void {
  expect(actual.length).toBe(expected.length);
  for (let i = 0; i < actual.length; i++) {
    const tol = atol + rtol * Math.abs(expected[i]);
    if (!(Math.abs(actual[i] - expected[i]) <= tol))
      throw new Error(`element ${i}: got ${actual[i]}, expected ${expected[i]} (±${tol})`);
  }
}

/** y = x·Wᵀ + b + s·(mask⊙x)·Aᵀ·Bᵀ in float64 (mask = 1 without dropout). */
function reference(
  x: Float64Array,
  w: Float64Array,
  b: Float64Array | null,
  a: Float64Array,
  bb: Float64Array,
  s: number,
  dims: { rows: number; inF: number; out: number; r: number },
  mask: Float64Array | null,
): Float64Array {
  const { rows, inF, out, r } = dims;
  const y = new Float64Array(rows * out);
  for (let i = 0; i < rows; i++) {
    const u = new Float64Array(r);
    for (let q = 0; q < r; q++)
      for (let k = 0; k < inF; k++) u[q] += (mask ? mask[i * inF + k] : 1) * x[i * inF + k] * a[q * inF + k];
    for (let j = 0; j < out; j++) {
      let v = b ? b[j] : 0;
      for (let k = 0; k < inF; k++) v += x[i * inF + k] * w[j * inF + k];
      for (let q = 0; q < r; q++) v += s * u[q] * bb[j * r + q];
      y[i * out + j] = v;
    }
  }
  return y;
}

/**
 * Checks forward against the float64 reference and each requested gradient against central
 * differences of L = Σ y·g for a random g.
 */
function check(opts: {
  x: T.Tensor;
  w: T.Tensor;
  bias: T.Tensor | null;
  A: T.Tensor;
  B: T.Tensor;
  s: number;
  dropoutP?: number;
}) {
  const { x, w, bias, A, B, s } = opts;
  const [out, inF] = w.shape;
  const r = A.shape[0];
  const rows = x.size / inF;
  const dims = { rows, inF, out, r };
  let mask: Float64Array | null = null;
  const drop = opts.dropoutP ? { p: opts.dropoutP, seed: 11, offset: 3 } : undefined;
  if (drop) {
    // the tensor dropout op on ones gives the scaled keep-mask for the same seed and offset
    mask = Float64Array.from(T.dropout(T.ones([...x.shape]), drop.p, drop).toFloat32Array());
    expect(mask.some((v) => v === 0)).toBe(true);
    expect(mask.some((v) => v > 1)).toBe(true);
  }
  const y = loraLinear(x, w, bias, A, B, s, drop);
  expect(y.shape).toEqual([...x.shape.slice(0, -1), out]);
  const ins = [x, w, bias, A, B].map((t) => (t ? Float64Array.from(t.toFloat32Array()) : null));
  const ref = (v: (Float64Array | null)[]) => reference(v[0]!, v[1]!, v[2], v[3]!, v[4]!, s, dims, mask);
  expectClose(y.toFloat32Array(), ref(ins), 1e-5, 1e-5);

  const g = rand(y.size);
  T.backward(y, new T.Tensor(g, y.shape));
  const loss = (v: (Float64Array | null)[]) => ref(v).reduce((acc, yi, i) => acc + yi * g[i], 0);
  const eps = 1e-6;
  [x, w, bias, A, B].forEach((t, k) => {
    if (!t) return;
    if (!t.requiresGrad) {
      expect(t.grad).toBeNull();
      return;
    }
    const numeric = new Float64Array(t.size);
    for (let i = 0; i < t.size; i++) {
      const plus = ins.map((a) => a?.slice() ?? null);
      const minus = ins.map((a) => a?.slice() ?? null);
      plus[k]![i] += eps;
      minus[k]![i] -= eps;
      numeric[i] = (loss(plus) - loss(minus)) / (2 * eps);
    }
    expect(t.grad, `input ${k} has no gradient`).not.toBeNull();
    expectClose(t.grad!.toFloat32Array(), numeric, 1e-4, 1e-5);
  });
}

function suite() {
  it("matches float64 and finite differences: f32 W and bias trainable too, 3-D input", () => {
    check({
      x: tensor([2, 3, 7], true),
      w: tensor([5, 7], true),
      bias: tensor([5], true),
      A: tensor([3, 7], true),
      B: tensor([5, 3], true),
      s: 1.75,
    });
  });

  it("frozen bf16 base: no weight gradient, exact bf16 values in the product", () => {
    const w = tensor([6, 9], false, 0.5).to("bf16");
    check({ x: tensor([4, 9], true), w, bias: null, A: tensor([2, 9], true), B: tensor([6, 2], true), s: 2 });
    check({
      x: tensor([4, 9], false),
      w,
      bias: tensor([6], false).to("bf16"),
      A: tensor([2, 9], true),
      B: tensor([6, 2], true),
      s: -0.5,
    });
  });

  it("adapter input through dropout: x's gradient is the base path plus the masked adapter path", () => {
    check({
      x: tensor([3, 8], true),
      w: tensor([4, 8], false).to("bf16"),
      bias: null,
      A: tensor([2, 8], true),
      B: tensor([4, 2], true),
      s: 1.5,
      dropoutP: 0.4,
    });
  });

  it("at shapes past the small-row GEMM path", () => {
    check({
      x: tensor([4, 5, 24], true),
      w: tensor([18, 24], false).to("bf16"),
      bias: tensor([18], true),
      A: tensor([4, 24], true),
      B: tensor([18, 4], true),
      s: 0.75,
      dropoutP: 0.25,
    });
  });

  it.each([0, 0.1])("gives the same output and gradients as the unfused Linear + adapter path (dropout %s)", (p) => {
    const grads = (fused: boolean) => {
      const model = createModel(
        {
          architectures: ["LlamaForCausalLM"],
          hidden_size: 16,
          intermediate_size: 24,
          num_hidden_layers: 2,
          num_attention_heads: 4,
          num_key_value_heads: 2,
          vocab_size: 40,
          rms_norm_eps: 1e-5,
          rope_theta: 10000,
          tie_word_embeddings: false,
        },
        { seed: 3, std: 0.2, dtype: "bf16" },
      );
      const adapter = attachLora(model, { r: 4, alpha: 8, dropout: p, targetModules: "all-linear", seed: 5 });
      const rng = new T.Rng(6);
      for (const l of adapter.layers.values())
        (l.B.dataSync() as Float32Array).set(rng.normal(l.B.size).map((v) => v * 0.1));
      if (!fused) for (const l of adapter.layers.values()) l.forwardWithBase = undefined as never;
      const ids = new T.Tensor(Int32Array.from([3, 7, 1, 9, 22, 5, 30, 2]), [2, 4], "i32");
      const targets = new T.Tensor(Int32Array.from([7, 1, 9, -100, 5, 30, 2, -100]), [8], "i32");
      T.setRngSequencePosition(100);
      const loss = T.crossEntropy(T.reshape(model.forward(ids), [8, 40]), targets);
      T.backward(loss);
      return { loss: loss.item(), grads: adapter.parameters().map((p) => p.grad!.toFloat32Array()) };
    };
    const a = grads(true);
    const b = grads(false);
    expect(Math.abs(a.loss - b.loss)).toBeLessThan(1e-5);
    expect(a.grads.length).toBe(b.grads.length);
    for (const [i, g] of a.grads.entries()) expectClose(g, b.grads[i], 1e-3, 1e-6);
    expect(a.grads.some((g) => g.some((v) => v !== 0))).toBe(true);
  });
}

describe("loraLinear (js kernels)", suite);

describe("loraLinear (wasm kernels, 2 threads)", () => {
  beforeAll(async () => {
    await T.initBackend("wasm", { threads: 2 });
  });
  afterAll(() => T.disposeWasmBackend());
  suite();
});

describe("loraLinear input checks", () => {
  it("names the mismatched operand", () => {
    const x = tensor([2, 4], false);
    const w = tensor([3, 4], false);
    expect(() => loraLinear(x, w, null, tensor([2, 5], true), tensor([3, 2], true), 1)).toThrow(LoraError);
    expect(() => loraLinear(x, w, null, tensor([2, 4], true), tensor([3, 3], true), 1)).toThrow(/lora_B/);
    expect(() => loraLinear(tensor([2, 5], false), w, null, tensor([2, 4], true), tensor([3, 2], true), 1)).toThrow(
      /input features/,
    );
    expect(() => loraLinear(x, w, tensor([4], false), tensor([2, 4], true), tensor([3, 2], true), 1)).toThrow(/bias/);
    expect(() => loraLinear(x, w, null, tensor([2, 4], true), tensor([3, 2], true), Number.NaN)).toThrow(/scaling/);
    const drop = { p: 1, seed: 0, offset: 0 };
    expect(() => loraLinear(x, w, null, tensor([2, 4], true), tensor([3, 2], true), 1, drop)).toThrow(/dropout p/);
  });

  it.each([0, 0.3])("is what a LoraLayer's composed path computes (dropout %s, same mask)", (p) => {
    const A = tensor([2, 40], true);
    const B = tensor([3, 2], true);
    const layer = new LoraLayer("default", "m", A, B, 1.25, p, 7);
    const x = tensor([5, 40], false);
    const w = tensor([3, 40], false);
    T.setRngSequencePosition(42);
    const fused = layer.forwardWithBase(x, w, null).toFloat32Array();
    T.setRngSequencePosition(42);
    const composed = T.add(T.linear(x, w), layer.forward(x)).toFloat32Array();
    T.setRngSequencePosition(43);
    const otherMask = layer.forwardWithBase(x, w, null).toFloat32Array();
    expectClose(fused, composed, 1e-6, 1e-6);
    expect(fused.some((v, i) => v !== otherMask[i])).toBe(p > 0);
  });
});

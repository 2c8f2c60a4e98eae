// Merge against a PyTorch transcription of PEFT (fixtures/make_fixtures.py).
import { readFileSync } from "node:fs";
import { createModel } from "@kiln/models";
import * as T from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { attachLora, mergeAdapter } from "../src/index.js";

const fx = JSON.parse(readFileSync(new URL("./fixtures/merge-fixtures.json", import.meta.url), "utf8"));

function setup() {
  const model = createModel({
    architectures: ["LlamaForCausalLM"],
    hidden_size: fx.in,
    intermediate_size: 8,
    num_hidden_layers: 1,
    num_attention_heads: 4,
    vocab_size: 8,
  });
  const adapter = attachLora(model, { r: fx.r, alpha: fx.alpha, targetModules: ["q_proj"] });
  const module = "model.layers.0.self_attn.q_proj";
  const lin = adapter.linear(module);
  lin.weight = new T.Tensor(Float32Array.from(fx.W), [fx.out, fx.in]);
  const layer = adapter.layers.get(module)!;
  (layer.A.dataSync() as Float32Array).set(fx.A);
  (layer.B.dataSync() as Float32Array).set(fx.B);
  return { adapter, lin };
}

describe("merge vs PyTorch", () => {
  it("scaled forward matches x Wᵀ + k·s·x Aᵀ Bᵀ", () => {
    const { adapter, lin } = setup();
    adapter.setScale(fx.scale);
    const y = T.noGrad(() => lin.forward(new T.Tensor(Float32Array.from(fx.x), [3, fx.in]))).toFloat32Array();
    for (let i = 0; i < y.length; i++) expect(Math.abs(y[i] - fx.y[i])).toBeLessThan(1e-5);
  });

  it("f32 merge with s = 0.85 matches torch, and the bf16 merge is bit-exact", () => {
    const a = setup();
    mergeAdapter(a.adapter, { scale: fx.scale });
    const got = a.lin.weight.toFloat32Array();
    for (let i = 0; i < got.length; i++) expect(Math.abs(got[i] - fx.merged_f32[i])).toBeLessThan(1e-6);
    const b = setup();
    mergeAdapter(b.adapter, { scale: fx.scale, dtype: "bf16" });
    expect(b.lin.weight.dtype).toBe("bf16");
    expect(Array.from(b.lin.weight.dataSync())).toEqual(fx.merged_bf16_bits);
  });
});

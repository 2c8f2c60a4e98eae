// LoRA on the Qwen3.5 hybrid: all-linear reaches the Gated DeltaNet projections under PEFT's
// module names (model.language_model.layers.N.linear_attn.*), training moves only the adapter.
import { parseSafetensors } from "@kiln/hub-io";
import { type Model, createModel } from "@kiln/models";
import * as T from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { adapterFiles, attachLora, mergeAdapter } from "../src/index.js";

function qwen35(dtype: "f32" | "bf16"): Model {
  return createModel(
    {
      architectures: ["Qwen3_5ForConditionalGeneration"],
      model_type: "qwen3_5",
      tie_word_embeddings: true,
      text_config: {
        model_type: "qwen3_5_text",
        vocab_size: 40,
        hidden_size: 16,
        intermediate_size: 24,
        num_hidden_layers: 4,
        num_attention_heads: 2,
        num_key_value_heads: 1,
        head_dim: 8,
        linear_conv_kernel_dim: 4,
        linear_key_head_dim: 4,
        linear_value_head_dim: 4,
        linear_num_key_heads: 2,
        linear_num_value_heads: 4,
        rope_parameters: { rope_type: "default", rope_theta: 10000000, partial_rotary_factor: 0.25 },
      },
      vision_config: { depth: 1 },
    },
    { seed: 3, std: 0.2, dtype },
  );
}

const LINEAR_ATTN = ["in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj"];

describe("LoRA on Qwen3.5", () => {
  it("all-linear covers the linear-attention projections with PEFT module names", () => {
    const model = qwen35("f32");
    const a = attachLora(model, { r: 2, alpha: 4, targetModules: "all-linear", seed: 1 });
    const names = [...a.layers.keys()];
    // Layers 0–2 are Gated DeltaNet (5 projections + 3 MLP), layer 3 full attention (4 + 3).
    expect(names).toHaveLength(3 * 8 + 7);
    for (const s of LINEAR_ATTN) expect(names).toContain(`model.language_model.layers.0.linear_attn.${s}`);
    expect(names).toContain("model.language_model.layers.3.self_attn.q_proj");
    expect(names.some((n) => n.includes("lm_head"))).toBe(false);
    const files = adapterFiles(a);
    const keys = [...parseSafetensors(files.get("adapter_model.safetensors") as Uint8Array).tensors.keys()];
    expect(keys).toContain("base_model.model.model.language_model.layers.1.linear_attn.in_proj_qkv.lora_A.weight");
    expect(keys).toContain("base_model.model.model.language_model.layers.1.linear_attn.in_proj_b.lora_B.weight");
  });

  it("trains the adapter over a frozen bf16 base (loss falls; base untouched) and merges into the same logits", () => {
    const model = qwen35("bf16");
    const a = attachLora(model, { r: 4, alpha: 8, targetModules: "all-linear", seed: 2 });
    const ids = T.tensor(Int32Array.from([3, 9, 27, 1, 5, 17, 33, 8]), [1, 8], "i32");
    const targets = T.tensor(Int32Array.from([9, 27, 1, 5, 17, 33, 8, 2]), [8], "i32");
    const lossOf = () => T.crossEntropy(T.reshape(model.forward(ids, { checkpointLayers: true }), [8, 40]), targets);
    const opt = new T.AdamW(a.parameters(), { lr: 2e-2, weightDecay: 0 });
    const first = T.noGrad(lossOf).item();
    for (let step = 0; step < 8; step++) {
      opt.zeroGrad();
      T.backward(lossOf());
      opt.step();
    }
    for (const [, p] of model.namedParameters()) expect(p.grad).toBeNull();
    const last = T.noGrad(lossOf).item();
    expect(last).toBeLessThan(first - 0.1);
    const withAdapter = T.noGrad(() => model.forward(ids)).toFloat32Array();
    mergeAdapter(a);
    const merged = T.noGrad(() => model.forward(ids)).toFloat32Array();
    let worst = 0;
    for (let i = 0; i < merged.length; i++) worst = Math.max(worst, Math.abs(merged[i] - withAdapter[i]));
    expect(worst).toBeLessThan(1e-4);
  });
});

// Qwen3.5 → llama.cpp `qwen35` (convert_hf_to_gguf.py Qwen3_5TextModel): names, hyperparameters,
// value conversions and the configs llama.cpp cannot run. llama.cpp itself runs an export in
// packages/models/test/llama-cpp-qwen35.test.ts.
import { describe, expect, it } from "vitest";
import {
  GgufConvertError,
  applyQwen35Change,
  ggufHyperparameters,
  ggufPlain,
  ggufTensorName,
  hfTensorName,
  qwen35TensorChange,
} from "../src/index.js";

const TEXT = {
  architectures: ["Qwen3_5ForCausalLM"],
  model_type: "qwen3_5_text",
  vocab_size: 64,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 4,
  num_attention_heads: 2,
  num_key_value_heads: 1,
  head_dim: 16,
  linear_conv_kernel_dim: 4,
  linear_key_head_dim: 8,
  linear_value_head_dim: 8,
  linear_num_key_heads: 1,
  linear_num_value_heads: 2,
  full_attention_interval: 2,
  rope_parameters: { rope_type: "default", rope_theta: 1e7, partial_rotary_factor: 0.25 },
};

const plain = (config: Record<string, unknown>) =>
  new Map([...ggufHyperparameters("qwen35", config)].map(([k, v]) => [k, ggufPlain(v)]));

describe("Qwen3.5 → GGUF qwen35", () => {
  it("names the Gated DeltaNet tensors as llama.cpp does, both ways (also under model.language_model.)", () => {
    const pairs: [string, string][] = [
      ["model.layers.0.linear_attn.in_proj_qkv.weight", "blk.0.attn_qkv.weight"],
      ["model.layers.0.linear_attn.in_proj_z.weight", "blk.0.attn_gate.weight"],
      ["model.layers.0.linear_attn.in_proj_b.weight", "blk.0.ssm_beta.weight"],
      ["model.layers.0.linear_attn.in_proj_a.weight", "blk.0.ssm_alpha.weight"],
      ["model.layers.0.linear_attn.out_proj.weight", "blk.0.ssm_out.weight"],
      ["model.layers.0.linear_attn.conv1d.weight", "blk.0.ssm_conv1d.weight"],
      ["model.layers.0.linear_attn.norm.weight", "blk.0.ssm_norm.weight"],
      ["model.layers.0.linear_attn.dt_bias", "blk.0.ssm_dt.bias"],
      ["model.layers.0.linear_attn.A_log", "blk.0.ssm_a"],
      ["model.layers.1.post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"],
      ["model.layers.1.self_attn.q_norm.weight", "blk.1.attn_q_norm.weight"],
    ];
    for (const [hf, gguf] of pairs) {
      expect(ggufTensorName(hf, "qwen35")).toBe(gguf);
      expect(hfTensorName(gguf, "qwen35")).toBe(hf);
    }
    expect(ggufTensorName("model.language_model.layers.2.linear_attn.A_log", "qwen35")).toBe("blk.2.ssm_a");
    expect(ggufTensorName("model.language_model.embed_tokens.weight", "qwen35")).toBe("token_embd.weight");
    // The dense architectures keep ffn_norm.
    expect(ggufTensorName("model.layers.1.post_attention_layernorm.weight", "qwen3")).toBe("blk.1.ffn_norm.weight");
  });

  it("writes the ssm.* sizes, the layer interval, the partial rotary dim and MRoPE sections covering every pair", () => {
    const m = plain(TEXT);
    expect(m.get("qwen35.ssm.conv_kernel")).toBe(4);
    expect(m.get("qwen35.ssm.state_size")).toBe(8);
    expect(m.get("qwen35.ssm.group_count")).toBe(1);
    expect(m.get("qwen35.ssm.time_step_rank")).toBe(2);
    expect(m.get("qwen35.ssm.inner_size")).toBe(16);
    expect(m.get("qwen35.full_attention_interval")).toBe(2);
    expect(m.get("qwen35.rope.dimension_count")).toBe(4);
    expect(m.get("qwen35.rope.dimension_sections")).toEqual([1, 1, 0, 0]);
    // Qwen3.5's own head: 256 dims, a quarter rotating, [11, 11, 10].
    const real = plain({
      ...TEXT,
      head_dim: 256,
      rope_parameters: { ...TEXT.rope_parameters, mrope_section: [11, 11, 10] },
    });
    expect(real.get("qwen35.rope.dimension_sections")).toEqual([11, 11, 10, 0]);
    // A VLM config reads its text_config.
    const vlm = plain({ architectures: ["Qwen3_5ForConditionalGeneration"], model_type: "qwen3_5", text_config: TEXT });
    expect(vlm.get("qwen35.embedding_length")).toBe(32);
  });

  it("norms become 1 + w (not the gated output norm), A_log −exp(A_log), value heads tiled in rows and out_proj columns", () => {
    const norm = qwen35TensorChange("model.layers.0.input_layernorm.weight", TEXT);
    expect(applyQwen35Change(Float32Array.of(0, 0.5), [2], norm ?? {})).toEqual(Float32Array.of(1, 1.5));
    expect(qwen35TensorChange("model.layers.0.linear_attn.norm.weight", TEXT)).toBeUndefined();
    const a = qwen35TensorChange("model.layers.0.linear_attn.A_log", TEXT) ?? {};
    // 1 key head, 2 value heads: one group, so the tiled order is the grouped one.
    expect(applyQwen35Change(Float32Array.of(0, Math.log(2)), [2], a)).toEqual(Float32Array.of(-1, -2));
    const two = { ...TEXT, linear_num_key_heads: 2, linear_num_value_heads: 4 };
    const dt = qwen35TensorChange("model.layers.0.linear_attn.dt_bias", two) ?? {};
    expect(applyQwen35Change(Float32Array.of(0, 1, 2, 3), [4], dt)).toEqual(Float32Array.of(0, 2, 1, 3));
    const out =
      qwen35TensorChange("model.layers.0.linear_attn.out_proj.weight", {
        ...two,
        linear_value_head_dim: 1,
        linear_key_head_dim: 1,
      }) ?? {};
    expect(applyQwen35Change(Float32Array.of(0, 1, 2, 3, 4, 5, 6, 7), [2, 4], out)).toEqual(
      Float32Array.of(0, 2, 1, 3, 4, 6, 5, 7),
    );
    const conv = qwen35TensorChange("model.layers.0.linear_attn.conv1d.weight", TEXT);
    expect(conv?.shape).toEqual([32, 4]);
    expect(conv?.forceF32).toBe(true);
  });

  it("refuses what llama.cpp's qwen35 cannot run, saying why", () => {
    const refuse = (over: Record<string, unknown>, re: RegExp) => {
      expect(() => ggufHyperparameters("qwen35", { ...TEXT, ...over })).toThrow(GgufConvertError);
      expect(() => ggufHyperparameters("qwen35", { ...TEXT, ...over })).toThrow(re);
    };
    refuse({ linear_value_head_dim: 12 }, /linear_key_head_dim 8 ≠ linear_value_head_dim 12/);
    refuse({ full_attention_interval: 8 }, /no layer is full attention/);
    refuse({ full_attention_interval: 1 }, /every layer is full attention/);
    refuse(
      { layer_types: ["full_attention", "linear_attention", "full_attention", "linear_attention"] },
      /layer_types/,
    );
    refuse({ attn_output_gate: false }, /attn_output_gate/);
    refuse({ rope_parameters: { ...TEXT.rope_parameters, mrope_section: [2, 0, 0] } }, /mrope_section \[2,0,0\]/);
    refuse({ linear_num_value_heads: 3, linear_num_key_heads: 2 }, /not a multiple/);
  });
});

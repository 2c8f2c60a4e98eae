// Qwen3.5 → llama.cpp `qwen35` (convert_hf_to_gguf.py Qwen3_5TextModel): names, hyperparameters,
// value conversions and the configs llama.cpp cannot run. llama.cpp itself runs an export in
// packages/models/test/llama-cpp-qwen35.test.ts.
import { describe, expect, it } from "vitest";
import {
  GgufConvertError,
  type GgufValue,
  applyQwen35Change,
  ggufHyperparameters,
  ggufPlain,
  ggufTensorName,
  ggufValue,
  hfConfigFromGguf,
  hfTensorName,
  qwen35TensorChange,
  qwen35TensorChangeFromGguf,
  tokenizerFromGguf,
  tokenizerToGguf,
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

describe("GGUF qwen35 → Qwen3.5 (import)", () => {
  const metaOf = (config: Record<string, unknown>, extra: [string, GgufValue][] = []) => {
    const meta = new Map(ggufHyperparameters("qwen35", config));
    meta.set("general.architecture", ggufValue.string("qwen35"));
    for (const [k, v] of extra) meta.set(k, v);
    return meta;
  };

  it("reads the Gated DeltaNet sizes, layer pattern and partial rotary factor back into a Qwen3_5ForCausalLM config", () => {
    const config = hfConfigFromGguf(metaOf(TEXT), { hasOutput: true, vocabSize: 64 });
    expect(config).toMatchObject({
      architectures: ["Qwen3_5ForCausalLM"],
      model_type: "qwen3_5_text",
      hidden_size: 32,
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
      layer_types: ["linear_attention", "full_attention", "linear_attention", "full_attention"],
      tie_word_embeddings: false,
    });
    const rope = config.rope_parameters as Record<string, unknown>;
    expect(rope.partial_rotary_factor).toBe(0.25);
    expect(rope.rope_theta).toBe(1e7);
    expect(rope.mrope_section).toEqual([1, 1, 0]);
  });

  it("leaves llama.cpp's appended multi-token-prediction blocks out of the layer count", () => {
    const meta = metaOf(TEXT, [
      ["qwen35.block_count", ggufValue.u32(5)],
      ["qwen35.nextn_predict_layers", ggufValue.u32(1)],
    ]);
    const config = hfConfigFromGguf(meta, { hasOutput: true, vocabSize: 64 });
    expect(config.num_hidden_layers).toBe(4);
    expect(config.layer_types).toHaveLength(4);
    const all = metaOf(TEXT, [["qwen35.nextn_predict_layers", ggufValue.u32(4)]]);
    expect(() => hfConfigFromGguf(all, { hasOutput: true, vocabSize: 64 })).toThrow(/nextn_predict_layers/);
  });

  it("refuses MRoPE sections that leave rotary pairs without a text position, and ragged value heads", () => {
    const sparse = metaOf(TEXT, [
      ["qwen35.rope.dimension_sections", ggufValue.array("i32", Int32Array.of(0, 1, 0, 0))],
    ]);
    expect(() => hfConfigFromGguf(sparse, { hasOutput: true, vocabSize: 64 })).toThrow(GgufConvertError);
    expect(() => hfConfigFromGguf(sparse, { hasOutput: true, vocabSize: 64 })).toThrow(
      /dimension_sections" \[0,1,0,0\]/,
    );
    const ragged = metaOf(TEXT, [["qwen35.ssm.inner_size", ggufValue.u32(17)]]);
    expect(() => hfConfigFromGguf(ragged, { hasOutput: true, vocabSize: 64 })).toThrow(
      /inner_size" 17 is not a multiple/,
    );
  });

  it("undoes every export change: value heads back to grouped order, norms w, A_log, the conv kernel's shape", () => {
    const two = { ...TEXT, linear_num_key_heads: 2, linear_num_value_heads: 4 };
    let seed = 11;
    const uniform = (n: number) =>
      Float32Array.from({ length: n }, () => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed / 2 ** 31;
      });
    const d = { keyDim: 2 * 8, valueDim: 4 * 8 };
    const cases: [string, number[]][] = [
      ["model.layers.0.linear_attn.in_proj_qkv.weight", [2 * d.keyDim + d.valueDim, 32]],
      ["model.layers.0.linear_attn.in_proj_z.weight", [d.valueDim, 32]],
      ["model.layers.0.linear_attn.in_proj_a.weight", [4, 32]],
      ["model.layers.0.linear_attn.in_proj_b.weight", [4, 32]],
      ["model.layers.0.linear_attn.out_proj.weight", [32, d.valueDim]],
      ["model.layers.0.linear_attn.dt_bias", [4]],
      ["model.layers.0.linear_attn.conv1d.weight", [2 * d.keyDim + d.valueDim, 1, 4]],
      ["model.layers.0.input_layernorm.weight", [32]],
      ["model.layers.1.self_attn.q_norm.weight", [16]],
    ];
    for (const [name, hfShape] of cases) {
      const n = hfShape.reduce((a, b) => a * b, 1);
      const hf = uniform(n).map((x) => x - 0.5);
      const forward = qwen35TensorChange(name, two);
      const out = forward ?? {};
      const ggufShape = out.shape ?? hfShape;
      const gguf = applyQwen35Change(hf, ggufShape, out);
      const back = qwen35TensorChangeFromGguf(name, two);
      // Every tensor llama.cpp changes on export has its inverse on import, and only those.
      expect(back === undefined, name).toBe(forward === undefined);
      expect(back?.shape ?? ggufShape, name).toEqual(hfShape);
      const got = applyQwen35Change(gguf, ggufShape, back ?? {});
      if (name.endsWith("norm.weight")) {
        // w itself lost bits in fround(1 + w), but fround(1 + w) − 1 is exact (Sterbenz), so the
        // (1 + w) the model multiplies by comes back bit for bit.
        expect(
          got.map((x) => x + 1),
          name,
        ).toEqual(gguf);
        expect(
          got.map((x) => x + 1),
          name,
        ).toEqual(hf.map((x) => x + 1));
      } else {
        // Permutations only move values: the same bits come back.
        expect(got, name).toEqual(hf);
      }
    }
    // A permutation that is its own inverse would not tell grouped from tiled: this one is not.
    const rows = qwen35TensorChange("model.layers.0.linear_attn.in_proj_z.weight", {
      ...two,
      linear_num_value_heads: 6,
    })?.rows;
    expect(rows && Array.from(rows).some((p, i) => rows[p] !== i)).toBe(true);
    const aLog = Float32Array.of(-0.3, 0, 0.7, 1.2);
    const a = applyQwen35Change(aLog, [4], qwen35TensorChange("model.layers.0.linear_attn.A_log", two) ?? {});
    const got = applyQwen35Change(a, [4], qwen35TensorChangeFromGguf("model.layers.0.linear_attn.A_log", two) ?? {});
    for (let i = 0; i < 4; i++) expect(Math.abs(got[i] - aLog[i])).toBeLessThan(1e-6);
    expect(qwen35TensorChangeFromGguf("model.layers.0.linear_attn.norm.weight", two)).toBeUndefined();
  });

  it("refuses an A that is not negative, naming the tensor", () => {
    const back = qwen35TensorChangeFromGguf("model.layers.2.linear_attn.A_log", TEXT) ?? {};
    expect(() => applyQwen35Change(Float32Array.of(-1, 0.5), [2], back)).toThrow(
      /model\.layers\.2\.linear_attn\.A_log.*element 1 is 0\.5/,
    );
  });
});

describe("Qwen3.5's pre-tokenizer (llama.cpp `qwen35`)", () => {
  // Qwen3.5's tokenizer.json regex: Qwen2's with combining marks (\p{M}) kept in letter runs.
  const QWEN35_REGEX =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const tokens = ["a", "b", "ab", "<|im_end|>"];

  it("exports as tokenizer.ggml.pre = qwen35 with no note, and imports back to the same regex", () => {
    const tokenizer = {
      version: "1.0",
      added_tokens: [{ id: 3, content: "<|im_end|>", special: true }],
      normalizer: null,
      pre_tokenizer: {
        type: "Sequence",
        pretokenizers: [
          { type: "Split", pattern: { Regex: QWEN35_REGEX }, behavior: "Isolated", invert: false },
          { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
        ],
      },
      decoder: { type: "ByteLevel" },
      model: { type: "BPE", vocab: { a: 0, b: 1, ab: 2 }, merges: ["a b"] },
    };
    const out = tokenizerToGguf({
      tokenizer,
      tokenizerConfig: { eos_token: "<|im_end|>" },
      config: { ...TEXT, vocab_size: 4 },
      arch: "qwen35",
    });
    expect(ggufPlain(out.metadata.get("tokenizer.ggml.pre") as GgufValue)).toBe("qwen35");
    expect(out.notes.join(" ")).not.toMatch(/pre-tokenizer/);
    const back = tokenizerFromGguf(
      new Map<string, GgufValue>([
        ["tokenizer.ggml.model", ggufValue.string("gpt2")],
        ["tokenizer.ggml.pre", ggufValue.string("qwen35")],
        ["tokenizer.ggml.tokens", ggufValue.array("string", tokens)],
        ["tokenizer.ggml.token_type", ggufValue.array("i32", Int32Array.of(1, 1, 1, 3))],
        ["tokenizer.ggml.merges", ggufValue.array("string", ["a b"])],
      ]),
    );
    expect(JSON.stringify(back.tokenizer.pre_tokenizer)).toContain(JSON.stringify(QWEN35_REGEX));
    expect(back.notes).toEqual([]);
  });

  it("a pre-tokenizer kiln does not know imports with gpt-2's rules and a note saying so", () => {
    const back = tokenizerFromGguf(
      new Map<string, GgufValue>([
        ["tokenizer.ggml.model", ggufValue.string("gpt2")],
        ["tokenizer.ggml.pre", ggufValue.string("deepseek-llm")],
        ["tokenizer.ggml.tokens", ggufValue.array("string", tokens)],
        ["tokenizer.ggml.merges", ggufValue.array("string", ["a b"])],
      ]),
    );
    expect(back.notes.join(" ")).toMatch(/tokenizer\.ggml\.pre "deepseek-llm" is not one kiln knows/);
  });
});

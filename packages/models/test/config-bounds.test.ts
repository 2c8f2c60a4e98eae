// Configs and checkpoints that should be refused at load, refused by name (the misuse probe loaded
// max_position_embeddings 0 and 1e12, an unknown model_type and NaN base weights without a word).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseSafetensors, serializeSafetensors } from "@kiln/hub-io";
import { describe, expect, it } from "vitest";
import {
  CONFIG_LIMITS,
  ModelConfigError,
  ModelsError,
  UnsupportedArchitectureError,
  WeightLoadError,
  loadModel,
  parseDecoderConfig,
} from "../src/index.js";
import { tinyDir } from "./helpers.js";

const llama = {
  architectures: ["LlamaForCausalLM"],
  model_type: "llama",
  vocab_size: 32,
  hidden_size: 8,
  intermediate_size: 16,
  num_hidden_layers: 1,
  num_attention_heads: 2,
  num_key_value_heads: 2,
  max_position_embeddings: 64,
  rms_norm_eps: 1e-5,
  rope_theta: 10000,
  eos_token_id: 2,
};

function refusal(config: Record<string, unknown>): ModelsError {
  try {
    parseDecoderConfig(config);
  } catch (e) {
    if (e instanceof ModelsError) return e;
    throw e;
  }
  throw new Error(`accepted ${JSON.stringify(config)}`);
}

describe("config.json sizes are positive and bounded", () => {
  const cases: [string, unknown][] = [
    ["max_position_embeddings", 0],
    ["max_position_embeddings", 1e12],
    ["max_position_embeddings", 64.5],
    ["max_position_embeddings", -64],
    ["hidden_size", 0],
    ["hidden_size", 1e9],
    ["intermediate_size", 2 ** 21],
    ["vocab_size", 0],
    ["vocab_size", 2 ** 25],
    ["num_hidden_layers", 100_000],
    ["num_attention_heads", 0],
    ["num_key_value_heads", 4096],
    ["head_dim", 1e6],
  ];
  for (const [field, value] of cases) {
    it(`${field} = ${value}: ModelConfigError naming the field`, () => {
      const e = refusal({ ...llama, [field]: value });
      expect(e).toBeInstanceOf(ModelConfigError);
      expect(e.message).toContain(`"${field}"`);
    });
  }

  it("the limits are above every released checkpoint and the tiny fixtures load", () => {
    expect(CONFIG_LIMITS.vocab_size).toBeGreaterThan(262_144); // Gemma 3
    expect(CONFIG_LIMITS.max_position_embeddings).toBeGreaterThan(10_485_760); // Llama 4 Scout
    expect(parseDecoderConfig({ ...llama, max_position_embeddings: 10_485_760 }).maxPositionEmbeddings).toBe(
      10_485_760,
    );
    expect(parseDecoderConfig({ ...llama, max_position_embeddings: undefined }).maxPositionEmbeddings).toBe(2048);
  });

  it("heads must divide: hidden_size by num_attention_heads, heads by key/value heads; head dim even", () => {
    expect(refusal({ ...llama, hidden_size: 10, num_attention_heads: 4, num_key_value_heads: 4 }).message).toMatch(
      /"hidden_size" 10 is not a multiple of "num_attention_heads" 4/,
    );
    expect(refusal({ ...llama, num_attention_heads: 4, num_key_value_heads: 3 }).message).toMatch(
      /num_key_value_heads 3/,
    );
    expect(refusal({ ...llama, head_dim: 3 }).message).toMatch(/even/);
  });

  it("bos/eos ids must be tokens the vocabulary has", () => {
    expect(refusal({ ...llama, eos_token_id: 32 }).message).toMatch(
      /"eos_token_id" must be a token id in \[0, vocab_size 32\)/,
    );
    expect(refusal({ ...llama, eos_token_id: [1, -1] }).message).toContain('"eos_token_id"');
    expect(refusal({ ...llama, bos_token_id: "1" }).message).toContain('"bos_token_id"');
    expect(parseDecoderConfig({ ...llama, eos_token_id: [1, 2] }).eosTokenIds).toEqual([1, 2]);
  });
});

describe("model_type", () => {
  it("an unknown model_type is refused by name, even beside a supported architecture", () => {
    const e = refusal({ ...llama, model_type: "gpt_neox" });
    expect(e).toBeInstanceOf(UnsupportedArchitectureError);
    expect(e.message).toContain('"model_type" "gpt_neox" is not supported');
  });
  it("a model_type that contradicts the architecture is refused", () => {
    expect(refusal({ ...llama, model_type: "qwen2" }).message).toMatch(
      /"model_type" "qwen2" does not match architecture "LlamaForCausalLM"/,
    );
  });
  it("absent, or matching, is fine", () => {
    expect(parseDecoderConfig({ ...llama, model_type: undefined }).architecture).toBe("LlamaForCausalLM");
    expect(
      parseDecoderConfig({ ...llama, architectures: undefined, model_type: "qwen3", head_dim: 4 }).architecture,
    ).toBe("Qwen3ForCausalLM");
  });
});

describe("non-finite weights are refused at load, naming the tensor", () => {
  const dir = tinyDir("llama");
  const config = readFileSync(join(dir, "config.json"), "utf8");
  const { tensors } = parseSafetensors(new Uint8Array(readFileSync(join(dir, "model.safetensors"))));
  const name = "model.layers.1.mlp.down_proj.weight";

  function withValue(value: number, dtype: "F32" | "BF16"): Map<string, Uint8Array | string> {
    const out = new Map<string, { dtype: "F32" | "BF16"; shape: number[]; data: Uint8Array }>();
    for (const [k, t] of tensors) {
      const f = new Float32Array(t.data.slice().buffer);
      if (k === name) f[7] = value;
      if (dtype === "F32") out.set(k, { dtype, shape: [...t.shape], data: new Uint8Array(f.buffer) });
      else {
        const bits = Uint16Array.from(new Uint32Array(f.buffer), (u) => u >>> 16);
        out.set(k, { dtype, shape: [...t.shape], data: new Uint8Array(bits.buffer) });
      }
    }
    return new Map<string, Uint8Array | string>([
      ["config.json", config],
      ["model.safetensors", serializeSafetensors(out)],
    ]);
  }

  for (const [value, dtype, storage] of [
    [Number.NaN, "F32", "f32"],
    [Number.POSITIVE_INFINITY, "F32", "f32"],
    [Number.NaN, "BF16", "bf16"],
    [Number.NEGATIVE_INFINITY, "BF16", "bf16"],
    [Number.NaN, "BF16", "f32"],
  ] as const) {
    it(`${value} in a ${dtype} checkpoint loaded as ${storage}`, async () => {
      const err = await loadModel(withValue(value, dtype), { dtype: storage }).catch((e) => e);
      expect(err).toBeInstanceOf(WeightLoadError);
      expect((err as Error).message).toContain(`tensor "${name}" holds a non-finite value (${value}) at index 7`);
    });
  }

  it("the same checkpoint with finite values loads", async () => {
    const model = await loadModel(withValue(0.5, "F32"));
    const weight = new Map(model.namedParameters()).get(name);
    expect(weight?.dataSync()[7]).toBe(0.5);
  });
});

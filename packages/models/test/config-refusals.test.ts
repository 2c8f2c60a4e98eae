// config.json and tokenizer.json values that would give silent garbage are refused by name.
import { describe, expect, it } from "vitest";
import { ModelConfigError, parseDecoderConfig, Tokenizer, TokenizerError } from "../src/index.js";

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
};

describe("config.json", () => {
  it("accepts a valid config", () => {
    expect(parseDecoderConfig(llama).rmsNormEps).toBe(1e-5);
  });
  it("refuses rms_norm_eps <= 0 and rope_theta <= 0, naming the field", () => {
    for (const [field, value] of [
      ["rms_norm_eps", -1],
      ["rms_norm_eps", 0],
      ["rope_theta", 0],
      ["rope_theta", -10000],
    ] as const) {
      expect(() => parseDecoderConfig({ ...llama, [field]: value })).toThrow(ModelConfigError);
      expect(() => parseDecoderConfig({ ...llama, [field]: value })).toThrow(new RegExp(`"${field}" must be positive`));
    }
  });
});

describe("tokenizer.json", () => {
  const wordLevel = (vocab: Record<string, unknown>, added: unknown[] = []) => ({
    version: "1.0",
    added_tokens: added,
    normalizer: null,
    pre_tokenizer: { type: "Whitespace" },
    post_processor: null,
    decoder: null,
    model: { type: "WordLevel", vocab, unk_token: "<unk>" },
  });
  it("accepts integer ids", () => {
    const t = new Tokenizer(wordLevel({ "<unk>": 0, hello: 1, world: 2 }));
    expect(t.encode("hello world")).toEqual([1, 2]);
  });
  it("refuses ids stored as strings, in the vocabulary and in added_tokens", () => {
    expect(() => new Tokenizer(wordLevel({ "<unk>": 0, hello: "1" }))).toThrow(TokenizerError);
    expect(() => new Tokenizer(wordLevel({ "<unk>": 0, hello: "1" }))).toThrow(/model\.vocab\["hello"\]/);
    expect(() => new Tokenizer(wordLevel({ "<unk>": 0 }, [{ id: "3", content: "<s>", special: true }]))).toThrow(
      /added_tokens entry "<s>"/,
    );
  });
});

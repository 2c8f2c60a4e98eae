// Tiny defaults for the recipes: @kiln/models' character-level ChatML tokenizer and tool template, and
// a small Qwen3 config. With these, a recipe runs end to end on a random model in seconds; real runs
// pass their own model, tokenizer and template.
import { CHATML_SPECIAL_TOKENS } from "@kiln/rollout";
import {
  type ChatTemplate,
  type Model,
  type Tokenizer,
  charTokenizer,
  chatmlTemplate,
  createModel,
} from "@kiln/models";

/** HF config.json dict of a tiny Qwen3 (2 layers, d = 32) for `vocabSize` tokens. */
export function tinyQwen3Config(vocabSize: number, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    architectures: ["Qwen3ForCausalLM"],
    model_type: "qwen3",
    hidden_size: 32,
    intermediate_size: 64,
    num_hidden_layers: 2,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    head_dim: 8,
    vocab_size: vocabSize,
    rms_norm_eps: 1e-6,
    rope_theta: 10000,
    max_position_embeddings: 4096,
    tie_word_embeddings: true,
    ...overrides,
  };
}

export interface TinyChat {
  model: Model;
  tokenizer: Tokenizer;
  /** Named as `LocalPolicy`'s option, so `new LocalPolicy(tinyChat())` uses it. */
  chatTemplate: ChatTemplate;
  /** @deprecated the same object as `chatTemplate`. */
  template: ChatTemplate;
}

/** A random tiny Qwen3 with the character tokenizer and the ChatML tool template. */
export function tinyChat(options: { seed?: number; std?: number; config?: Record<string, unknown> } = {}): TinyChat {
  const tokenizer = charTokenizer();
  const vocab = CHATML_SPECIAL_TOKENS.length + 1 + 95;
  const model = createModel(tinyQwen3Config(vocab, options.config), {
    seed: options.seed ?? 0,
    std: options.std ?? 0.1,
  });
  const chatTemplate = chatmlTemplate();
  return { model, tokenizer, chatTemplate, template: chatTemplate };
}

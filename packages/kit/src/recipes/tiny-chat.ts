// Tiny defaults for the recipes: a character-level tokenizer (printable ASCII + newline and three
// ChatML special tokens, as an HF tokenizer.json that @huggingface/tokenizers loads), a ChatML
// template that renders Hermes tool calls, and a small Qwen3 config. With these, a recipe runs end
// to end on a random model in seconds; real runs pass their own model, tokenizer and template.
import { ChatTemplate, type Model, Tokenizer, createModel } from "@kiln/models";

export const CHATML_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;

/**
 * ChatML with Hermes `<tool_call>` blocks (the format @kiln/rollout's parser reads back). Tool
 * declarations are not rendered: the tiny models cannot use them, and real chat models bring
 * their own template.
 */
export const CHATML_TOOL_TEMPLATE =
  "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}" +
  "{% if m.tool_calls %}{% for tc in m.tool_calls %}<tool_call>\n" +
  '{"name": "{{ tc.function.name }}", "arguments": {{ tc.function.arguments }}}\n</tool_call>' +
  "{% endfor %}{% endif %}<|im_end|>\n{% endfor %}" +
  "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/**
 * A BPE tokenizer.json with the ChatML specials as added tokens (ids first) and a Fuse decoder (decode
 * concatenates the pieces; the default joins tokens with spaces), loaded as a ChatML chat tokenizer.
 */
export function chatmlBpeTokenizer(
  vocab: Record<string, number>,
  merges: [string, string][],
  preTokenizer: Record<string, unknown> | null = null,
): Tokenizer {
  const json = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: CHATML_SPECIAL_TOKENS.map((content, i) => ({
      id: i,
      content,
      single_word: false,
      lstrip: false,
      rstrip: false,
      normalized: false,
      special: true,
    })),
    normalizer: null,
    pre_tokenizer: preTokenizer,
    post_processor: null,
    decoder: { type: "Fuse" },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
  return new Tokenizer(json, { eos_token: "<|im_end|>", pad_token: "<|endoftext|>" });
}

/** A character-level tokenizer: one token per printable ASCII character or newline. */
export function charTokenizer(): Tokenizer {
  const vocab: Record<string, number> = {};
  CHATML_SPECIAL_TOKENS.forEach((s, i) => {
    vocab[s] = i;
  });
  let id = CHATML_SPECIAL_TOKENS.length;
  vocab["\n"] = id++;
  for (let c = 32; c < 127; c++) vocab[String.fromCharCode(c)] = id++;
  return chatmlBpeTokenizer(vocab, []);
}

export function chatmlTemplate(): ChatTemplate {
  return new ChatTemplate(CHATML_TOOL_TEMPLATE, { eos_token: "<|im_end|>", pad_token: "<|endoftext|>" });
}

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

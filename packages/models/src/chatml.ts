// ChatML for the small models kiln builds itself (docs/NUMERICS.md §6.1): a Jinja template in the
// ChatTemplate format that renders Hermes tool calls, and HF tokenizer.json builders whose added tokens
// are the ChatML specials of @kiln/rollout (ids first). Real chat models bring their own template and
// tokenizer files.
import { CHATML_SPECIAL_TOKENS } from "@kiln/rollout";
import { ChatTemplate } from "./chat-template.js";
import { Tokenizer } from "./tokenizer.js";

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

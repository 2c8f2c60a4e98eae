import { CHATML_SPECIAL_TOKENS, parseToolCalls } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { charTokenizer, chatmlTemplate } from "../src/index.js";

describe("ChatML for kiln's own small models", () => {
  it("the character tokenizer gives the ChatML specials ids 0–2, then newline and printable ASCII", () => {
    const tok = charTokenizer();
    expect(CHATML_SPECIAL_TOKENS.map((s) => tok.encode(s))).toEqual([[0], [1], [2]]);
    expect(tok.encode("\n A~")).toEqual([3, 4, 37, 98]);
    expect(tok.decode(tok.encode("<|im_start|>user\nhi<|im_end|>"))).toBe("<|im_start|>user\nhi<|im_end|>");
    expect(tok.eosTokenId).toBe(2);
  });

  it("renders Hermes tool calls that the rollout parser reads back", () => {
    const text = chatmlTemplate().render(
      [
        { role: "user", content: "guess" },
        {
          role: "assistant",
          content: "",
          tool_calls: [{ id: "c0", type: "function", function: { name: "guess", arguments: '{"n": 5}' } }],
        },
      ],
      { addGenerationPrompt: true },
    );
    expect(text).toBe(
      '<|im_start|>user\nguess<|im_end|>\n<|im_start|>assistant\n<tool_call>\n{"name": "guess", "arguments": {"n": 5}}\n</tool_call><|im_end|>\n<|im_start|>assistant\n',
    );
    const reply = text.split("<|im_start|>assistant\n")[1].replace("<|im_end|>\n", "");
    expect(parseToolCalls(reply).calls.map((c) => [c.name, c.arguments])).toEqual([["guess", { n: 5 }]]);
  });
});

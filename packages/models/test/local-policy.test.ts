import type { ToolSchema } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { ChatTemplate, LocalPolicy, createModel, toGeneration } from "../src/index.js";
import { qwen3Tokenizer } from "./qwen3-tokenizer.js";

const tools: ToolSchema[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Weather in a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

// A random Qwen3-shaped model over the real Qwen3 vocabulary (151936 embedding rows).
function tinyQwen3() {
  return createModel(
    {
      architectures: ["Qwen3ForCausalLM"],
      model_type: "qwen3",
      vocab_size: 151936,
      hidden_size: 16,
      intermediate_size: 16,
      num_hidden_layers: 1,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      head_dim: 8,
      rope_theta: 1000000,
      rms_norm_eps: 1e-6,
      tie_word_embeddings: true,
      eos_token_id: 151645,
    },
    { seed: 3, std: 0.5 },
  );
}

describe("LocalPolicy", () => {
  const tokenizer = qwen3Tokenizer();
  const policy = new LocalPolicy({ model: tinyQwen3(), tokenizer, id: "tiny-qwen3" });
  const messages = [
    { role: "system" as const, content: "You are terse." },
    { role: "user" as const, content: "Weather in Paris?" },
  ];

  it("generates from the chat-template prompt and scores its own tokens identically", async () => {
    const gen = await policy.generate(messages, tools, {
      maxTokens: 5,
      temperature: 1,
      seed: 11,
      logprobs: true,
      topLogprobs: 2,
      enableThinking: false,
    });
    const prompt = ChatTemplate.fromTokenizer(tokenizer).render(messages, {
      tools,
      addGenerationPrompt: true,
      enableThinking: false,
    });
    expect(prompt.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
    expect(gen.promptTokenIds).toEqual(tokenizer.encode(prompt));
    const ids = gen.completionTokenIds ?? [];
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.length).toBeLessThanOrEqual(5);
    expect(gen.logprobs?.map((l) => l.tokenId)).toEqual(ids);
    expect(gen.logprobs?.[0].top).toHaveLength(2);
    // score() has no params: it renders the prompt with the policy's defaults, here thinking off like the generation.
    const scorer = new LocalPolicy({ model: policy.model, tokenizer, defaults: { enableThinking: false } });
    const direct = await scorer.score(messages, ids, tools);
    expect(direct.tokenIds).toEqual(ids);
    for (const [i, lp] of direct.logprobs.entries()) expect(lp).toBeCloseTo(gen.logprobs?.[i].logprob ?? Number.NaN, 4);
    // Deterministic per seed.
    const again = await policy.generate(messages, tools, {
      maxTokens: 5,
      temperature: 1,
      seed: 11,
      enableThinking: false,
    });
    expect(again.completionTokenIds).toEqual(ids);
  });

  it("parses Hermes tool calls and reasoning out of the reply", () => {
    const text =
      '<think>\nNeed the tool.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>';
    const ids = tokenizer.encode(text);
    const gen = toGeneration(
      {
        promptIds: [1],
        tokenIds: [...ids, 151645],
        text,
        logprobs: [...ids, 0].map(() => -0.5),
        finishReason: "stop",
        stoppedBy: 151645,
      },
      tokenizer,
      { tools, logprobs: true },
    );
    expect(gen.finishReason).toBe("tool_calls");
    expect(gen.message.reasoning_content).toBe("Need the tool.");
    expect(gen.message.tool_calls?.map((c) => [c.function.name, JSON.parse(c.function.arguments)])).toEqual([
      ["get_weather", { city: "Paris" }],
    ]);
    expect(gen.logprobs?.at(-1)?.token).toBe("<|im_end|>");
  });
});

import type { Message } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  ChatTemplate,
  ChatTemplateError,
  GenerationError,
  renderForTraining,
  truncatePromptCompletion,
  truncateTokens,
} from "../src/index.js";
import { qwen3Tokenizer } from "./qwen3-tokenizer.js";

describe("truncation", () => {
  it("keeps the start (right) or the end (left)", () => {
    expect(truncateTokens([1, 2, 3, 4, 5], 3)).toEqual([1, 2, 3]);
    expect(truncateTokens([1, 2, 3, 4, 5], 3, "left")).toEqual([3, 4, 5]);
    expect(truncateTokens([1, 2], 3, "left")).toEqual([1, 2]);
    expect(() => truncateTokens([1], 0)).toThrow(GenerationError);
    expect(() => truncateTokens([1], 2, "middle" as never)).toThrow(/side must be "left" or "right"/);
  });

  it("prompt/completion pairs: part caps, then the prompt gives way (to one token), then the completion", () => {
    const p = [1, 2, 3, 4, 5, 6];
    const c = [7, 8, 9, 10];
    expect(truncatePromptCompletion(p, c, { maxPromptLength: 4, maxCompletionLength: 3 })).toEqual({
      promptIds: [3, 4, 5, 6],
      completionIds: [7, 8, 9],
      truncated: true,
    });
    expect(truncatePromptCompletion(p, c, { maxLength: 7 }).promptIds).toEqual([4, 5, 6]);
    expect(truncatePromptCompletion(p, c, { maxLength: 3 })).toEqual({
      promptIds: [6],
      completionIds: [7, 8],
      truncated: true,
    });
    expect(truncatePromptCompletion(p, c, { maxLength: 3, promptSide: "right", completionSide: "left" })).toEqual({
      promptIds: [1],
      completionIds: [9, 10],
      truncated: true,
    });
    expect(truncatePromptCompletion(p, c, { maxLength: 20 })).toEqual({
      promptIds: p,
      completionIds: c,
      truncated: false,
    });
    expect(() => truncatePromptCompletion(p, c, { maxLength: 0 })).toThrow(/maxLength must be a positive integer/);
  });

  it("renderForTraining cuts ids and assistant mask together", () => {
    const tok = qwen3Tokenizer();
    const template = ChatTemplate.fromTokenizer(tok);
    const messages: Message[] = [
      { role: "user", content: "Tell me a long story about a kiln." },
      { role: "assistant", content: "Once there was a kiln that fired pots all day and all night." },
    ];
    const full = renderForTraining(tok, template, messages);
    for (const side of ["right", "left"] as const) {
      const cut = renderForTraining(tok, template, messages, { maxLength: 12, truncationSide: side });
      expect(cut.ids).toHaveLength(12);
      expect(cut.truncatedTokens).toBe(full.ids.length - 12);
      const from = side === "right" ? 0 : full.ids.length - 12;
      expect(cut.ids).toEqual(full.ids.slice(from, from + 12));
      expect([...cut.assistantMask]).toEqual([...full.assistantMask.slice(from, from + 12)]);
    }
    expect(renderForTraining(tok, template, messages, { maxLength: 10_000 }).truncatedTokens).toBe(0);
    expect(() => renderForTraining(tok, template, messages, { maxLength: 0 })).toThrow(ChatTemplateError);
  });
});

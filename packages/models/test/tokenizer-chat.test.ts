import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Message, ToolSchema } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { ChatTemplate, ChatTemplateError, renderForTraining } from "../src/index.js";
import { FIXTURES } from "./helpers.js";
import { qwen3Tokenizer } from "./qwen3-tokenizer.js";

interface IdCase {
  text: string;
  ids: number[];
  source: string;
}
interface RenderCase {
  name: string;
  messages: Message[];
  tools?: ToolSchema[];
  add_generation_prompt: boolean;
  enable_thinking?: boolean;
  expected: string;
  assistant_spans?: string[];
  assistant_spans_no_thinking?: string[];
}

const idCases = (JSON.parse(readFileSync(join(FIXTURES, "qwen3", "tokenizer-ids.json"), "utf8")) as { cases: IdCase[] })
  .cases;
const renderCases = (
  JSON.parse(readFileSync(join(FIXTURES, "qwen3", "chat-renders.json"), "utf8")) as { cases: RenderCase[] }
).cases;

describe("Qwen3 tokenizer (real tokenizer.json)", () => {
  const tok = qwen3Tokenizer();
  for (const c of idCases) {
    it(`encodes like transformers: ${JSON.stringify(c.text.slice(0, 30))}`, () => {
      expect(tok.encode(c.text)).toEqual(c.ids);
      expect(tok.decode(c.ids)).toBe(c.text);
    });
  }
  it("knows its special tokens", () => {
    expect(tok.eosToken).toBe("<|im_end|>");
    expect(tok.eosTokenId).toBe(151645);
    expect(tok.padTokenId).toBe(151643);
    expect(tok.bosTokenId).toBeNull();
    // think/tool tokens are added but not special: they survive skip_special_tokens.
    expect(tok.decode([151667, 9707, 151668, 151645], { skipSpecialTokens: true })).toBe("<think>Hello</think>");
  });
});

describe("Qwen3 chat template (fixtures from docs/NUMERICS.md §6)", () => {
  const tok = qwen3Tokenizer();
  const template = ChatTemplate.fromTokenizer(tok);
  for (const c of renderCases) {
    it(`renders: ${c.name}`, () => {
      const out = template.render(c.messages, {
        tools: c.tools,
        addGenerationPrompt: c.add_generation_prompt,
        enableThinking: c.enable_thinking,
      });
      expect(out).toBe(c.expected);
    });
  }

  for (const c of renderCases.filter((r) => r.assistant_spans)) {
    it(`assistant mask is exact: ${c.name}`, () => {
      const r = renderForTraining(tok, template, c.messages, { tools: c.tools });
      expect(r.text).toBe(c.expected);
      expect(r.ids).toEqual(tok.encode(c.expected));
      // Contiguous runs of masked tokens decode to exactly the assistant turns.
      const runs: string[] = [];
      let cur: number[] = [];
      r.ids.forEach((id, i) => {
        if (r.assistantMask[i]) cur.push(id);
        else if (cur.length) {
          runs.push(tok.decode(cur));
          cur = [];
        }
      });
      if (cur.length) runs.push(tok.decode(cur));
      expect(runs).toEqual(c.assistant_spans);
      // Every masked token lies inside an assistant turn; the rest is prompt.
      const prompt = r.ids.filter((_, i) => !r.assistantMask[i]);
      expect(tok.decode(prompt)).toBe(stripSpans(c.expected, c.assistant_spans ?? []));
    });
  }

  it("assistant mask with enable_thinking false leaves the prefilled think block to the prompt", () => {
    const c = renderCases.find((r) => r.assistant_spans_no_thinking);
    if (!c) throw new Error("fixture missing");
    const r = renderForTraining(tok, template, c.messages, { tools: c.tools, enableThinking: false });
    expect(r.spans.map(([s, e]) => r.text.slice(s, e))).toEqual(c.assistant_spans_no_thinking);
  });

  it("rejects a template without a generation prompt", () => {
    const t = new ChatTemplate("{% for m in messages %}{{ m.content }}{% endfor %}");
    const msgs: Message[] = [
      { role: "user", content: "a" },
      { role: "assistant", content: "b" },
    ];
    expect(() => renderForTraining(tok, t, msgs)).toThrow(ChatTemplateError);
  });
});

function stripSpans(text: string, spans: string[]): string {
  let out = text;
  for (const s of spans) out = out.replace(s, "");
  return out;
}

// The Qwen3.5 chat templates (TRL's verbatim hub copies) rendered by kiln against renders made
// in transformers' Jinja environment (fixtures/qwen3_5/render_templates.py).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { type Message, type ToolSchema, assistantMessageFromText } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { ChatTemplate, ChatTemplateError, Tokenizer, loadTokenizer, renderForTraining } from "../src/index.js";
import { FIXTURES } from "./helpers.js";
import { qwen3Tokenizer } from "./qwen3-tokenizer.js";

interface Case {
  name: string;
  messages: Message[];
  tools?: ToolSchema[];
  add_generation_prompt: boolean;
  enable_thinking?: boolean;
}

const DIR = join(FIXTURES, "qwen3_5");
const fixture = JSON.parse(readFileSync(join(DIR, "chat-renders.json"), "utf8")) as {
  cases: Case[];
  templates: Record<string, string[]>;
};
const source = (name: string) => readFileSync(join(DIR, "templates", `${name}.jinja`), "utf8");

describe("Qwen3.5 chat templates", () => {
  for (const name of ["qwen3_5_think", "qwen3_5_nothink"]) {
    const template = new ChatTemplate(source(name));
    fixture.cases.forEach((c, i) => {
      it(`${name}: ${c.name}`, () => {
        const out = template.render(c.messages, {
          tools: c.tools,
          addGenerationPrompt: c.add_generation_prompt,
          enableThinking: c.enable_thinking,
        });
        expect(out).toBe(fixture.templates[name][i]);
      });
    });
  }

  it("the two variants differ only in the default generation prompt", () => {
    const [think, nothink] = ["qwen3_5_think", "qwen3_5_nothink"].map((n) => new ChatTemplate(source(n)));
    const hi: Message[] = [{ role: "user", content: "Hi" }];
    expect(think.render(hi, { addGenerationPrompt: true }).endsWith("<|im_start|>assistant\n<think>\n")).toBe(true);
    expect(nothink.render(hi, { addGenerationPrompt: true }).endsWith("<think>\n\n</think>\n\n")).toBe(true);
  });

  it("a rendered XML tool call parses back into the same calls (rollout's parser)", () => {
    const c = fixture.cases.find((k) => k.messages.some((m) => (m.tool_calls?.length ?? 0) > 1)) as Case;
    const turn = c.messages.find((m) => (m.tool_calls?.length ?? 0) > 1) as Message;
    const text = fixture.templates.qwen3_5_nothink[fixture.cases.indexOf(c)];
    const start = text.indexOf("Let me check.");
    const reply = text.slice(start, text.indexOf("<|im_end|>", start));
    const { message } = assistantMessageFromText(reply, { tools: c.tools });
    expect(message.tool_calls?.map((t) => [t.function.name, JSON.parse(t.function.arguments)])).toEqual(
      turn.tool_calls?.map((t) => [t.function.name, JSON.parse(t.function.arguments)]),
    );
  });

  it("names a tool call whose arguments are not JSON", () => {
    const template = new ChatTemplate(source("qwen3_5_nothink"));
    const bad: Message[] = [
      { role: "user", content: "x" },
      {
        role: "assistant",
        content: "",
        tool_calls: [{ id: "1", type: "function", function: { name: "f", arguments: "{oops" } }],
      },
    ];
    expect(() => template.render(bad)).toThrow(ChatTemplateError);
    expect(() => template.render(bad)).toThrow(/tool call f: arguments "\{oops" are not JSON/);
  });

  it("loads chat_template.jinja from a model directory and masks assistant turns (nothink prefill is prompt)", async () => {
    // A directory laid out like Qwen/Qwen3.5-2B's tokenizer files. Qwen3.5's own 248k tokenizer.json
    // is not available offline; Qwen3's shares the ChatML special tokens the mask relies on.
    const q3 = qwen3Tokenizer();
    const files = new Map<string, string>([
      ["tokenizer.json", JSON.stringify(q3.tokenizerJson)],
      ["tokenizer_config.json", JSON.stringify({ ...q3.tokenizerConfig, chat_template: undefined })],
      ["chat_template.jinja", source("qwen3_5_nothink")],
    ]);
    const tok = await loadTokenizer(files);
    expect(tok).toBeInstanceOf(Tokenizer);
    const template = ChatTemplate.fromTokenizer(tok);
    expect(template.source).toBe(source("qwen3_5_nothink"));
    const messages: Message[] = [
      { role: "user", content: "2+2?" },
      { role: "assistant", content: "4" },
    ];
    const r = renderForTraining(tok, template, messages);
    expect(r.spans.map(([s, e]) => r.text.slice(s, e))).toEqual(["4<|im_end|>"]);
  });
});

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  assistantMessageFromText,
  formatToolCall,
  formatToolCalls,
  parseOpenAIToolCalls,
  parseToolCalls,
  type ToolSchema,
} from "../src/index.js";

interface Case {
  name: string;
  text: string;
  kinds: string[];
  calls: [string, Record<string, unknown>][];
  content?: string | null;
  reasoning?: string;
}
const corpus = JSON.parse(readFileSync(new URL("./fixtures/tool-call-corpus.json", import.meta.url), "utf8")) as {
  tools: ToolSchema[];
  cases: Case[];
};

describe("parseToolCalls on the malformed-call corpus", () => {
  it.each(corpus.cases.map((c) => [c.name, c] as const))("%s", (_name, c) => {
    const parsed = parseToolCalls(c.text, { tools: corpus.tools });
    expect(parsed.issues.map((i) => i.kind)).toEqual(c.kinds);
    expect(parsed.calls.map((k) => [k.name, k.arguments])).toEqual(c.calls);
    if ("content" in c) expect(parsed.content).toBe(c.content);
    if (c.reasoning !== undefined) expect(parsed.reasoning).toBe(c.reasoning);
    for (const issue of parsed.issues) expect(issue.message.length).toBeGreaterThan(10);
  });

  it("covers every error kind", () => {
    const kinds = new Set(corpus.cases.flatMap((c) => c.kinds));
    expect([...kinds].sort()).toEqual(
      ["bad_arguments", "bad_json", "missing_name", "schema_violation", "unclosed_tag", "unknown_tool"].sort(),
    );
  });
});

describe("tool-call ids and normalisation", () => {
  it("gives deterministic ids that depend on the id seed and position", () => {
    const text = formatToolCalls(
      [
        { name: "guess", arguments: { n: 1 } },
        { name: "guess", arguments: { n: 1 } },
      ],
      "hermes",
    );
    const a = parseToolCalls(text, { idSeed: "conv-1" });
    const b = parseToolCalls(text, { idSeed: "conv-1" });
    const c = parseToolCalls(text, { idSeed: "conv-2" });
    expect(a.calls.map((x) => x.id)).toEqual(b.calls.map((x) => x.id));
    expect(a.calls[0].id).not.toBe(a.calls[1].id);
    expect(a.calls[0].id).not.toBe(c.calls[0].id);
    expect(a.calls[0].id).toMatch(/^call_[0-9a-f]{16}$/);
  });

  it("round-trips both formats through formatToolCalls", () => {
    const calls = [{ name: "note", arguments: { text: 'a "quoted" line\nand more', tags: ["x", "ü"] } }];
    for (const format of ["hermes", "qwen3.5"] as const) {
      const parsed = parseToolCalls(formatToolCalls(calls, format), { tools: corpus.tools });
      expect(parsed.issues).toEqual([]);
      expect(parsed.calls.map((c) => ({ name: c.name, arguments: c.arguments }))).toEqual(calls);
    }
  });

  it("formats one call with object arguments through json.dumps and string arguments as given", () => {
    expect(formatToolCall({ name: "f", arguments: { a: 1e-5, b: "é" } })).toBe(
      '<tool_call>\n{"name": "f", "arguments": {"a": 1e-05, "b": "é"}}\n</tool_call>',
    );
    expect(formatToolCall({ name: "f", arguments: '{"a":1}' })).toBe(
      '<tool_call>\n{"name": "f", "arguments": {"a":1}}\n</tool_call>',
    );
    expect(formatToolCall({ name: "f", arguments: '{"a": [1, 2]}' }, "qwen3.5")).toBe(
      "<tool_call>\n<function=f>\n<parameter=a>\n[1, 2]\n</parameter>\n</function>\n</tool_call>",
    );
  });

  it("renders Hermes calls with Python json.dumps separators (docs/NUMERICS.md §6)", () => {
    expect(formatToolCalls([{ name: "f", arguments: { a: [1, 2], b: { c: "é" } } }], "hermes")).toBe(
      '<tool_call>\n{"name": "f", "arguments": {"a": [1, 2], "b": {"c": "é"}}}\n</tool_call>',
    );
    expect(formatToolCalls([{ name: "f", arguments: { s: "x", o: { k: 1 } } }], "qwen3.5")).toBe(
      '<tool_call>\n<function=f>\n<parameter=s>\nx\n</parameter>\n<parameter=o>\n{"k": 1}\n</parameter>\n</function>\n</tool_call>',
    );
  });

  it("keeps a reply with a syntax error as plain text, and moves valid calls into tool_calls", () => {
    const bad = assistantMessageFromText('ok <tool_call>{"name": "guess", "arguments": {"n": }}</tool_call>');
    expect(bad.message.tool_calls).toBeUndefined();
    expect(bad.message.content).toContain("<tool_call>");
    const good = assistantMessageFromText(
      '<think>hm</think>ok\n<tool_call>{"name": "guess", "arguments": {"n": 3}}</tool_call>',
    );
    expect(good.message.content).toBe("ok");
    expect(good.message.reasoning_content).toBe("hm");
    expect(good.message.tool_calls?.[0].function).toEqual({ name: "guess", arguments: '{"n":3}' });
  });

  it("classifies structured OpenAI tool calls with broken argument strings", () => {
    const r = parseOpenAIToolCalls(
      [
        { id: "a", type: "function", function: { name: "guess", arguments: '{"n": 3}' } },
        { id: "b", type: "function", function: { name: "guess", arguments: '{"n": ' } },
        { id: "c", type: "function", function: { name: "nope", arguments: "{}" } },
        { id: "d", type: "function", function: { name: "guess", arguments: "[1]" } },
      ],
      corpus.tools,
    );
    expect(r.calls.map((c) => c.id)).toEqual(["a", "c"]);
    expect(r.issues.map((i) => [i.kind, i.callId])).toEqual([
      ["bad_json", "b"],
      ["unknown_tool", "c"],
      ["bad_arguments", "d"],
    ]);
    expect(r.syntaxError).toBe(true);
  });
});

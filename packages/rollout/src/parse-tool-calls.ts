// Reads tool calls out of raw model text, in both formats the seeds' models emit
// (docs/NUMERICS.md §6):
//   Hermes / Qwen3:  <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>
//   Qwen3.5 (XML):   <tool_call>\n<function=f>\n<parameter=p>\nVALUE\n</parameter>\n</function>\n</tool_call>
// and classifies every malformed call (ToolCallErrorKind) so the "malformed tool-call
// attractor" can be counted. Pure: no Node APIs, safe in browsers.

import { pythonJsonDumps } from "./python-json.js";
import { hashHex } from "./seeds.js";
import { validateJsonSchema } from "./tool-schema-validate.js";
import type { JsonSchema, Message, ParsedToolCall, ToolCall, ToolCallIssue, ToolSchema } from "./types.js";

export type ToolCallFormat = "hermes" | "qwen3.5";

export interface ParsedReply {
  /** Text outside tool-call blocks and the think block, trimmed; null when empty. */
  content: string | null;
  /** Text of the `<think>` block, when present. */
  reasoning?: string;
  /** The reply text with the think block removed (tool-call markup kept). */
  visibleText: string;
  /** Calls that parsed (they may still have semantic issues; see `issues`). */
  calls: ParsedToolCall[];
  /** Every problem found: syntactic (bad_json, unclosed_tag, ...) and semantic (unknown_tool, schema_violation). */
  issues: ToolCallIssue[];
  /** True when some call could not even be parsed; then no call of the reply is executable. */
  syntaxError: boolean;
}

export interface ParseOptions {
  /** Declared tools: enables unknown_tool / schema_violation checks and typed XML parameter values. */
  tools?: ToolSchema[];
  /** Mixed into call ids so ids are unique per conversation and identical on every transport. */
  idSeed?: string;
}

const SYNTAX_KINDS = new Set(["bad_json", "unclosed_tag", "missing_name", "bad_arguments"]);

/** Deterministic call id: the same reply in the same conversation gets the same id everywhere. */
export function toolCallId(idSeed: string, index: number): string {
  return `call_${hashHex(`${idSeed}\u0000${index}`)}`;
}

/** Splits a Qwen3-style think block off the text (the opening tag may sit in the prompt). */
export function splitReasoning(text: string): { reasoning?: string; rest: string } {
  const close = text.indexOf("</think>");
  if (close >= 0) {
    let head = text.slice(0, close);
    const open = head.indexOf("<think>");
    if (open >= 0) head = head.slice(open + "<think>".length);
    return { reasoning: head.trim(), rest: text.slice(close + "</think>".length) };
  }
  const open = text.indexOf("<think>");
  if (open >= 0 && text.slice(0, open).trim() === "") {
    // Cut off while thinking: everything is reasoning, nothing was said.
    return { reasoning: text.slice(open + "<think>".length).trim(), rest: "" };
  }
  return { rest: text };
}

/** Parses the tool calls of one assistant reply. Never throws. */
export function parseToolCalls(text: string, options: ParseOptions = {}): ParsedReply {
  const { reasoning, rest } = splitReasoning(text);
  const idSeed = options.idSeed ?? text;
  const toolsByName = indexTools(options.tools);
  const calls: ParsedToolCall[] = [];
  const positions = new Map<ParsedToolCall, number>();
  const issues: ToolCallIssue[] = [];
  const contentParts: string[] = [];
  let index = 0;
  let i = 0;
  while (i < rest.length) {
    const tc = rest.indexOf("<tool_call>", i);
    const fn = rest.indexOf("<function=", i);
    const next = tc < 0 ? fn : fn < 0 ? tc : Math.min(tc, fn);
    if (next < 0) {
      contentParts.push(rest.slice(i));
      break;
    }
    contentParts.push(rest.slice(i, next));
    let body: string;
    let raw: string;
    if (next === tc) {
      const end = rest.indexOf("</tool_call>", next);
      if (end < 0) {
        raw = rest.slice(next);
        issues.push({ kind: "unclosed_tag", index, raw, message: "<tool_call> is never closed by </tool_call>" });
        index++;
        break;
      }
      body = rest.slice(next + "<tool_call>".length, end).trim();
      raw = rest.slice(next, end + "</tool_call>".length);
      i = end + "</tool_call>".length;
    } else {
      // A bare <function=...> block: Qwen3.5 sometimes omits the <tool_call> wrapper.
      const end = rest.indexOf("</function>", next);
      if (end < 0) {
        raw = rest.slice(next);
        issues.push({ kind: "unclosed_tag", index, raw, message: "<function=...> is never closed by </function>" });
        index++;
        break;
      }
      body = rest.slice(next, end + "</function>".length).trim();
      raw = body;
      i = end + "</function>".length;
    }
    const result = body.startsWith("<function=") ? parseXmlCall(body, toolsByName) : parseJsonCall(body);
    if ("kind" in result) {
      issues.push({ ...result, index, raw });
    } else {
      const call = { id: toolCallId(idSeed, index), name: result.name, arguments: result.arguments };
      positions.set(call, index);
      calls.push(call);
    }
    index++;
  }
  const syntaxError = issues.length > 0;
  if (options.tools) {
    issues.push(...checkToolCalls(calls, options.tools, (c) => positions.get(c) ?? -1));
    // Report issues in call order; semantic checks ran after the scan.
    issues.sort((a, b) => a.index - b.index);
  }
  const content = contentParts.join("").trim();
  return {
    content: content === "" ? null : content,
    ...(reasoning !== undefined ? { reasoning } : {}),
    visibleText: rest,
    calls,
    issues,
    syntaxError,
  };
}

/** Whether an issue is a parse failure (as opposed to a well-formed call the tools reject). */
export function isSyntaxIssue(issue: ToolCallIssue): boolean {
  return SYNTAX_KINDS.has(issue.kind);
}

type CallResult = { name: string; arguments: Record<string, unknown> } | Omit<ToolCallIssue, "index">;

function parseJsonCall(body: string): CallResult {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (err) {
    return { kind: "bad_json", message: `tool call is not valid JSON: ${(err as Error).message}` };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return { kind: "bad_json", message: 'tool call must be a JSON object {"name": ..., "arguments": {...}}' };
  }
  const obj = value as Record<string, unknown>;
  if (typeof obj.name !== "string" || obj.name === "") {
    return { kind: "missing_name", message: 'tool call has no "name" string' };
  }
  // Some models write "parameters" instead of "arguments"; both carry the same meaning.
  const rawArgs = obj.arguments !== undefined ? obj.arguments : obj.parameters;
  const args = coerceArguments(rawArgs);
  if (args === null) {
    return {
      kind: "bad_arguments",
      name: obj.name,
      message: `tool call "${obj.name}": "arguments" must be a JSON object, got ${describe(rawArgs)}`,
    };
  }
  return { name: obj.name, arguments: args };
}

function coerceArguments(raw: unknown): Record<string, unknown> | null {
  if (raw === undefined) return {};
  if (typeof raw === "string") {
    // Double-encoded arguments (an OpenAI-style string inside the Hermes JSON) are accepted.
    try {
      const inner = JSON.parse(raw);
      return typeof inner === "object" && inner !== null && !Array.isArray(inner) ? inner : null;
    } catch {
      return null;
    }
  }
  return typeof raw === "object" && raw !== null && !Array.isArray(raw) ? (raw as Record<string, unknown>) : null;
}

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "string" ? `the string ${JSON.stringify(v.slice(0, 40))}` : typeof v;
}

function parseXmlCall(body: string, tools: Map<string, ToolSchema>): CallResult {
  const head = /^<function=([^>\n]*)>/.exec(body);
  if (!head) return { kind: "unclosed_tag", message: "<function= tag is not closed by >" };
  const name = head[1].trim();
  if (name === "") return { kind: "missing_name", message: "<function=> has no function name" };
  const end = body.lastIndexOf("</function>");
  if (end < 0) return { kind: "unclosed_tag", name, message: `<function=${name}> is never closed by </function>` };
  const inner = body.slice(head[0].length, end);
  const props = propertiesOf(tools.get(name));
  const args: Record<string, unknown> = {};
  let i = 0;
  while (true) {
    const start = inner.indexOf("<parameter=", i);
    if (start < 0) break;
    const close = inner.indexOf(">", start);
    if (close < 0) return { kind: "unclosed_tag", name, message: `<parameter= tag in ${name} is not closed by >` };
    const pname = inner.slice(start + "<parameter=".length, close).trim();
    const stop = inner.indexOf("</parameter>", close);
    if (stop < 0) {
      return { kind: "unclosed_tag", name, message: `<parameter=${pname}> in ${name} is never closed by </parameter>` };
    }
    if (pname === "") return { kind: "bad_arguments", name, message: `a <parameter=> of ${name} has no name` };
    // The template writes "\nVALUE\n" between the tags (docs/NUMERICS.md §6.2): drop exactly one newline each side.
    let value = inner.slice(close + 1, stop);
    if (value.startsWith("\n")) value = value.slice(1);
    if (value.endsWith("\n")) value = value.slice(0, -1);
    args[pname] = typedParameter(value, props?.[pname]);
    i = stop + "</parameter>".length;
  }
  return { name, arguments: args };
}

/**
 * XML parameter values are text; the template wrote strings raw and everything else as JSON,
 * so the declared type decides how to read them back (the approach of TRL's qwen3_5 schema and
 * vLLM's qwen3 XML parser). A value that does not convert stays a string and fails the schema check.
 */
function typedParameter(value: string, schema: JsonSchema | undefined): unknown {
  const declared = schema?.type;
  const types = Array.isArray(declared) ? (declared as string[]) : declared ? [declared as string] : [];
  if (types.length === 1 && types[0] === "string") return value;
  if (types.length === 0 && schema === undefined) return value;
  try {
    const parsed = JSON.parse(value);
    return parsed;
  } catch {
    return value;
  }
}

function indexTools(tools: ToolSchema[] | undefined): Map<string, ToolSchema> {
  const map = new Map<string, ToolSchema>();
  for (const t of tools ?? []) map.set(t.function.name, t);
  return map;
}

function propertiesOf(tool: ToolSchema | undefined): Record<string, JsonSchema> | undefined {
  const props = tool?.function.parameters?.properties;
  return typeof props === "object" && props !== null ? (props as Record<string, JsonSchema>) : undefined;
}

/** Semantic checks of parsed calls against the declared tools: unknown_tool, schema_violation. */
export function checkToolCalls(
  calls: ParsedToolCall[],
  tools: ToolSchema[],
  indexOf: (call: ParsedToolCall) => number = (c) => calls.indexOf(c),
): ToolCallIssue[] {
  const byName = indexTools(tools);
  const issues: ToolCallIssue[] = [];
  for (const call of calls) {
    const tool = byName.get(call.name);
    const index = indexOf(call);
    if (!tool) {
      const known = [...byName.keys()].join(", ") || "(none)";
      issues.push({
        kind: "unknown_tool",
        index,
        name: call.name,
        callId: call.id,
        message: `unknown tool "${call.name}"; available tools: ${known}`,
      });
      continue;
    }
    const violations = validateJsonSchema(call.arguments, tool.function.parameters ?? {});
    if (violations.length > 0) {
      issues.push({
        kind: "schema_violation",
        index,
        name: call.name,
        callId: call.id,
        message: `tool "${call.name}": ${violations.map((v) => v.message).join("; ")}`,
      });
    }
  }
  return issues;
}

/**
 * Reads OpenAI-style structured tool calls (as returned by a server that parsed them):
 * `arguments` is a JSON string that may itself be malformed.
 */
export function parseOpenAIToolCalls(
  toolCalls: ToolCall[],
  tools?: ToolSchema[],
): { calls: ParsedToolCall[]; issues: ToolCallIssue[]; syntaxError: boolean } {
  const calls: ParsedToolCall[] = [];
  const issues: ToolCallIssue[] = [];
  const positions = new Map<ParsedToolCall, number>();
  toolCalls.forEach((tc, index) => {
    const name = tc.function?.name;
    if (typeof name !== "string" || name === "") {
      issues.push({ kind: "missing_name", index, callId: tc.id, message: "tool call has no function name" });
      return;
    }
    let args: unknown;
    try {
      args = tc.function.arguments === "" ? {} : JSON.parse(tc.function.arguments);
    } catch (err) {
      issues.push({
        kind: "bad_json",
        index,
        name,
        callId: tc.id,
        raw: tc.function.arguments,
        message: `tool "${name}": arguments are not valid JSON: ${(err as Error).message}`,
      });
      return;
    }
    if (typeof args !== "object" || args === null || Array.isArray(args)) {
      issues.push({
        kind: "bad_arguments",
        index,
        name,
        callId: tc.id,
        message: `tool "${name}": arguments must be a JSON object, got ${describe(args)}`,
      });
      return;
    }
    const call = { id: tc.id, name, arguments: args as Record<string, unknown> };
    positions.set(call, index);
    calls.push(call);
  });
  const syntaxError = issues.length > 0;
  if (tools) {
    issues.push(...checkToolCalls(calls, tools, (c) => positions.get(c) ?? -1));
    issues.sort((a, b) => a.index - b.index);
  }
  return { calls, issues, syntaxError };
}

/**
 * The assistant message of a raw reply, normalised the way an OpenAI-compatible server with a
 * tool parser returns it (vLLM's Hermes parser behaves the same): when every call parses, the
 * markup leaves `content` and the calls become `tool_calls` (arguments as JSON strings); when a
 * call does not parse, the reply stays plain text. Shared by episodes and `createOpenAIServer`,
 * so in-process and HTTP trajectories are identical.
 */
export function assistantMessageFromText(
  text: string,
  options: ParseOptions = {},
): { message: Message; parsed: ParsedReply } {
  const parsed = parseToolCalls(text, options);
  const message: Message = { role: "assistant", content: null };
  if (parsed.syntaxError || parsed.calls.length === 0) {
    const visible = parsed.visibleText.trim();
    message.content = visible === "" ? null : visible;
  } else {
    message.content = parsed.content;
    message.tool_calls = parsed.calls.map((c) => ({
      id: c.id,
      type: "function",
      function: { name: c.name, arguments: JSON.stringify(c.arguments) },
    }));
  }
  if (parsed.reasoning !== undefined) message.reasoning_content = parsed.reasoning;
  return { message, parsed };
}

/**
 * One call as the model writes it (the chat templates' assistant tool-call text, docs/NUMERICS.md §6).
 * Hermes: arguments given as an object are written with Python's json.dumps (the templates' `tojson`);
 * arguments given as a string (an OpenAI `arguments` text) are inserted as they are, as the templates do.
 */
export function formatToolCall(
  call: { name: string; arguments: Record<string, unknown> | string },
  format: ToolCallFormat = "hermes",
): string {
  if (format === "hermes") {
    const args = typeof call.arguments === "string" ? call.arguments : pythonJsonDumps(call.arguments);
    return `<tool_call>\n{"name": ${JSON.stringify(call.name)}, "arguments": ${args}}\n</tool_call>`;
  }
  const args =
    typeof call.arguments === "string" ? (JSON.parse(call.arguments) as Record<string, unknown>) : call.arguments;
  const params = Object.entries(args)
    .map(([k, v]) => `<parameter=${k}>\n${typeof v === "string" ? v : pythonJsonDumps(v)}\n</parameter>\n`)
    .join("");
  return `<tool_call>\n<function=${call.name}>\n${params}</function>\n</tool_call>`;
}

/** Renders calls as the model writes them, one per line (see formatToolCall). */
export function formatToolCalls(
  calls: { name: string; arguments: Record<string, unknown> | string }[],
  format: ToolCallFormat,
): string {
  return calls.map((c) => formatToolCall(c, format)).join("\n");
}

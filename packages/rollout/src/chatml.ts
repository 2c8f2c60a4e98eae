// A compact ChatML renderer in the shape of the Qwen3 template (docs/NUMERICS.md §6.1): tools in the
// first system turn, Hermes tool calls after assistant content, consecutive tool results grouped
// in one user turn inside <tool_response> tags, generation prompt `<|im_start|>assistant\n`.
// It is what toy policies condition on; real models render with their own template (@kiln/models).

import { formatToolCall } from "./parse-tool-calls.js";
import { pythonJsonDumps } from "./python-json.js";
import type { Message, ToolSchema } from "./types.js";

/** The ChatML special tokens, in the id order kiln's own tokenizers give them (0, 1, 2). */
export const CHATML_SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;

export function renderChatML(
  messages: readonly Message[],
  tools: readonly ToolSchema[] = [],
  addGenerationPrompt = true,
): string {
  if (messages.length === 0) return ""; // raw-text scoring: nothing precedes the tokens
  let out = "";
  let rest = messages;
  if (tools.length > 0) {
    out += "<|im_start|>system\n";
    if (messages[0].role === "system") {
      out += `${messages[0].content ?? ""}\n\n`;
      rest = messages.slice(1);
    }
    out +=
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n" +
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
    for (const t of tools) out += `\n${pythonJsonDumps(t)}`;
    out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and arguments within " +
      '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n';
  }
  for (let i = 0; i < rest.length; i++) {
    const m = rest[i];
    if (m.role === "tool") {
      if (i === 0 || rest[i - 1].role !== "tool") out += "<|im_start|>user";
      out += `\n<tool_response>\n${m.content ?? ""}\n</tool_response>`;
      if (i === rest.length - 1 || rest[i + 1].role !== "tool") out += "<|im_end|>\n";
      continue;
    }
    out += `<|im_start|>${m.role}\n${m.content ?? ""}`;
    if (m.role === "assistant" && m.tool_calls) {
      m.tool_calls.forEach((tc, j) => {
        if (j > 0 || (m.content ?? "") !== "") out += "\n";
        out += formatToolCall({ name: tc.function.name, arguments: tc.function.arguments });
      });
    }
    out += "<|im_end|>\n";
  }
  if (addGenerationPrompt) out += "<|im_start|>assistant\n";
  return out;
}

// Constructors and small helpers for OpenAI-style chat messages. Pure.

import type { Message, ToolCall } from "./types.js";

export function systemMessage(content: string): Message {
  return { role: "system", content };
}

export function userMessage(content: string): Message {
  return { role: "user", content };
}

export function assistantMessage(content: string | null, toolCalls?: ToolCall[]): Message {
  return toolCalls && toolCalls.length > 0
    ? { role: "assistant", content, tool_calls: toolCalls }
    : { role: "assistant", content };
}

/** The answer to one tool call (OpenAI: role "tool" with the call's id). */
export function toolMessage(toolCallId: string, content: string, name?: string): Message {
  return name
    ? { role: "tool", tool_call_id: toolCallId, name, content }
    : { role: "tool", tool_call_id: toolCallId, content };
}

/** A deep copy, so a branch or a retry can never mutate a recorded conversation. */
export function cloneMessages(messages: readonly Message[]): Message[] {
  return messages.map(cloneMessage);
}

export function cloneMessage(m: Message): Message {
  const out: Message = { role: m.role, content: m.content };
  if (m.tool_calls)
    out.tool_calls = m.tool_calls.map((tc) => ({ id: tc.id, type: tc.type, function: { ...tc.function } }));
  if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if (m.name !== undefined) out.name = m.name;
  if (m.reasoning_content !== undefined) out.reasoning_content = m.reasoning_content;
  return out;
}

/** Index of the last message with the given role, or -1. */
export function lastIndexOfRole(messages: readonly Message[], role: Message["role"]): number {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i].role === role) return i;
  return -1;
}

import type { Message } from "@kiln/rollout";

/**
 * The conversation with `note` appended to its system prompt (a system message is prepended
 * when there is none). OPD's scaffolded teacher and OEL's memory-holding teacher both see the
 * student's conversation this way.
 */
export function withSystemNote(messages: readonly Message[], note: string): Message[] {
  const out = messages.map((m) => ({ ...m }));
  const sys = out.findIndex((m) => m.role === "system");
  if (sys >= 0) out[sys] = { ...out[sys], content: `${out[sys].content ?? ""}\n${note}` };
  else out.unshift({ role: "system", content: note });
  return out;
}

// The expert planner as a rollout Policy: it reads the live world state through a
// getter (the scaffolded teacher's tool) and answers with an assistant message that
// carries one OpenAI-style tool call, so episodes driven by it exercise the same path
// as a model's.

import { type Generation, type Message, type Policy, formatToolCall } from "@kiln/rollout";
import { nextExpertCall } from "./expert.js";
import type { QuestworldState } from "./state.js";

export interface ExpertPolicyOptions {
  id?: string;
}

/** A Policy that plays the expert's next call for whatever state `getState` returns. */
export function expertPolicy(getState: () => QuestworldState, options: ExpertPolicyOptions = {}): Policy {
  return {
    id: options.id ?? "questworld-expert",
    async generate(messages: Message[]): Promise<Generation> {
      const next = nextExpertCall(getState());
      if (!next) {
        const text = "All done.";
        return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
      }
      // Ids number the assistant turns, so the same conversation yields the same ids.
      const turn = messages.filter((m) => m.role === "assistant").length;
      const args = JSON.stringify(next.arguments);
      const message: Message = {
        role: "assistant",
        content: null,
        tool_calls: [{ id: `call_${turn}`, type: "function", function: { name: next.name, arguments: args } }],
      };
      // The raw text in the Hermes/Qwen tool-call format a small model would emit.
      const text = formatToolCall({ name: next.name, arguments: args });
      return { message, text, finishReason: "tool_calls" };
    },
  };
}

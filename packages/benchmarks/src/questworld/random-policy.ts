// A seeded random policy: each turn one call to a uniformly chosen tool with
// schema-valid random arguments. It is the floor of the metric (a sanity check that
// Core-3 is not trivially high), not a baseline anyone should train against.

import {
  type Generation,
  type JsonSchema,
  type Message,
  type Policy,
  type ToolSchema,
  formatToolCall,
} from "@kiln/rollout";
import { nextInt, seedPrng } from "./prng.js";

export interface RandomPolicyOptions {
  seed: number;
  id?: string;
  /** Largest integer argument drawn (default 3). */
  maxCount?: number;
}

export function randomPolicy(options: RandomPolicyOptions): Policy {
  const rng = seedPrng(options.seed);
  const maxCount = options.maxCount ?? 3;
  return {
    id: options.id ?? "questworld-random",
    async generate(messages: Message[], tools: ToolSchema[] = []): Promise<Generation> {
      if (tools.length === 0)
        return { message: { role: "assistant", content: "..." }, text: "...", finishReason: "stop" };
      const tool = tools[nextInt(rng, tools.length)];
      const params = tool.function.parameters;
      const props = (params.properties ?? {}) as Record<string, JsonSchema>;
      const required = new Set((params.required ?? []) as string[]);
      const args: Record<string, unknown> = {};
      for (const [name, p] of Object.entries(props)) {
        if (!required.has(name) && nextInt(rng, 2) === 0) continue;
        if (Array.isArray(p.enum)) args[name] = p.enum[nextInt(rng, p.enum.length)];
        else if (p.type === "integer") {
          const lo = typeof p.minimum === "number" ? p.minimum : 0;
          const hi = Math.min(typeof p.maximum === "number" ? p.maximum : maxCount, lo + maxCount - 1);
          args[name] = lo + nextInt(rng, hi - lo + 1);
        } else args[name] = "x";
      }
      const turn = messages.filter((m) => m.role === "assistant").length;
      const json = JSON.stringify(args);
      const message: Message = {
        role: "assistant",
        content: null,
        tool_calls: [{ id: `call_${turn}`, type: "function", function: { name: tool.function.name, arguments: json } }],
      };
      return {
        message,
        text: formatToolCall({ name: tool.function.name, arguments: json }),
        finishReason: "tool_calls",
      };
    },
  };
}

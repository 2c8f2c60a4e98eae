// Shared test helpers: run one call against a state or an environment.

import type { Action } from "@kiln/rollout";
import {
  type CallResult,
  type QuestworldEnvironment,
  type QuestworldState,
  type ToolName,
  type ToolOutcome,
  applyTool,
  cloneState,
} from "../../src/questworld/index.js";

/** Apply a call to a copy of `state`; returns the outcome and the new state. */
export function apply(state: QuestworldState, name: ToolName, args: Record<string, unknown> = {}) {
  const next = cloneState(state);
  const out: ToolOutcome = applyTool(next, name, args);
  return { out, state: next };
}

export function action(name: string, args: Record<string, unknown> = {}, id = "c1"): Action {
  return {
    message: {
      role: "assistant",
      content: null,
      tool_calls: [{ id, type: "function", function: { name, arguments: JSON.stringify(args) } }],
    },
    toolCalls: [{ id, name, arguments: args }],
  };
}

/** Step `env` with one call and return its CallResult and the StepResult. */
export function act(env: QuestworldEnvironment, name: string, args: Record<string, unknown> = {}) {
  const step = env.step(action(name, args));
  const result = (step.info!.results as CallResult[])[0];
  return { step, result };
}

import type { GenerateParams, Generation, Message, Policy, ToolSchema } from "@kiln/rollout";
import { STOP_TOKEN, TRANSFER_SENTENCE } from "./prompts.js";
import type { Tau2Task } from "./tasks.js";

// Scripted policies: the oracle agent that plays a task's gold solution, and a scripted user.

/** A Policy from a function of the conversation (no model). */
export function scriptedPolicy(
  id: string,
  reply: (messages: readonly Message[], tools?: ToolSchema[]) => Message,
): Policy {
  return {
    id,
    async generate(messages: Message[], tools?: ToolSchema[], _params?: GenerateParams): Promise<Generation> {
      const message = reply(messages, tools);
      return { message, text: message.content ?? "", finishReason: message.tool_calls?.length ? "tool_calls" : "stop" };
    },
  };
}

/** The text the oracle sends after its tool calls: the required outputs, and the transfer line if any. */
export function oracleFinalText(task: Tau2Task): string {
  const parts = [...(task.evaluation_criteria.communicate_info ?? [])];
  if (task.evaluation_criteria.actions.some((a) => a.name === "transfer_to_human_agents"))
    parts.push(TRANSFER_SENTENCE);
  return parts.length > 0 ? parts.join("; ") : "Your request has been handled.";
}

/**
 * The oracle agent: executes the task's gold actions one tool call per turn (as the policy
 * asks), then says the required outputs. Stateless: the next action is the number of tool-call
 * turns already in the conversation.
 */
export function oracleAgent(task: Tau2Task): Policy {
  const actions = task.evaluation_criteria.actions.filter((a) => (a.requestor ?? "assistant") === "assistant");
  return scriptedPolicy(`oracle/${task.id}`, (messages) => {
    const done = messages.filter((m) => m.role === "assistant" && (m.tool_calls?.length ?? 0) > 0).length;
    if (done < actions.length) {
      const a = actions[done];
      return {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: `oracle_${done}`,
            type: "function",
            function: { name: a.name, arguments: JSON.stringify(a.arguments ?? {}) },
          },
        ],
      };
    }
    return { role: "assistant", content: oracleFinalText(task) };
  });
}

/**
 * A scripted customer: states the reason for the call, then ends with ###STOP### as soon as the
 * agent has said something after the opening.
 */
export function scriptedUser(task: Tau2Task, opening?: string): Policy {
  return scriptedPolicy(`scripted-user/${task.id}`, (messages) => {
    const turns = messages.filter((m) => m.role === "assistant").length; // the simulator's own past turns
    if (turns === 0) return { role: "assistant", content: opening ?? task.user_scenario.instructions.reason_for_call };
    return { role: "assistant", content: `Thank you. ${STOP_TOKEN}` };
  });
}

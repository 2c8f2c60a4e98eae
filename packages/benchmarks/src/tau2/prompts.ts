import { readFileSync } from "node:fs";
import { join } from "node:path";
import { resolveDataDir } from "./data-dir.js";
import type { Tau2Task } from "./tasks.js";

// System prompts of the agent and of the user simulator, byte for byte as upstream builds them
// (tau2 src/tau2/agent/llm_agent.py SYSTEM_PROMPT/AGENT_INSTRUCTION;
// src/tau2/user/user_simulator.py SYSTEM_PROMPT; data_model/tasks.py __str__ methods).

/** The fixed opening the orchestrator puts in the agent's mouth (orchestrator.py). */
export const FIRST_AGENT_MESSAGE = "Hi! How can I help you today?";

/** User-simulator control tokens (tau2 user/user_simulator_base.py). */
export const STOP_TOKEN = "###STOP###";
export const TRANSFER_TOKEN = "###TRANSFER###";
export const OUT_OF_SCOPE_TOKEN = "###OUT-OF-SCOPE###";
export const USER_STOP_TOKENS: readonly string[] = [STOP_TOKEN, TRANSFER_TOKEN, OUT_OF_SCOPE_TOKEN];

/** The sentence the policy tells the agent to send after transferring. */
export const TRANSFER_SENTENCE = "YOU ARE BEING TRANSFERRED TO A HUMAN AGENT. PLEASE HOLD ON.";

export const AGENT_INSTRUCTION = `You are a customer service agent that helps the user according to the <policy> provided below.
In each turn you can either:
- Send a message to the user.
- Make a tool call.
You cannot do both at the same time.

Try to be helpful and always follow the policy. Always make sure you generate valid JSON only.`;

const textCache = new Map<string, string>();
function readData(file: string, dataDir?: string): string {
  const path = join(resolveDataDir(dataDir), file);
  let t = textCache.get(path);
  if (t === undefined) {
    t = readFileSync(path, "utf8");
    textCache.set(path, t);
  }
  return t;
}

/** The retail policy (policy.md). */
export function loadPolicy(dataDir?: string): string {
  return readData("policy.md", dataDir);
}

/** The no-tools user-simulator guidelines (simulation_guidelines.md). */
export function loadUserGuidelines(dataDir?: string): string {
  return readData("user_simulation_guidelines.md", dataDir);
}

/** The agent's system prompt: instructions and the policy in tags, each tag on its own line. */
export function agentSystemPrompt(policy: string): string {
  return `<instructions>\n${AGENT_INSTRUCTION}\n</instructions>\n<policy>\n${policy}\n</policy>`.trim();
}

/** Python textwrap.indent: prefix every line that is not whitespace-only. */
function indent(text: string, prefix: string): string {
  return (text.match(/[^\n]*\n|[^\n]+$/g) ?? []).map((line) => (line.trim() === "" ? line : prefix + line)).join("");
}

/** `str(task.user_scenario)`: "Instructions:" and the instructions indented by a tab. */
export function renderUserScenario(task: Tau2Task): string {
  const ins = task.user_scenario.instructions;
  const lines = [`Domain: ${ins.domain}`, "Reason for call:", indent(ins.reason_for_call, "\t")];
  if (ins.known_info != null) lines.push("Known info:", indent(ins.known_info, "\t"));
  if (ins.unknown_info != null) lines.push("Unknown info:", indent(ins.unknown_info, "\t"));
  lines.push("Task instructions:", indent(ins.task_instructions, "\t"));
  const out: string[] = [];
  const persona = task.user_scenario.persona;
  if (persona != null) out.push("Persona:", indent(persona, "\t"));
  out.push("Instructions:", indent(lines.join("\n"), "\t"));
  return out.join("\n");
}

/** The user simulator's system prompt: guidelines, a blank line, the scenario in tags. */
export function userSystemPrompt(task: Tau2Task, guidelines: string): string {
  return `${guidelines}\n\n<scenario>\n${renderUserScenario(task)}\n</scenario>`.trim();
}

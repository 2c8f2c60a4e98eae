// Export to TRL dataset rows (huggingface/trl docs, "Dataset formats"): conversational
// language modeling `{"messages": [...], "tools": [...]}` for SFT, and conversational
// preference `{"prompt": [...], "chosen": [...], "rejected": [...]}` for DPO. Pure.

import type { PreferencePair } from "./branch.js";
import { isSuccessful } from "./diagnose.js";
import { trajectoryMessages, type Trajectory } from "./trajectory.js";
import type { Message, ToolSchema } from "./types.js";

export interface TrlMessage {
  role: string;
  content: string;
  tool_calls?: { type: "function"; function: { name: string; arguments: Record<string, unknown> | string } }[];
  tool_call_id?: string;
  name?: string;
  reasoning_content?: string;
}

export interface TrlExportOptions {
  /**
   * Tool-call arguments as objects (default true): transformers chat templates (Qwen3's among
   * them) render dict arguments through tojson and insert strings raw; objects keep both right.
   */
  argumentsAsObjects?: boolean;
  /** Keep `reasoning_content` (default true). */
  keepReasoning?: boolean;
}

export function toTrlMessage(m: Message, options: TrlExportOptions = {}): TrlMessage {
  const out: TrlMessage = { role: m.role, content: m.content ?? "" };
  if (m.tool_calls && m.tool_calls.length > 0) {
    out.tool_calls = m.tool_calls.map((tc) => ({
      type: "function",
      function: {
        name: tc.function.name,
        arguments: (options.argumentsAsObjects ?? true) ? parseArgs(tc.function.arguments) : tc.function.arguments,
      },
    }));
  }
  if (m.tool_call_id !== undefined) out.tool_call_id = m.tool_call_id;
  if (m.name !== undefined) out.name = m.name;
  if ((options.keepReasoning ?? true) && m.reasoning_content !== undefined) out.reasoning_content = m.reasoning_content;
  return out;
}

function parseArgs(s: string): Record<string, unknown> | string {
  try {
    const v = JSON.parse(s);
    return typeof v === "object" && v !== null && !Array.isArray(v) ? v : s;
  } catch {
    return s;
  }
}

export interface TrlMessagesRow {
  messages: TrlMessage[];
  tools?: ToolSchema[];
}

/** One SFT row per episode (per player in a game): the whole conversation. */
export function trajectoryToMessagesRow(
  traj: Trajectory,
  options: TrlExportOptions & { player?: string } = {},
): TrlMessagesRow {
  const messages = trajectoryMessages(traj, options.player).map((m) => toTrlMessage(m, options));
  const tools = options.player !== undefined ? traj.players?.[options.player]?.tools : traj.tools;
  return tools && tools.length > 0 ? { messages, tools: structuredClone(tools) } : { messages };
}

export interface TrlPreferenceRow {
  prompt: TrlMessage[];
  chosen: TrlMessage[];
  rejected: TrlMessage[];
  /** Extra columns TRL ignores but analyses want. */
  score_chosen: number;
  score_rejected: number;
}

export function preferencePairToRow(pair: PreferencePair, options: TrlExportOptions = {}): TrlPreferenceRow {
  return {
    prompt: pair.prompt.map((m) => toTrlMessage(m, options)),
    chosen: [toTrlMessage(pair.chosen, options)],
    rejected: [toTrlMessage(pair.rejected, options)],
    score_chosen: pair.chosenScore,
    score_rejected: pair.rejectedScore,
  };
}

/**
 * SFT rows from the successful episodes only (the ARP "acquire" set), at most `capPerEnvironment`
 * per environment id so one easy game cannot dominate. Success is rollout's one rule (`isSuccessful`)
 * unless `minScore` asks for a score threshold instead.
 */
export function successRows(
  trajectories: readonly Trajectory[],
  options: TrlExportOptions & { minScore?: number; capPerEnvironment?: number } = {},
): TrlMessagesRow[] {
  const { minScore } = options;
  const succeeded = (t: Trajectory) =>
    minScore === undefined ? isSuccessful(t) : t.outcome.status !== "error" && t.outcome.score >= minScore;
  const cap = options.capPerEnvironment ?? Number.POSITIVE_INFINITY;
  const counts = new Map<string, number>();
  const rows: TrlMessagesRow[] = [];
  for (const t of trajectories) {
    if (!succeeded(t)) continue;
    const n = counts.get(t.environment.id) ?? 0;
    if (n >= cap) continue;
    counts.set(t.environment.id, n + 1);
    rows.push(trajectoryToMessagesRow(t, options));
  }
  return rows;
}

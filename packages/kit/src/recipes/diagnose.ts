// ARP "Repair": diagnose failing turns and pair each with a better reply at the same state.
//
// Failure modes (architecture.md, ARP: repeat, length, invalid word, duplicate field):
// - "repeat": the reply's text and tool calls equal an earlier reply of the same episode;
// - "length": the reply's text exceeds `maxChars` (or it stopped at the token limit);
// - "invalid_tool_call": rollout flagged a malformed call (bad JSON, unclosed tag, unknown tool,
//   schema violation — which includes a duplicate or missing field).
//
// Pairing rule (turn-local): the prompt is the conversation right before the failing reply
// (messagesBeforeTurn) and the rejected reply is the failing one. The chosen reply is, in order:
// 1. the reply at the same turn of a successful reference episode of the same environment and
//    seed whose prefix is identical (same conversation up to that turn), when that reply itself
//    has no diagnosis — a reply known to lead to success from exactly this state;
// 2. otherwise a repaired candidate from `repair(prompt, failing, modes)` (default: an over-long
//    plain-text reply cut at the last word boundary within `maxChars`; nothing for others),
//    kept only if it diagnoses clean.
// Turns with no chosen reply are skipped (counted in `unpaired`).
import { type Message, type Trajectory, type TurnRecord, cloneMessage, messagesBeforeTurn } from "@kiln/rollout";
import type { PreferenceExample } from "./batches.js";

export type FailureMode = "repeat" | "length" | "invalid_tool_call";

export interface DiagnoseOptions {
  /** Longest acceptable reply text in characters (default 400). */
  maxChars?: number;
}

function replyKey(m: Message): string {
  return JSON.stringify([
    (m.content ?? "").trim(),
    (m.tool_calls ?? []).map((c) => [c.function.name, c.function.arguments]),
  ]);
}

function replyLength(m: Message): number {
  let n = (m.content ?? "").length;
  for (const c of m.tool_calls ?? []) n += c.function.name.length + c.function.arguments.length;
  return n;
}

/** Failure modes of `traj.turns[turn]` (empty when the reply looks fine). */
export function diagnoseTurn(traj: Trajectory, turn: number, options: DiagnoseOptions = {}): FailureMode[] {
  const maxChars = options.maxChars ?? 400;
  const t = traj.turns[turn];
  const modes: FailureMode[] = [];
  const key = replyKey(t.message);
  if (traj.turns.slice(0, turn).some((p) => replyKey(p.message) === key)) modes.push("repeat");
  if (replyLength(t.message) > maxChars || t.finishReason === "length") modes.push("length");
  if (t.toolCallIssues.length > 0) modes.push("invalid_tool_call");
  return modes;
}

export interface DiagnosedTurn {
  episodeId: string;
  turn: number;
  modes: FailureMode[];
}

export function diagnoseTrajectory(traj: Trajectory, options: DiagnoseOptions = {}): DiagnosedTurn[] {
  const out: DiagnosedTurn[] = [];
  for (let i = 0; i < traj.turns.length; i++) {
    const modes = diagnoseTurn(traj, i, options);
    if (modes.length > 0) out.push({ episodeId: traj.episodeId, turn: i, modes });
  }
  return out;
}

export type RepairFn = (prompt: Message[], failing: TurnRecord, modes: FailureMode[]) => Message | null;

/** Default repair: shorten an over-long plain-text reply at a word boundary; nothing else. */
export function truncateRepair(maxChars: number): RepairFn {
  return (_prompt, failing, modes) => {
    const m = failing.message;
    if (!modes.includes("length") || modes.length > 1 || m.tool_calls?.length || !m.content) return null;
    const cut = m.content.slice(0, maxChars);
    const space = cut.lastIndexOf(" ");
    const text = (space > 0 ? cut.slice(0, space) : cut).trimEnd();
    return text ? { role: "assistant", content: text } : null;
  };
}

export interface TurnPairOptions extends DiagnoseOptions {
  repair?: RepairFn;
}

export interface TurnPairResult {
  pairs: (PreferenceExample & { source: DiagnosedTurn & { chosenFrom: "reference" | "repair" } })[];
  diagnosed: DiagnosedTurn[];
  /** Failing turns for which no chosen reply was found. */
  unpaired: number;
  byMode: Record<FailureMode, number>;
}

function samePrefix(a: Message[], b: Message[]): boolean {
  return a.length === b.length && a.every((m, i) => JSON.stringify(m) === JSON.stringify(b[i]));
}

/** Turn-local DPO pairs from diagnosed failures (pairing rule in the file header). */
export function turnLocalPairs(
  trajectories: readonly Trajectory[],
  references: readonly Trajectory[],
  options: TurnPairOptions = {},
): TurnPairResult {
  const maxChars = options.maxChars ?? 400;
  const repair = options.repair ?? truncateRepair(maxChars);
  const result: TurnPairResult = {
    pairs: [],
    diagnosed: [],
    unpaired: 0,
    byMode: { repeat: 0, length: 0, invalid_tool_call: 0 },
  };
  for (const traj of trajectories) {
    if (traj.players) continue;
    for (const d of diagnoseTrajectory(traj, options)) {
      result.diagnosed.push(d);
      for (const m of d.modes) result.byMode[m]++;
      const prompt = messagesBeforeTurn(traj, d.turn);
      const failing = traj.turns[d.turn];
      let chosen: Message | null = null;
      let chosenFrom: "reference" | "repair" = "reference";
      for (const ref of references) {
        if (ref.environment.id !== traj.environment.id || ref.seed !== traj.seed || ref.turns.length <= d.turn)
          continue;
        if (!samePrefix(messagesBeforeTurn(ref, d.turn), prompt)) continue;
        if (diagnoseTurn(ref, d.turn, options).length > 0) continue;
        if (replyKey(ref.turns[d.turn].message) === replyKey(failing.message)) continue;
        chosen = cloneMessage(ref.turns[d.turn].message);
        break;
      }
      if (!chosen) {
        const repaired = repair(prompt, failing, d.modes);
        if (repaired && replyKey(repaired) !== replyKey(failing.message)) {
          const probe = {
            ...traj,
            turns: [
              ...traj.turns.slice(0, d.turn),
              { ...failing, message: repaired, toolCallIssues: [], finishReason: "stop" as const },
            ],
          };
          if (diagnoseTurn(probe, d.turn, options).length === 0) {
            chosen = repaired;
            chosenFrom = "repair";
          }
        }
      }
      if (!chosen) {
        result.unpaired++;
        continue;
      }
      result.pairs.push({
        prompt,
        chosen,
        rejected: cloneMessage(failing.message),
        tools: traj.tools,
        source: { ...d, chosenFrom },
      });
    }
  }
  return result;
}

// Failure diagnosers and the turn-local pairing rule (ARP "Repair"), beside the episodes they read.
//
// Failure modes (the seed's Wordle failure modes, stated for any tool-using or text game):
// - "repeat": the reply's text and tool calls equal an earlier reply of the same episode (a
//   repeated guess);
// - "length": the reply is longer than `maxChars` or stopped at the token limit, or the game's
//   own length check (`wrongLength`, e.g. a Wordle guess that is not five letters) fails;
// - "invalid": the move is not one the game accepts — a malformed tool call (bad JSON, unclosed
//   tag, unknown tool, schema violation) or the game's own check (`invalidMove`, e.g. a word not
//   in the list);
// - "duplicate_field": one answer carries a field twice — a key repeated in a tool call's JSON
//   arguments, two calls of the same tool in one reply, or a `FIELD:` line repeated in text.
//
// Pairing rule (turn-local): the prompt is the conversation right before the failing reply
// (messagesBeforeTurn) and the rejected reply is the failing one. The chosen reply is, in order:
// 1. the reply at the same turn of a successful reference episode of the same environment and
//    seed whose prefix is identical (same conversation up to that turn), when that reply itself
//    diagnoses clean — a reply known to lead to success from exactly this state;
// 2. otherwise a repaired candidate from `repair(prompt, failing, modes)` (default: an over-long
//    plain-text reply cut at the last word boundary within `maxChars`; nothing for others),
//    kept only if it diagnoses clean.
// Turns with no chosen reply are skipped (counted in `unpaired`).
import { topLevelJsonKeys } from "@kiln/hub-io";
import { cloneMessage } from "./messages.js";
import { type Trajectory, type TurnRecord, messagesBeforeTurn } from "./trajectory.js";
import type { Message, ToolSchema } from "./types.js";

// The one JSON key scanner is hub-io's (it also guards safetensors headers); rollout's API keeps the name.
export { topLevelJsonKeys } from "@kiln/hub-io";

export type FailureMode = "repeat" | "length" | "invalid" | "duplicate_field";

export const FAILURE_MODES: readonly FailureMode[] = ["repeat", "length", "invalid", "duplicate_field"];

export interface DiagnoseOptions {
  /** Longest acceptable reply in characters (default 400). */
  maxChars?: number;
  /** The game's length rule for a reply (e.g. Wordle: the guess is not five letters). */
  wrongLength?: (reply: Message, traj: Trajectory, turn: number) => boolean;
  /** The game's validity rule (e.g. Wordle: the guess is not a word of its list). */
  invalidMove?: (reply: Message, traj: Trajectory, turn: number) => boolean;
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

function hasDuplicateField(m: Message): boolean {
  const calls = m.tool_calls ?? [];
  const names = calls.map((c) => c.function.name);
  if (new Set(names).size < names.length) return true;
  for (const c of calls) {
    const keys = topLevelJsonKeys(c.function.arguments);
    if (new Set(keys).size < keys.length) return true;
  }
  // Text answers in the clembench style ("guess: …", "explanation: …"): a field given twice.
  const fields = [...(m.content ?? "").matchAll(/^\s*([A-Za-z][A-Za-z_ ]{1,30}):/gm)].map((x) =>
    x[1].trim().toLowerCase(),
  );
  return new Set(fields).size < fields.length;
}

/** Failure modes of `traj.turns[turn]` (empty when the reply looks fine). */
export function diagnoseTurn(traj: Trajectory, turn: number, options: DiagnoseOptions = {}): FailureMode[] {
  const maxChars = options.maxChars ?? 400;
  const t = traj.turns[turn];
  const m = t.message;
  const modes: FailureMode[] = [];
  const key = replyKey(m);
  if (traj.turns.slice(0, turn).some((p) => replyKey(p.message) === key)) modes.push("repeat");
  if (replyLength(m) > maxChars || t.finishReason === "length" || options.wrongLength?.(m, traj, turn))
    modes.push("length");
  if (t.toolCallIssues.length > 0 || options.invalidMove?.(m, traj, turn)) modes.push("invalid");
  if (hasDuplicateField(m)) modes.push("duplicate_field");
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
  /** Pair only turns showing at least one of these modes (default: all). */
  modes?: readonly FailureMode[];
}

export interface TurnPair {
  /** The conversation the reply answers (ends before the assistant turn). */
  prompt: Message[];
  chosen: Message;
  rejected: Message;
  tools?: ToolSchema[];
  source: DiagnosedTurn & { chosenFrom: "reference" | "repair" };
}

export interface TurnPairResult {
  pairs: TurnPair[];
  diagnosed: DiagnosedTurn[];
  /** Failing turns (of the selected modes) for which no chosen reply was found. */
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
  const wanted = new Set(options.modes ?? FAILURE_MODES);
  const result: TurnPairResult = {
    pairs: [],
    diagnosed: [],
    unpaired: 0,
    byMode: { repeat: 0, length: 0, invalid: 0, duplicate_field: 0 },
  };
  for (const traj of trajectories) {
    if (traj.players) continue;
    for (const d of diagnoseTrajectory(traj, options)) {
      if (!d.modes.some((m) => wanted.has(m))) continue;
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

/**
 * The one success rule: an episode succeeded when it did not error and the environment's
 * `success` score is > 0, or, for environments that report no `success`, its score is > 0.
 */
export function isSuccessful(t: Pick<Trajectory, "outcome">): boolean {
  if (t.outcome.status === "error") return false;
  const s = t.outcome.scores.success;
  return s !== undefined ? s > 0 : t.outcome.score > 0;
}

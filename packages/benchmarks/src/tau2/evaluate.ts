import type { Policy } from "@kiln/rollout";
import { hashRetailDb } from "./db-hash.js";
import { type RetailDb, loadRetailDb } from "./db.js";
import { type NlAssertionCheck, judgeNlAssertions } from "./nl-judge.js";
import { type RewardComponent, type Tau2Task, rewardBasis } from "./tasks.js";
import type { Tau2TaskVersion } from "./tool-specs.js";
import { RetailTools } from "./tools.js";
import { GRADED_TERMINATIONS, type Tau2Message, type TerminationReason } from "./trajectory.js";

// Grading, as tau2 src/tau2/evaluator/* (spec §5):
// 1. termination gate: only user_stop / agent_stop runs are graded;
// 2. DB: replay the trajectory's WRITE calls on a fresh DB, the gold actions on another (their
//    exceptions ignored), compare upstream's DB hashes;
// 3. COMMUNICATE: each info string, lower-cased, inside some assistant text that was lower-cased
//    and had its commas removed;
// 4. NL_ASSERTION: a judge policy (optional here: without one the component is skipped and
//    the result says so);
// reward = product over the task's reward_basis; success = |reward − 1| ≤ 1e-6.

export interface DbCheck {
  reward: number;
  goldHash: string;
  predictedHash: string;
}

export interface CommunicateCheck {
  reward: number;
  checks: { info: string; met: boolean }[];
}

export interface NlCheck {
  reward: number;
  checks: NlAssertionCheck[];
}

export interface ActionCheck {
  actionId: string;
  name: string;
  matched: boolean;
}

export interface RewardInfo {
  reward: number;
  basis: RewardComponent[];
  terminationReason: TerminationReason;
  db?: DbCheck;
  communicate?: CommunicateCheck;
  /** Absent when the task has no assertions; `skipped` when no judge was given. */
  nlAssertions?: NlCheck | { skipped: true };
  /** Diagnostic only (never in retail's basis): gold actions matched by some call. */
  actions?: { reward: number; checks: ActionCheck[] };
  /** Basis components that could not be computed (NL_ASSERTION without a judge). */
  skippedComponents: RewardComponent[];
  note?: string;
}

export interface EvaluateOptions {
  version?: Tau2TaskVersion;
  /** Judge for NL assertions; without one that component is skipped. */
  judge?: Policy;
  dataDir?: string;
  /** The initial DB to grade against (default: the shipped db.json). */
  db?: RetailDb;
}

/** |reward − 1| ≤ 1e-6 (tau2 metrics/agent_metrics.py is_successful). */
export function isSuccess(reward: number): boolean {
  return Math.abs(reward - 1) <= 1e-6;
}

const goldCache = new WeakMap<object, Map<string, string>>();

/** Hash of the DB after the task's gold actions (failing actions are skipped, as upstream). */
export function goldDbHash(task: Tau2Task, version: Tau2TaskVersion, initial: RetailDb): string {
  const key = `${version}\u0000${JSON.stringify(task.evaluation_criteria.actions)}`;
  const baseKey = initial.baseRecords();
  let perBase = goldCache.get(baseKey);
  if (perBase === undefined) {
    perBase = new Map();
    goldCache.set(baseKey, perBase);
  }
  let h = perBase.get(key);
  if (h === undefined) {
    const tools = new RetailTools(initial.fresh(), version);
    for (const a of task.evaluation_criteria.actions) {
      if ((a.requestor ?? "assistant") !== "assistant") continue;
      tools.invoke(a.name, a.arguments ?? {});
    }
    h = hashRetailDb(tools.db);
    perBase.set(key, h);
  }
  return h;
}

/** Tool calls made by the agent, in order, with parsed arguments. */
export function agentToolCalls(
  messages: readonly Tau2Message[],
): { name: string; arguments: Record<string, unknown> }[] {
  const out: { name: string; arguments: Record<string, unknown> }[] = [];
  for (const m of messages) {
    if (m.role !== "assistant" || !m.tool_calls) continue;
    for (const c of m.tool_calls) {
      let args: Record<string, unknown> = {};
      try {
        args = JSON.parse(c.function.arguments || "{}") as Record<string, unknown>;
      } catch {
        args = {};
      }
      out.push({ name: c.function.name, arguments: args });
    }
  }
  return out;
}

/** The DB component: predicted (trajectory's WRITE calls replayed) vs gold hash. */
export function checkDb(
  task: Tau2Task,
  messages: readonly Tau2Message[],
  version: Tau2TaskVersion,
  initial: RetailDb,
): DbCheck {
  const tools = new RetailTools(initial.fresh(), version);
  for (const call of agentToolCalls(messages)) {
    // Only WRITE tools are replayed; unknown names are no-ops.
    if (tools.spec(call.name)?.kind === "WRITE") tools.invoke(call.name, call.arguments);
  }
  const predictedHash = hashRetailDb(tools.db);
  const goldHash = goldDbHash(task, version, initial);
  return { reward: predictedHash === goldHash ? 1 : 0, goldHash, predictedHash };
}

/** The COMMUNICATE component. */
export function checkCommunicate(task: Tau2Task, messages: readonly Tau2Message[]): CommunicateCheck {
  const infos = task.evaluation_criteria.communicate_info ?? [];
  const texts = messages
    .filter((m) => m.role === "assistant" && typeof m.content === "string" && m.content !== "")
    .map((m) => (m.content as string).toLowerCase().replaceAll(",", ""));
  const checks = infos.map((info) => ({ info, met: texts.some((t) => t.includes(info.toLowerCase())) }));
  return { reward: checks.every((c) => c.met) ? 1 : 0, checks };
}

function argsMatch(gold: Record<string, unknown>, got: Record<string, unknown>, keys: string[]): boolean {
  return keys.every((k) => JSON.stringify(gold[k]) === JSON.stringify(got[k]));
}

/** Gold actions matched by name and (compare_args or all) arguments — diagnostic only. */
export function checkActions(
  task: Tau2Task,
  messages: readonly Tau2Message[],
): { reward: number; checks: ActionCheck[] } {
  const calls = agentToolCalls(messages);
  const checks = task.evaluation_criteria.actions.map((a) => {
    const keys = a.compare_args ?? Object.keys(a.arguments ?? {});
    return {
      actionId: a.action_id,
      name: a.name,
      matched: calls.some((c) => c.name === a.name && argsMatch(a.arguments ?? {}, c.arguments, keys)),
    };
  });
  return { reward: checks.length === 0 ? 1 : checks.filter((c) => c.matched).length / checks.length, checks };
}

/** Grade one finished episode. */
export async function evaluateEpisode(
  task: Tau2Task,
  messages: readonly Tau2Message[],
  terminationReason: TerminationReason,
  options: EvaluateOptions = {},
): Promise<RewardInfo> {
  const basis = rewardBasis(task);
  if (!GRADED_TERMINATIONS.has(terminationReason)) {
    return {
      reward: 0,
      basis,
      terminationReason,
      skippedComponents: [],
      note: `not graded: the episode ended with ${terminationReason}`,
    };
  }
  const version = options.version ?? "v1.0";
  const initial = options.db ?? loadRetailDb(options.dataDir);
  const db = checkDb(task, messages, version, initial);
  const communicate = checkCommunicate(task, messages);
  const actions = checkActions(task, messages);
  const assertions = task.evaluation_criteria.nl_assertions ?? [];
  let nl: RewardInfo["nlAssertions"];
  const skipped: RewardComponent[] = [];
  if (assertions.length > 0) {
    if (options.judge) {
      const checks = await judgeNlAssertions(options.judge, messages, assertions);
      nl = { reward: checks.every((c) => c.met) ? 1 : 0, checks };
    } else {
      nl = { skipped: true };
    }
  }
  let reward = 1;
  for (const c of basis) {
    if (c === "DB") reward *= db.reward;
    else if (c === "COMMUNICATE") reward *= communicate.reward;
    else if (c === "NL_ASSERTION") {
      // Null or empty assertions score 1; without a judge the component is left out.
      if (nl === undefined) continue;
      if ("skipped" in nl) skipped.push(c);
      else reward *= nl.reward;
    } else if (c === "ACTION") reward *= actions.reward === 1 ? 1 : 0;
  }
  return { reward, basis, terminationReason, db, communicate, nlAssertions: nl, actions, skippedComponents: skipped };
}

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { resolveDataDir } from "./data-dir.js";
import { Tau2Error } from "./errors.js";
import type { Tau2TaskVersion } from "./tool-specs.js";

// Task files (tau2 src/tau2/data_model/tasks.py; data/tau2/domains/retail/tasks.json) and the
// split file split_tasks.json (train 74 / test 40 / base 114; spec §4, §7).

export type RewardComponent = "DB" | "COMMUNICATE" | "NL_ASSERTION" | "ACTION" | "ENV_ASSERTION";

export interface GoldAction {
  action_id: string;
  name: string;
  arguments: Record<string, unknown>;
  info?: string | null;
  requestor?: "assistant" | "user";
  compare_args?: string[] | null;
}

export interface UserInstructions {
  domain: string;
  reason_for_call: string;
  known_info?: string | null;
  unknown_info?: string | null;
  task_instructions: string;
}

export interface Tau2Task {
  id: string;
  description?: { purpose: string | null; relevant_policies: string | null; notes: string | null } | null;
  user_scenario: { persona?: string | null; instructions: UserInstructions };
  initial_state?: unknown;
  evaluation_criteria: {
    actions: GoldAction[];
    communicate_info?: string[] | null;
    nl_assertions?: string[] | null;
    reward_basis?: RewardComponent[] | null;
    env_assertions?: unknown;
  };
  issues?: unknown;
}

export type Tau2SplitName = "train" | "test" | "base";

/** Upstream's default basis when a task has none (v0.2.0 retail tasks): DB × COMMUNICATE. */
export const DEFAULT_REWARD_BASIS: readonly RewardComponent[] = ["DB", "COMMUNICATE"];

export const TASK_FILES: Record<Tau2TaskVersion, string> = { "v1.0": "tasks.json", "v0.2.0": "tasks_v0.2.0.json" };

/** The basis a task is scored on. */
export function rewardBasis(task: Tau2Task): RewardComponent[] {
  return [...(task.evaluation_criteria.reward_basis ?? DEFAULT_REWARD_BASIS)];
}

const taskCache = new Map<string, Tau2Task[]>();

/** All 114 tasks of a version, in file order. */
export function loadTasks(version: Tau2TaskVersion = "v1.0", dataDir?: string): Tau2Task[] {
  const file = TASK_FILES[version];
  if (file === undefined)
    throw new Tau2Error(`tau2 task version "${version}": must be one of ${Object.keys(TASK_FILES).join(", ")}`);
  const path = join(resolveDataDir(dataDir), file);
  let tasks = taskCache.get(path);
  if (tasks === undefined) {
    const raw = JSON.parse(readFileSync(path, "utf8")) as unknown;
    if (!Array.isArray(raw)) throw new Tau2Error(`tau2 tasks file ${file}: must be a JSON array`);
    for (const t of raw as Tau2Task[]) {
      if (
        typeof t?.id !== "string" ||
        !Array.isArray(t.evaluation_criteria?.actions) ||
        typeof t.user_scenario?.instructions !== "object"
      ) {
        throw new Tau2Error(
          `tau2 tasks file ${file}: task ${JSON.stringify(t?.id)} lacks id, user_scenario.instructions or evaluation_criteria.actions`,
        );
      }
    }
    tasks = raw as Tau2Task[];
    taskCache.set(path, tasks);
  }
  return structuredClone(tasks);
}

/** The split file: split name → task ids. */
export function loadSplits(dataDir?: string): Record<string, string[]> {
  return JSON.parse(readFileSync(join(resolveDataDir(dataDir), "split_tasks.json"), "utf8")) as Record<
    string,
    string[]
  >;
}

/** Tasks of a split, in the split file's order (upstream filters the task list by id). */
export function loadSplitTasks(
  split: Tau2SplitName = "test",
  version: Tau2TaskVersion = "v1.0",
  dataDir?: string,
): Tau2Task[] {
  const splits = loadSplits(dataDir);
  const ids = splits[split];
  if (ids === undefined)
    throw new Tau2Error(`tau2 split "${split}": not in split_tasks.json (have ${Object.keys(splits).join(", ")})`);
  const byId = new Map(loadTasks(version, dataDir).map((t) => [t.id, t]));
  return ids.map((id) => {
    const t = byId.get(id);
    if (t === undefined) throw new Tau2Error(`tau2 split "${split}": task id "${id}" is not in the ${version} tasks`);
    return t;
  });
}

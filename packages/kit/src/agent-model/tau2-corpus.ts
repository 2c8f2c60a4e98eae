// tau2 retail transcripts for the embedded agent model: the oracle agent (a task's gold actions as real
// tool calls) and weak agents that make one of three mistakes — a skipped action, a wrong argument, a
// premature final answer — played against tau2's scripted customer through the same environment
// `kiln repro oel` deploys on, on TRAIN-split tasks only (OEL evaluates on the test split). Each reply
// becomes one document: the conversation up to it as the policy sees it (system prompt, tool schemas,
// tool results) with the loss on the reply; a row keeps a document's end, so the reply always survives.
import { tau2 } from "@kiln/benchmarks";
import { type Message, type Policy, mulberry32, runEpisodes, trajectoryMessages } from "@kiln/rollout";
import { Tau2TasksEnvironment } from "../recipes/oel-tau2.js";
import type { CorpusDocument } from "./corpus.js";

/** The four agents, in the order tasks cycle through them. */
export const TAU2_SKILLS = ["oracle", "skip-action", "wrong-argument", "premature-answer"] as const;
export type Tau2Skill = (typeof TAU2_SKILLS)[number];

/** Replies an episode may take: one per gold action plus the final answer, with room to spare. */
const TAU2_MAX_TURNS = 30;

/** A value like `value` but wrong: an id/string with its last character changed, a number off by one. */
function perturb(value: unknown, rng: () => number): unknown {
  if (typeof value === "number") return value + 1;
  if (typeof value === "string" && value.length > 0) {
    const last = value[value.length - 1];
    const swap = /[0-9]/.test(last)
      ? String((Number(last) + 1 + Math.floor(rng() * 8)) % 10)
      : last === "x"
        ? "y"
        : "x";
    return value.slice(0, -1) + swap;
  }
  if (Array.isArray(value) && value.length > 0) return [perturb(value[0], rng), ...value.slice(1)];
  return value;
}

/**
 * An agent of `skill` for `task` (seeded): the oracle's tool calls in order, except that the weak ones
 * skip one action, send one action with one argument wrong, or give the final answer after only some
 * of the actions. Stateless like the oracle: the next action follows from the tool-call turns so far.
 */
export function tau2Agent(task: tau2.Tau2Task, skill: Tau2Skill, seed: number): Policy {
  const actions = task.evaluation_criteria.actions.filter((a) => (a.requestor ?? "assistant") === "assistant");
  const rng = mulberry32(seed);
  const at = actions.length > 0 ? Math.floor(rng() * actions.length) : 0;
  let plan = actions.map((a) => ({ name: a.name, arguments: { ...(a.arguments ?? {}) } as Record<string, unknown> }));
  if (skill === "skip-action" && plan.length > 0) plan = plan.filter((_, i) => i !== at);
  else if (skill === "wrong-argument" && plan.length > 0) {
    const keys = Object.keys(plan[at].arguments);
    if (keys.length > 0) {
      const key = keys[Math.floor(rng() * keys.length)];
      plan[at].arguments[key] = perturb(plan[at].arguments[key], rng);
    }
  } else if (skill === "premature-answer") plan = plan.slice(0, at);
  const final = tau2.oracleFinalText(task);
  return tau2.scriptedPolicy(`tau2-${skill}/${task.id}`, (messages: readonly Message[]) => {
    const done = messages.filter((m) => m.role === "assistant" && (m.tool_calls?.length ?? 0) > 0).length;
    if (done < plan.length)
      return {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: `call_${done}`,
            type: "function",
            function: { name: plan[done].name, arguments: JSON.stringify(plan[done].arguments) },
          },
        ],
      };
    return { role: "assistant", content: final };
  });
}

export interface Tau2CorpusOptions {
  seed: number;
  /** Episodes, each on a train-split task (tasks cycle, skills cycle through TAU2_SKILLS). */
  episodes: number;
  /** Share of an episode's replies kept as documents (default 1). */
  turnRate?: number;
}

/** A tau2 document and the train task it was played on. */
export type Tau2Document = CorpusDocument & { taskId: string };

/** tau2 retail documents from train-split tasks only (refuses a task id of the test split). */
export async function tau2Corpus(options: Tau2CorpusOptions): Promise<Tau2Document[]> {
  const train = tau2.loadSplitTasks("train");
  const testIds = new Set(tau2.loadSplitTasks("test").map((t) => t.id));
  const leaked = train.filter((t) => testIds.has(t.id)).map((t) => t.id);
  if (leaked.length > 0) throw new Error(`tau2 corpus: train tasks also in the test split: ${leaked.join(", ")}`);
  const keep = mulberry32(options.seed * 31 + 5);
  const rate = options.turnRate ?? 1;
  const docs: Tau2Document[] = [];
  for (let k = 0; k < options.episodes; k++) {
    const task = train[k % train.length];
    const skill = TAU2_SKILLS[(k + Math.floor(k / train.length)) % TAU2_SKILLS.length];
    const r = await runEpisodes({
      makeEnv: () => new Tau2TasksEnvironment([task], (t) => tau2.scriptedUser(t)),
      policy: tau2Agent(task, skill, options.seed * 100_003 + k),
      episodes: [{ id: `tau2-${task.id}-${k}`, seed: k, state: { taskId: task.id } }],
      limits: { maxTurns: TAU2_MAX_TURNS },
      concurrency: 1,
    });
    const t = r.trajectories[0];
    if (t.outcome.status === "error")
      throw new Error(`tau2 task ${task.id}: ${t.outcome.error?.message ?? "the episode failed"}`);
    const messages = trajectoryMessages(t);
    for (let i = t.prompt.length; i < messages.length; i++)
      if (messages[i].role === "assistant" && keep() < rate)
        docs.push({
          game: "tau2-retail",
          skill,
          messages: messages.slice(0, i + 1),
          tools: t.tools,
          lossOn: "last",
          taskId: task.id,
        });
  }
  return docs;
}

// OEL on tau2 retail: one environment over many tasks (each OelTask's state names its task), and
// memories built from the deploy trajectories by a fixed rule.
//
// Memory rule (`experienceMemory`): what the agent itself saw in its deploy episode of the task —
// the outcome (its reward), every tool call whose result was an error with that error text, and
// the tool calls that succeeded, by name, in order. It never includes the task's gold actions,
// the expected outcome or anything the agent did not observe, so the teacher prompt holds
// experience, not the answer.
import { tau2 } from "@kiln/benchmarks";
import type { Action, Environment, Policy, ResetResult, StepResult, ToolSchema, Trajectory } from "@kiln/rollout";
import { RecipeError } from "../errors.js";

/** Plays the task named in reset({ state: { taskId } }) (default: tasks[seed mod n]). */
export class Tau2TasksEnvironment implements Environment<tau2.Tau2EnvState | { taskId: string }> {
  readonly id = "tau2-retail";
  readonly version: string;
  private current: tau2.Tau2RetailEnvironment | null = null;
  private readonly byId: Map<string, tau2.Tau2Task>;

  constructor(
    private readonly tasks: readonly tau2.Tau2Task[],
    private readonly user: (task: tau2.Tau2Task) => Policy,
    private readonly options: Omit<tau2.Tau2EnvironmentOptions, "task" | "user"> = {},
  ) {
    if (tasks.length === 0) throw new RecipeError("Tau2TasksEnvironment: no tasks");
    this.byId = new Map(tasks.map((t) => [t.id, t]));
    this.version = `tau2-retail-${options.version ?? "v1.0"}`;
  }

  private env(): tau2.Tau2RetailEnvironment {
    if (!this.current) throw new RecipeError("Tau2TasksEnvironment: reset() first");
    return this.current;
  }

  tools(): ToolSchema[] {
    return tau2.retailToolSchemas(this.options.version ?? "v1.0");
  }

  reset(options: { seed: number; state?: tau2.Tau2EnvState | { taskId: string } }): Promise<ResetResult> | ResetResult {
    const id = options.state?.taskId;
    const task = id !== undefined ? this.byId.get(id) : this.tasks[Math.abs(options.seed) % this.tasks.length];
    if (!task) throw new RecipeError(`Tau2TasksEnvironment: no task "${id}"`);
    this.current = new tau2.Tau2RetailEnvironment({ ...this.options, task, user: this.user(task) });
    // A bare { taskId } only chooses the task; a full saved state resumes it.
    const full = options.state && "messages" in options.state ? options.state : undefined;
    return this.current.reset({ seed: options.seed, state: full });
  }

  step(action: Action): Promise<StepResult> | StepResult {
    return this.env().step(action);
  }

  getState(): tau2.Tau2EnvState {
    return this.env().getState();
  }
}

function argsText(raw: string): string {
  return raw.length > 160 ? `${raw.slice(0, 157)}...` : raw;
}

/** How every experience memory opens (what a check for a memory in a prompt looks for). */
export const EXPERIENCE_MEMORY_HEADER = "Memory from your previous attempt at this request";

/** The memory rule in the file header, applied to one deploy trajectory. */
export function experienceMemory(traj: Trajectory): string {
  const failed: string[] = [];
  const worked: string[] = [];
  for (const turn of traj.turns) {
    const results = new Map(
      turn.observations.filter((o) => o.role === "tool").map((o) => [o.tool_call_id ?? "", o.content ?? ""]),
    );
    for (const call of turn.message.tool_calls ?? []) {
      const result = results.get(call.id) ?? "";
      if (/^error/i.test(result.trim()))
        failed.push(`- ${call.function.name}(${argsText(call.function.arguments)}) failed: ${argsText(result.trim())}`);
      else worked.push(call.function.name);
    }
    for (const issue of turn.toolCallIssues) failed.push(`- a malformed tool call: ${argsText(issue.message)}`);
  }
  const lines = [
    `${EXPERIENCE_MEMORY_HEADER} (reward ${traj.outcome.score.toFixed(2)}, ${traj.turns.length} replies):`,
    failed.length ? "Tool calls that failed:" : "No tool call failed.",
    ...failed,
    worked.length ? `Tool calls that worked, in order: ${worked.join(", ")}.` : "No tool call succeeded.",
  ];
  return lines.join("\n");
}

// OEL on tau2 retail: one environment over the split's tasks, and the memory rule applied to what
// the agent saw in its deploy episode.
import { tau2 } from "@kiln/benchmarks";
import { ScriptedPolicy, runEpisodes } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { Tau2TasksEnvironment, experienceMemory } from "../../src/recipes/oel-tau2.js";

describe("OEL environment and memories on tau2 retail", () => {
  it("plays the task a state names; the memory lists failed calls with their errors and the calls that worked, never the gold actions", async () => {
    const tasks = tau2.loadSplitTasks("train").slice(0, 2);
    const makeEnv = () => new Tau2TasksEnvironment(tasks, (t) => tau2.scriptedUser(t));
    const call = (name: string, args: Record<string, unknown>) =>
      `<tool_call>\n${JSON.stringify({ name, arguments: args })}\n</tool_call>`;
    const agent = new ScriptedPolicy({
      id: "probe",
      script: ({ messages }) => {
        // The prompt opens with the agent's greeting; count the replies after it by tool results.
        const mine = messages.filter((m) => m.role === "tool").length;
        if (mine === 0) return call("get_order_details", { order_id: "#W0000000" });
        if (mine === 1) return call("list_all_product_types", {});
        return "Thank you, goodbye.";
      },
    });
    const r = await runEpisodes({
      makeEnv,
      policy: agent,
      episodes: tasks.map((t, i) => ({ id: t.id, seed: i, state: { taskId: t.id } })),
      concurrency: 1,
      limits: { maxTurns: 4 },
    });
    for (const [i, t] of r.trajectories.entries()) {
      expect(t.outcome.status).not.toBe("error");
      expect(t.environment.id).toBe("tau2-retail");
      expect(
        t.prompt.some((m) => m.content?.includes(tasks[i].user_scenario.instructions.reason_for_call.slice(0, 30))),
      ).toBe(true);
      const memory = experienceMemory(t);
      expect(memory).toMatch(/get_order_details\(\{"order_id":"#W0000000"\}\) failed: Error/);
      expect(memory).toMatch(/worked, in order: list_all_product_types/);
      for (const gold of tasks[i].evaluation_criteria?.actions ?? [])
        expect(memory).not.toContain(JSON.stringify(gold.arguments));
    }
  });
});

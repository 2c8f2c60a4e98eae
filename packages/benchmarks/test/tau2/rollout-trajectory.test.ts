import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { TrajectoryWriter, readTrajectories, runEpisode, trajectoryMessages } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { Tau2RetailEnvironment, loadTasks, oracleAgent, runTau2, scriptedUser } from "../../src/tau2/index.js";

// tau2 episodes are recorded as @kiln/rollout trajectory records and written with rollout's
// TrajectoryWriter; rollout's reader validates them and rebuilds the agent's conversation.

describe("rollout trajectory records", () => {
  it("a run written through TrajectoryWriter reads back, one record per episode", async () => {
    const dir = mkdtempSync(join(tmpdir(), "tau2-traj-"));
    try {
      const path = join(dir, "trajectories.jsonl.gz");
      const writer = await TrajectoryWriter.open(path, { sync: false });
      const run = await runTau2({
        split: "test",
        taskIds: ["12", "64"],
        version: "v1.0",
        agent: oracleAgent,
        user: (t) => scriptedUser(t),
        numTrials: 2,
        sink: writer,
      });
      await writer.close();
      const { trajectories, torn } = await readTrajectories(path);
      expect(torn).toBe(false);
      expect(trajectories.map((t) => t.episodeId).sort()).toEqual([
        "tau2-retail/12/trial-0",
        "tau2-retail/12/trial-1",
        "tau2-retail/64/trial-0",
        "tau2-retail/64/trial-1",
      ]);
      for (const traj of trajectories) {
        const ep = run.episodes.find((e) => `tau2-retail/${e.taskId}/trial-${e.trial}` === traj.episodeId);
        if (!ep) throw new Error(`no episode for ${traj.episodeId}`);
        expect(traj.outcome).toMatchObject({ status: "done", totalReward: ep.reward, score: ep.reward });
        expect(traj.metadata).toMatchObject({ taskId: ep.taskId, terminationReason: "user_stop" });
        // The rebuilt conversation is the agent's view (tool results without tau2's error flag).
        const rebuilt = trajectoryMessages(traj);
        expect(rebuilt.map((m) => [m.role, m.content])).toEqual(ep.messages.map((m) => [m.role, m.content]));
        expect(traj.turns.at(-1)?.done).toBe(true);
      }
      // Task 64's gold exchange fails upstream too: its tool result is an error turn.
      const t64 = trajectories.find((t) => t.episodeId === "tau2-retail/64/trial-0");
      expect(
        t64?.turns.some((t) =>
          t.observations.some((o) => o.content?.startsWith("Error: Non-delivered order cannot be exchanged")),
        ),
      ).toBe(true);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("the environment runs under @kiln/rollout's own episode loop", async () => {
    const task = loadTasks("v0.2.0").find((t) => t.id === "36");
    if (!task) throw new Error("task 36 missing");
    const env = new Tau2RetailEnvironment({ task, version: "v0.2.0", user: scriptedUser(task) });
    const traj = await runEpisode({ env, policy: oracleAgent(task), seed: 626729, limits: { maxTurns: 20 } });
    expect(traj.outcome.status).toBe("done");
    expect(traj.outcome.totalReward).toBe(1);
    expect(traj.turns.map((t) => t.action.map((a) => a.name))).toEqual([["modify_pending_order_items"], []]);
    expect(env.terminationReason).toBe("user_stop");
    expect(env.reward?.db?.reward).toBe(1);
  });
});

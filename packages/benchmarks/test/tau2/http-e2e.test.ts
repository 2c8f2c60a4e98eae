import { HttpPolicy, createOpenAIServer } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { loadTasks, oracleAgent, runTau2Episode, scriptedUser, upstreamTrialSeeds } from "../../src/tau2/index.js";

// End to end over HTTP: the oracle agent and a scripted user simulator are each served by
// @kiln/rollout's OpenAI-compatible server (the one `kiln serve` is built on) and driven
// through HttpPolicy clients, so tool calls, tool results and the user's turns cross the wire.

describe("tau2 episode over HTTP", () => {
  it("task 36 (modify items) succeeds with agent and user behind OpenAI-compatible servers", async () => {
    const task = loadTasks("v0.2.0").find((t) => t.id === "36");
    if (!task) throw new Error("task 36 missing");
    const agentServer = await createOpenAIServer({ policy: oracleAgent(task), modelId: "oracle" });
    const userServer = await createOpenAIServer({ policy: scriptedUser(task), modelId: "scripted-user" });
    try {
      const agent = new HttpPolicy({ baseUrls: agentServer.url, model: "oracle", retries: 0 });
      const user = new HttpPolicy({ baseUrls: `${userServer.url}/v1`, model: "scripted-user", retries: 0 });
      const r = await runTau2Episode({ task, version: "v0.2.0", agent, user, seed: upstreamTrialSeeds(1)[0] });
      expect(r.terminationReason).toBe("user_stop");
      expect(r.rewardInfo.db?.reward).toBe(1);
      expect(r.rewardInfo.communicate?.reward).toBe(1);
      expect(r.success).toBe(true);
      const call = r.messages.find((m) => m.role === "assistant" && m.tool_calls?.length);
      expect(call?.tool_calls?.[0].function.name).toBe("modify_pending_order_items");
      const result = r.messages.find((m) => m.role === "tool");
      expect(result?.error).toBe(false);
      expect(JSON.parse(result?.content ?? "{}").status).toBe("pending (item modified)");
      expect(agentServer.stats().served).toBeGreaterThanOrEqual(2);
      expect(userServer.stats().served).toBe(2);
    } finally {
      await agentServer.close();
      await userServer.close();
    }
  });
});

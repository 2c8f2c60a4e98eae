import type { Message, Policy } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  FIRST_AGENT_MESSAGE,
  Tau2RetailEnvironment,
  agentSystemPrompt,
  loadPolicy,
  loadSplitTasks,
  loadTasks,
  loadUserGuidelines,
  renderUserScenario,
  runTau2Episode,
  scriptedPolicy,
  userSystemPrompt,
} from "../../src/tau2/index.js";

const task = (id: string, version: "v1.0" | "v0.2.0" = "v1.0") => {
  const t = loadTasks(version).find((x) => x.id === id);
  if (!t) throw new Error(`no task ${id}`);
  return t;
};

/** A user that records what it was shown and replies from a list. */
function recordingUser(replies: string[]): Policy & { seen: Message[][] } {
  const seen: Message[][] = [];
  let i = 0;
  const p = scriptedPolicy("rec-user", (messages) => {
    seen.push(structuredClone([...messages]));
    return { role: "assistant", content: replies[Math.min(i++, replies.length - 1)] };
  });
  return Object.assign(p, { seen });
}

const say = (text: string): Message => ({ role: "assistant", content: text });
const call = (name: string, args: Record<string, unknown>, id = "c"): Message => ({
  role: "assistant",
  content: null,
  tool_calls: [{ id, type: "function", function: { name, arguments: JSON.stringify(args) } }],
});
function agentFrom(turns: Message[]): Policy {
  let i = 0;
  return scriptedPolicy("script-agent", () => turns[Math.min(i++, turns.length - 1)]);
}

describe("prompts", () => {
  it("agent system prompt: instructions and policy in tags", () => {
    const p = agentSystemPrompt(loadPolicy());
    expect(
      p.startsWith(
        "<instructions>\nYou are a customer service agent that helps the user according to the <policy> provided below.\n",
      ),
    ).toBe(true);
    expect(p).toContain(
      "Always make sure you generate valid JSON only.\n</instructions>\n<policy>\n# Retail agent policy",
    );
    expect(p.endsWith("\n</policy>")).toBe(true);
  });

  it("user scenario renders as upstream's __str__ (tab indents, null fields omitted)", () => {
    const t = task("36");
    const ins = t.user_scenario.instructions;
    expect(renderUserScenario(t)).toBe(
      `Instructions:\n\tDomain: retail\n\tReason for call:\n\t\t${ins.reason_for_call}\n\tKnown info:\n\t\t${ins.known_info}\n\tTask instructions:\n\t\t${ins.task_instructions}`,
    );
    const sys = userSystemPrompt(t, loadUserGuidelines());
    expect(sys.startsWith("# User Simulation Guidelines\n")).toBe(true);
    expect(sys).toContain("maintaining character consistency.\n\n\n<scenario>\nInstructions:\n");
    expect(sys.endsWith("</scenario>")).toBe(true);
  });

  it("splits: 40 test tasks with the spec's ids", () => {
    const ids = loadSplitTasks("test").map((t) => t.id);
    expect(ids).toHaveLength(40);
    expect(ids.slice(0, 5)).toEqual(["5", "9", "12", "17", "18"]);
    expect(loadSplitTasks("train")).toHaveLength(74);
    expect(loadSplitTasks("base")).toHaveLength(114);
  });
});

describe("episode protocol", () => {
  it("opens with the fixed greeting; the user sees flipped roles and never tool traffic", async () => {
    const user = recordingUser(["I want to know my user id. My email is noah.brown7922@example.com", "###STOP###"]);
    const agent = agentFrom([
      call("find_user_id_by_email", { email: "noah.brown7922@example.com" }),
      say("Your id is noah_brown_6181."),
    ]);
    const r = await runTau2Episode({ task: task("5"), agent, user, seed: 7 });
    expect(r.terminationReason).toBe("user_stop");
    expect(r.messages[0].role).toBe("system");
    expect(r.messages[1]).toEqual({ role: "assistant", content: FIRST_AGENT_MESSAGE });
    expect(user.seen[0].map((m) => m.role)).toEqual(["system", "user"]);
    expect(user.seen[0][1].content).toBe(FIRST_AGENT_MESSAGE);
    expect(user.seen[1].slice(1)).toEqual([
      { role: "user", content: FIRST_AGENT_MESSAGE },
      { role: "assistant", content: "I want to know my user id. My email is noah.brown7922@example.com" },
      { role: "user", content: "Your id is noah_brown_6181." },
    ]);
    const toolMsg = r.messages.find((m) => m.role === "tool");
    expect(toolMsg).toMatchObject({ content: "noah_brown_6181", error: false, tool_call_id: "c" });
    // user1, agent call, tool results, agent text, user stop = 5 hops.
    expect(r.steps).toBe(5);
  });

  for (const token of ["###TRANSFER###", "###OUT-OF-SCOPE###"]) {
    it(`${token} ends the episode as user_stop and it is graded`, async () => {
      const r = await runTau2Episode({
        task: task("62"),
        agent: agentFrom([say("ok")]),
        user: recordingUser(["hello", token]),
        seed: 1,
      });
      expect(r.terminationReason).toBe("user_stop");
      // Graded, not short-circuited: the DB check ran; the agent wrote nothing and task 62's gold
      // actions write nothing either, so the hashes agree.
      expect(r.rewardInfo.db?.predictedHash).toMatch(/^[0-9a-f]{64}$/);
      expect(r.rewardInfo.db?.predictedHash).toBe(r.rewardInfo.db?.goldHash);
      expect(r.rewardInfo.db?.reward).toBe(1);
    });
  }

  it("errors are cumulative: the 10th failing tool result ends the run (too_many_errors, reward 0)", async () => {
    const turns: Message[] = [];
    for (let i = 0; i < 12; i++) {
      turns.push(call("get_order_details", { order_id: "#nope" }, `e${i}`));
      turns.push(call("get_user_details", { user_id: "noah_brown_6181" }, `ok${i}`)); // successes do not reset it
    }
    const r = await runTau2Episode({ task: task("62"), agent: agentFrom(turns), user: recordingUser(["hi"]), seed: 1 });
    expect(r.terminationReason).toBe("too_many_errors");
    expect(r.errors).toBe(10);
    expect(r.reward).toBe(0);
    expect(r.rewardInfo.note).toMatch(/not graded/);
    // 1 user hop + 19 tool calls × 2 hops.
    expect(r.steps).toBe(1 + 19 * 2);
  });

  it("max_steps counts hops and is checked only when no tool results are pending", async () => {
    const r = await runTau2Episode({
      task: task("62"),
      agent: agentFrom([say("tell me more")]),
      user: recordingUser(["more"]),
      seed: 1,
      maxSteps: 6,
    });
    expect(r.terminationReason).toBe("max_steps");
    expect(r.steps).toBe(6);
    expect(r.messages.at(-1)).toEqual({ role: "assistant", content: "tell me more" });
    const r2 = await runTau2Episode({
      task: task("62"),
      agent: agentFrom([call("get_user_details", { user_id: "noah_brown_6181" })]),
      user: recordingUser(["x"]),
      seed: 1,
      maxSteps: 4,
    });
    // user (1), call (2: pending, no check), results (3), call (4: pending), results (5) → stop.
    expect(r2.steps).toBe(5);
    expect(r2.terminationReason).toBe("max_steps");
  });

  it("an empty agent message is an agent_error; a failing policy an infrastructure_error", async () => {
    const r = await runTau2Episode({
      task: task("62"),
      agent: agentFrom([{ role: "assistant", content: "" }]),
      user: recordingUser(["hi"]),
      seed: 1,
    });
    expect(r.terminationReason).toBe("agent_error");
    expect(r.reward).toBe(0);
    const failing: Policy = {
      id: "boom",
      async generate() {
        throw new Error("connection refused");
      },
    };
    const r2 = await runTau2Episode({ task: task("62"), agent: failing, user: recordingUser(["hi"]), seed: 1 });
    expect(r2.terminationReason).toBe("infrastructure_error");
    expect(r2.error).toBe("agent: connection refused");
    const r3 = await runTau2Episode({ task: task("62"), agent: agentFrom([say("hi")]), user: failing, seed: 1 });
    expect(r3.terminationReason).toBe("infrastructure_error");
    expect(r3.error).toBe("user simulator: connection refused");
  });

  it("state round-trips: a restored environment carries the DB changes", async () => {
    const t = task("5");
    const env = new Tau2RetailEnvironment({ task: t, user: recordingUser(["hi", "###STOP###"]) });
    await env.reset({ seed: 3 });
    await env.step({
      message: call("modify_user_address", {
        user_id: "noah_brown_6181",
        address1: "1",
        address2: "2",
        city: "3",
        state: "4",
        country: "5",
        zip: "6",
      }),
      toolCalls: [],
    });
    const state = JSON.parse(JSON.stringify(env.getState()));
    const env2 = new Tau2RetailEnvironment({ task: t, user: recordingUser(["x"]) });
    const reset = await env2.reset({ seed: 3, state });
    expect(reset.messages.length).toBe(1 + state.messages.length);
    expect(env2.db.user("noah_brown_6181")?.address.city).toBe("3");
    expect(env2.getState().stepCount).toBe(env.getState().stepCount);
  });
});

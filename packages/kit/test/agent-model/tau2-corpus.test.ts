import { tau2 } from "@kiln/benchmarks";
import { chatmlTemplate } from "@kiln/models";
import { describe, expect, it } from "vitest";
import { documentText } from "../../src/agent-model/build.js";
import { TAU2_SKILLS, tau2Agent, tau2Corpus } from "../../src/agent-model/tau2-corpus.js";

describe("the agent model's tau2 retail corpus", () => {
  it("plays train-split tasks only, every agent, rendered as the policy sees them, with real tool calls", async () => {
    const docs = await tau2Corpus({ seed: 0, episodes: 8 });
    const train = new Set(tau2.loadSplitTasks("train").map((t) => t.id));
    const test = new Set(tau2.loadSplitTasks("test").map((t) => t.id));
    expect(docs.length).toBeGreaterThan(8);
    for (const d of docs) {
      expect(train.has(d.taskId)).toBe(true);
      expect(test.has(d.taskId)).toBe(false);
    }
    expect(new Set(docs.map((d) => d.skill))).toEqual(new Set(TAU2_SKILLS));
    const calls = docs.filter((d) => (d.messages!.at(-1)!.tool_calls?.length ?? 0) > 0);
    expect(calls.length).toBeGreaterThan(0);
    for (const d of docs) {
      expect(d.lossOn).toBe("last");
      const text = documentText(d);
      // The policy's view: its prompt exactly as a local policy renders it (with the tools it was given:
      // the embedded template declares none, CHATML_TOOL_TEMPLATE) followed by the reply.
      expect(d.tools!.map((t) => t.function.name)).toContain("find_user_id_by_email");
      const prompt = chatmlTemplate().render(d.messages!.slice(0, -1), { tools: d.tools, addGenerationPrompt: true });
      expect(text.startsWith(prompt)).toBe(true);
      expect(text.startsWith("<|im_start|>system\n")).toBe(true);
      expect(text).toContain(
        tau2.loadSplitTasks("train").find((t) => t.id === d.taskId)!.user_scenario.instructions.reason_for_call,
      );
    }
    const callText = documentText(calls[0]);
    expect(callText.endsWith("</tool_call><|im_end|>\n")).toBe(true);
    expect(callText.slice(callText.lastIndexOf("<|im_start|>assistant"))).toContain(
      calls[0].messages!.at(-1)!.tool_calls![0].function.name,
    );
  });

  it("weak agents skip an action, change an argument or answer early; the oracle plays the gold actions", async () => {
    const task = tau2.loadSplitTasks("train").find((t) => t.evaluation_criteria.actions.length >= 2)!;
    const gold = task.evaluation_criteria.actions.filter((a) => (a.requestor ?? "assistant") === "assistant");
    const play = async (skill: (typeof TAU2_SKILLS)[number]) => {
      const agent = tau2Agent(task, skill, 3);
      const messages: tau2.Tau2Message[] = [{ role: "user", content: "hi" }] as never;
      const calls: { name: string; arguments: string }[] = [];
      for (let i = 0; i < gold.length + 1; i++) {
        const g = await agent.generate(messages as never);
        messages.push(g.message as never);
        if (!g.message.tool_calls?.length) break;
        calls.push(g.message.tool_calls[0].function);
      }
      return calls;
    };
    const oracle = await play("oracle");
    expect(oracle.map((c) => c.name)).toEqual(gold.map((a) => a.name));
    expect(oracle.map((c) => JSON.parse(c.arguments))).toEqual(gold.map((a) => a.arguments ?? {}));
    expect((await play("skip-action")).length).toBe(gold.length - 1);
    expect((await play("premature-answer")).length).toBeLessThan(gold.length);
    const wrong = await play("wrong-argument");
    expect(wrong.map((c) => c.name)).toEqual(gold.map((a) => a.name));
    expect(wrong.map((c) => c.arguments)).not.toEqual(oracle.map((c) => c.arguments));
  });
});

import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Message, Policy } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  RetailTools,
  Tau2Error,
  type Tau2Message,
  checkCommunicate,
  dataDirCandidates,
  evaluateEpisode,
  hashRetailDb,
  isSuccess,
  loadRetailDb,
  loadTasks,
  oracleAgent,
  renderTrajectoryForJudge,
  resolveDataDir,
  runTau2,
  scriptedPolicy,
  scriptedUser,
  goldDbHash,
  writeTau2Results,
} from "../../src/tau2/index.js";

const v1 = loadTasks("v1.0");
const v02 = loadTasks("v0.2.0");
const byId = (tasks: typeof v1, id: string) => tasks.find((t) => t.id === id) as (typeof v1)[number];

/** A trajectory that performs the task's gold actions and says `text`. */
function goldTrajectory(id: string, text: string, version = v1): Tau2Message[] {
  const t = byId(version, id);
  const msgs: Tau2Message[] = [{ role: "assistant", content: "Hi! How can I help you today?" }];
  t.evaluation_criteria.actions.forEach((a, i) => {
    msgs.push({
      role: "assistant",
      content: null,
      tool_calls: [
        { id: `g${i}`, type: "function", function: { name: a.name, arguments: JSON.stringify(a.arguments) } },
      ],
    });
    msgs.push({ role: "tool", tool_call_id: `g${i}`, content: "…" });
  });
  msgs.push({ role: "assistant", content: text });
  return msgs;
}

function judge(verdicts: boolean[]): Policy & { prompts: Message[][] } {
  const prompts: Message[][] = [];
  const p = scriptedPolicy("judge", (messages) => {
    prompts.push([...messages]);
    return {
      role: "assistant",
      content: JSON.stringify({
        results: verdicts.map((v) => ({ expectedOutcome: "x", reasoning: "r", metExpectation: v })),
      }),
    };
  });
  return Object.assign(p, { prompts });
}

describe("grading", () => {
  it("gold solutions: 103 of 114 change the DB; only tasks 64 and 105 have failing gold writes (v1.0)", () => {
    const db = loadRetailDb();
    const h0 = hashRetailDb(db);
    expect(v1.filter((t) => goldDbHash(t, "v1.0", db) !== h0)).toHaveLength(103);
    const failing: string[] = [];
    for (const t of v1) {
      const tools = new RetailTools(db.fresh(), "v1.0");
      for (const a of t.evaluation_criteria.actions) {
        if (tools.spec(a.name)?.kind === "WRITE" && tools.invoke(a.name, a.arguments).error)
          failing.push(`${t.id}:${a.name}`);
      }
    }
    expect(failing).toEqual(["64:exchange_delivered_order_items", "105:exchange_delivered_order_items"]);
  });

  it("COMMUNICATE: lower-cased substring of an assistant text with commas removed", () => {
    const t = byId(v02, "36");
    expect(t.evaluation_criteria.communicate_info).toEqual(["camera", "481.5"]);
    expect(checkCommunicate(t, [{ role: "assistant", content: "The CAMERA costs $481.50" }]).reward).toBe(1);
    expect(
      checkCommunicate(t, [
        { role: "assistant", content: "The camera" },
        { role: "user", content: "481.5" },
      ]).reward,
    ).toBe(0);
    const withComma = { ...t, evaluation_criteria: { ...t.evaluation_criteria, communicate_info: ["1131"] } };
    expect(checkCommunicate(withComma, [{ role: "assistant", content: "limit $1,131" }]).reward).toBe(1);
    const infoWithComma = { ...t, evaluation_criteria: { ...t.evaluation_criteria, communicate_info: ["1,131"] } };
    expect(checkCommunicate(infoWithComma, [{ role: "assistant", content: "limit $1,131" }]).reward).toBe(0);
  });

  it("v0.2.0 reward is DB × COMMUNICATE", async () => {
    const ok = await evaluateEpisode(byId(v02, "36"), goldTrajectory("36", "camera 481.5", v02), "user_stop", {
      version: "v0.2.0",
    });
    expect(ok).toMatchObject({ reward: 1, basis: ["DB", "COMMUNICATE"] });
    const silent = await evaluateEpisode(byId(v02, "36"), goldTrajectory("36", "done", v02), "user_stop", {
      version: "v0.2.0",
    });
    expect(silent.reward).toBe(0);
    expect(silent.db?.reward).toBe(1);
    const noWrite = await evaluateEpisode(
      byId(v02, "36"),
      [{ role: "assistant", content: "camera 481.5" }],
      "user_stop",
      { version: "v0.2.0" },
    );
    expect(noWrite.reward).toBe(0);
    expect(noWrite.db?.predictedHash).not.toBe(noWrite.db?.goldHash);
  });

  it("v1.0 reward is DB × NL_ASSERTION through the judge; skipped without one", async () => {
    const t = byId(v1, "36");
    const traj = goldTrajectory("36", "The camera is the most expensive item at $481.50.");
    const pass = judge([true, true]);
    expect((await evaluateEpisode(t, traj, "user_stop", { judge: pass })).reward).toBe(1);
    const fail = await evaluateEpisode(t, traj, "user_stop", { judge: judge([true, false]) });
    expect(fail.reward).toBe(0);
    expect(fail.nlAssertions).toMatchObject({ reward: 0 });
    const none = await evaluateEpisode(t, traj, "user_stop");
    expect(none.skippedComponents).toEqual(["NL_ASSERTION"]);
    expect(none.reward).toBe(1);
    // The judge sees tool-call turns as "assistant: None" and the assertions.
    const userPrompt = pass.prompts[0][1].content as string;
    expect(userPrompt).toContain("assistant: None");
    expect(userPrompt).toContain("Agent should tell the user the camera costs $481.50.");
    expect(renderTrajectoryForJudge([{ role: "tool", content: "x", tool_call_id: "1" }])).toBe("tool: x");
    await expect(
      evaluateEpisode(t, traj, "user_stop", {
        judge: scriptedPolicy("bad", () => ({ role: "assistant", content: "yes" })),
      }),
    ).rejects.toThrow(Tau2Error);
  });

  it("task 33 is scored on the DB only; unfinished runs score 0", async () => {
    const t = byId(v1, "33");
    expect(t.evaluation_criteria.reward_basis).toEqual(["DB"]);
    expect((await evaluateEpisode(t, goldTrajectory("33", "done"), "user_stop")).reward).toBe(1);
    expect((await evaluateEpisode(t, goldTrajectory("33", "done"), "max_steps")).reward).toBe(0);
    expect(isSuccess(1 - 1e-7)).toBe(true);
    expect(isSuccess(0.999)).toBe(false);
  });

  it("only WRITE calls are replayed; unknown tools are no-ops", async () => {
    const t = byId(v1, "62"); // gold makes no write
    const traj: Tau2Message[] = [
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "1", type: "function", function: { name: "nonexistent", arguments: "{}" } }],
      },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "2", type: "function", function: { name: "calculate", arguments: '{"expression":"1+1"}' } }],
      },
    ];
    expect((await evaluateEpisode(t, traj, "agent_stop")).db?.reward).toBe(1);
  });
});

describe("runner and results files", () => {
  it("runs tasks × trials with progress, writes results.json, trajectories.jsonl and results.md", async () => {
    const seen: number[] = [];
    const run = await runTau2({
      split: "test",
      taskIds: ["5", "36", "12"],
      version: "v0.2.0",
      agent: oracleAgent,
      user: (t) => scriptedUser(t),
      numTrials: 2,
      concurrency: 2,
      onProgress: (p) => seen.push(p.done),
    });
    expect(seen.sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(run.config.seeds).toEqual([626729, 373753]);
    expect(run.episodes.map((e) => e.seed)).toEqual([626729, 373753, 626729, 373753, 626729, 373753]);
    expect(run.metrics.passHatK.map((p) => p.value)).toEqual([1, 1]);
    const dir = mkdtempSync(join(tmpdir(), "tau2-"));
    try {
      const files = writeTau2Results(dir, run);
      const json = JSON.parse(readFileSync(files.json, "utf8"));
      expect(json.metrics.numTasks).toBe(3);
      expect(json.episodes[0].messages).toBeUndefined();
      const lines = readFileSync(files.trajectories, "utf8").trim().split("\n");
      expect(lines).toHaveLength(6);
      expect(JSON.parse(lines[0]).messages[0].role).toBe("system");
      const md = readFileSync(files.markdown, "utf8");
      expect(md).toContain("| pass^1 | 100.0 | 0.0 |");
      expect(md).toContain("| 36 | 2/2 | 1.00 | 1.00 | 1.00 | user_stop, user_stop |");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("infrastructure errors", () => {
  it("are retried, then dropped from the metrics with a warning", async () => {
    let calls = 0;
    const flaky: Policy = {
      id: "flaky",
      async generate(messages, tools, params) {
        calls++;
        if (calls <= 2) throw new Error("503 from server");
        return oracleAgent(byId(v02, "36")).generate(messages, tools, params);
      },
    };
    const run = await runTau2({
      tasks: [byId(v02, "36")],
      version: "v0.2.0",
      agent: flaky,
      user: (t) => scriptedUser(t),
      numTrials: 1,
      maxRetries: 2,
    });
    expect(run.episodes[0].success).toBe(true);
    const down: Policy = {
      id: "down",
      async generate() {
        throw new Error("connection refused");
      },
    };
    const run2 = await runTau2({
      tasks: [byId(v02, "36"), byId(v02, "62")],
      version: "v0.2.0",
      agent: (t) => (t.id === "36" ? down : oracleAgent(t)),
      user: (t) => scriptedUser(t),
      numTrials: 1,
      maxRetries: 1,
    });
    expect(run2.metrics.numTasks).toBe(1);
    expect(run2.metrics.warnings[0]).toMatch(
      /1 simulation\(s\) dropped after infrastructure errors: task 36 trial 0 \(agent: connection refused\)/,
    );
    await expect(
      runTau2({
        tasks: [byId(v02, "36")],
        version: "v0.2.0",
        agent: down,
        user: (t) => scriptedUser(t),
        numTrials: 1,
        maxRetries: 0,
      }),
    ).rejects.toThrow(/all 1 simulations ended in infrastructure errors/);
  });

  it("a failing judge makes the episode an infrastructure error", async () => {
    const t = byId(v1, "36");
    const broken = scriptedPolicy("broken-judge", () => ({ role: "assistant", content: "no json" }));
    const r = await runTau2({
      tasks: [t],
      agent: oracleAgent,
      user: (x) => scriptedUser(x),
      judge: broken,
      numTrials: 1,
      maxRetries: 0,
    }).catch((e) => e);
    expect(String(r)).toMatch(/infrastructure errors \(first: judge: NL judge reply: no JSON object/);
  });
});

describe("data directory", () => {
  it("resolves the shipped data from src/ and from both dist layouts", () => {
    const dir = resolveDataDir();
    expect(dir.endsWith(join("benchmarks", "data", "tau2-retail"))).toBe(true);
    const pkg = join(dir, "..", "..");
    expect(dataDirCandidates(join(pkg, "dist", "tau2"))).toContain(dir);
    expect(dataDirCandidates(join(pkg, "dist"))).toContain(dir);
    expect(dataDirCandidates(join(pkg, "src", "tau2"))).toContain(dir);
    expect(() => resolveDataDir(join(pkg, "nowhere"))).toThrow(/db.json not found/);
  });
});

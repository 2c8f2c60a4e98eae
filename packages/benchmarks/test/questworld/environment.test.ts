// The Environment contract: budget, malformed calls and aborts, end states, observations.

import type { Action, Environment } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  type CallResult,
  DEFAULT_LIMITS,
  QuestworldConfigError,
  QuestworldEnvironment,
  QuestworldEpisodeError,
  type QuestworldState,
  QuestworldStateError,
  SPEC_LIMITS,
  seededStart,
} from "../../src/questworld/index.js";
import { act, action } from "./helpers.js";

const results = (info: Record<string, unknown> | undefined) => info!.results as CallResult[];

describe("QuestworldEnvironment", () => {
  it("is an @kiln/rollout Environment over plain-JSON states", () => {
    const env: Environment<QuestworldState> = new QuestworldEnvironment();
    expect(env.id).toBe("questworld");
    expect(env.tools()).toHaveLength(13);
    env.reset({ seed: 0 });
    expect(JSON.parse(JSON.stringify(env.getState()))).toEqual(env.getState());
  });

  it("resets to the archetype's start with a system prompt and the first hint", () => {
    const env = new QuestworldEnvironment({ archetype: "herbalist" });
    const r = env.reset({ seed: 4 });
    expect(r.messages.map((m) => m.role)).toEqual(["system", "user"]);
    expect(r.messages[0].content).toContain("herbalist");
    expect(r.messages[1].content).toContain("Warden Oda");
    const s = env.getState();
    expect(s).toMatchObject({
      archetype: "herbalist",
      place: "village",
      coins: 10,
      inventory: ["sickle"],
      status: "running",
    });
    expect(s.limits).toEqual(DEFAULT_LIMITS);
    expect(env.reset({ seed: 4, archetype: "angler" }).info).toMatchObject({ archetype: "angler" });
  });

  it("answers each call with a tool message and reports text + payload in info", () => {
    const env = new QuestworldEnvironment();
    env.reset({ seed: 1 });
    const { step, result } = act(env, "move_to", { place: "mill" });
    expect(step.observations).toEqual([{ role: "tool", tool_call_id: "c1", name: "move_to", content: result.text }]);
    expect(result).toMatchObject({ ok: true, malformed: false, payload: { ok: true, place: "mill" } });
    expect(step.info).toMatchObject({ status: "running", counters: { toolCalls: 1, ticks: 2, malformed: 0 } });
    expect(step.reward).toBe(0);
  });

  it("rewards each stage reached", () => {
    const env = new QuestworldEnvironment();
    env.reset({ seed: 1 });
    act(env, "talk_to", { npc: "oda" });
    const { step } = act(env, "accept_quest", { quest: "timber_for_the_mill" });
    expect(step.reward).toBe(1);
    expect(step.info).toMatchObject({ stagesReached: 1, stages: { timber_for_the_mill: 1 } });
    expect(env.score()).toMatchObject({ stages: 1, timber_for_the_mill: 1, finished: 0 });
  });

  it("a refused call is an observation that costs one call and no ticks, and is not malformed", () => {
    const env = new QuestworldEnvironment();
    env.reset({ seed: 1 });
    const { result } = act(env, "gather", { resource: "oak" });
    expect(result.ok).toBe(false);
    expect(result.malformed).toBe(false);
    expect(result.text).toMatch(/^Error:/);
    expect(env.getState().counters).toMatchObject({ toolCalls: 1, ticks: 0, errors: 1, malformed: 0 });
  });

  it("counts unknown tools, schema violations, unparseable calls and empty turns as malformed", () => {
    const env = new QuestworldEnvironment();
    env.reset({ seed: 1 });
    const unknown = act(env, "teleport", { place: "grove" }).result;
    expect(unknown).toMatchObject({ malformed: true, payload: { error: { code: "unknown_tool" } } });
    const bad = act(env, "move_to", { place: "castle" }).result;
    expect(bad).toMatchObject({ malformed: true, payload: { error: { code: "bad_arguments" } } });
    expect(bad.text).toContain("place");
    expect(act(env, "move_to", {}).result.text).toContain("place: is required");
    expect(act(env, "drop", { item: "mint", count: "2" }).result.text).toContain("count: must be an integer");
    // Unparseable: present in message.tool_calls but not among the parsed calls.
    const unparsed: Action = {
      message: {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "x", type: "function", function: { name: "observe", arguments: "{oops" } }],
      },
      toolCalls: [],
    };
    const s = env.step(unparsed);
    expect(results(s.info)[0]).toMatchObject({ malformed: true, payload: { error: { code: "unparseable" } } });
    expect(s.observations[0]).toMatchObject({ role: "tool", tool_call_id: "x" });
    // That was the fifth malformed call in a row: the episode is aborted.
    expect(s).toMatchObject({ done: true, info: { status: "aborted" } });
    expect(env.getState().counters).toMatchObject({ malformed: 5, malformedInARow: 5, toolCalls: 5 });
  });

  it("aborts after N malformed calls in a row (default 5); a well-formed call resets the streak", () => {
    const env = new QuestworldEnvironment();
    env.reset({ seed: 1 });
    const empty: Action = { message: { role: "assistant", content: "I think I will look around." }, toolCalls: [] };
    for (let i = 0; i < 4; i++) expect(env.step(empty).done).toBe(false);
    act(env, "observe");
    expect(env.getState().counters.malformedInARow).toBe(0);
    for (let i = 0; i < 4; i++) expect(env.step(empty).observations[0].role).toBe("user");
    const last = env.step(empty);
    expect(last.done).toBe(true);
    expect(last.info).toMatchObject({ status: "aborted" });
    expect(() => env.step(empty)).toThrow(QuestworldEpisodeError);

    const strict = new QuestworldEnvironment({ limits: { malformedInARow: 2 } });
    strict.reset({ seed: 1 });
    strict.step(empty);
    expect(strict.step(empty).done).toBe(true);
  });

  it("ends out of budget at the call limit or the tick limit", () => {
    const env = new QuestworldEnvironment({ limits: { toolCalls: 3 } });
    env.reset({ seed: 1 });
    act(env, "observe");
    act(env, "observe");
    expect(act(env, "observe").step).toMatchObject({ done: true, info: { status: "out_of_budget" } });
    const ticks = new QuestworldEnvironment({ limits: { ticks: 10 } });
    ticks.reset({ seed: 1 });
    act(ticks, "move_to", { place: "pier" });
    expect(act(ticks, "move_to", { place: "village" }).step.done).toBe(true);
    expect(ticks.getState().status).toBe("out_of_budget");
    expect(SPEC_LIMITS).toEqual({ toolCalls: 200, ticks: 2000, malformedInARow: 5 });
  });

  it("runs several calls of one turn in order and skips those after the episode ends", () => {
    const env = new QuestworldEnvironment({ limits: { toolCalls: 2 } });
    env.reset({ seed: 1 });
    const multi: Action = {
      message: { role: "assistant", content: null },
      toolCalls: [
        { id: "a", name: "talk_to", arguments: { npc: "oda" } },
        { id: "b", name: "accept_quest", arguments: { quest: "timber_for_the_mill" } },
        { id: "c", name: "observe", arguments: {} },
      ],
    };
    const s = env.step(multi);
    expect(s.observations.map((o) => o.tool_call_id)).toEqual(["a", "b", "c"]);
    expect(s.reward).toBe(1);
    expect(s.done).toBe(true);
    expect(results(s.info)[2]).toMatchObject({ ok: false, payload: { skipped: true } });
    expect(env.getState().counters.toolCalls).toBe(2);
  });

  it("finishes when all ten stages are reached", () => {
    const env = new QuestworldEnvironment();
    const start = seededStart("angler", 2, {
      place: "lighthouse",
      inventory: ["lighthouse_pie"],
      stages: { timber_for_the_mill: 3, healers_remedy: 3, supper_at_the_lighthouse: 3 },
    });
    env.reset({ seed: 2, state: start });
    const { step } = act(env, "talk_to", { npc: "lund" });
    expect(step).toMatchObject({ done: true, reward: 1, info: { status: "finished", stagesReached: 10 } });
    expect(env.score()).toMatchObject({ stages: 10, finished: 1 });
  });

  it("throws typed errors for misuse", () => {
    expect(() => new QuestworldEnvironment().getState()).toThrow(QuestworldEpisodeError);
    expect(() => new QuestworldEnvironment().step(action("observe"))).toThrow(QuestworldEpisodeError);
    expect(() => new QuestworldEnvironment({ limits: { toolCalls: 0 } })).toThrow(QuestworldConfigError);
    expect(() => new QuestworldEnvironment({ archetype: "wizard" as never })).toThrow(/archetype "wizard"/);
    const env = new QuestworldEnvironment();
    expect(() => env.reset({ seed: 1.5 })).toThrow(QuestworldStateError);
    expect(() => env.reset({ seed: 1, state: { version: 1 } as never })).toThrow(QuestworldStateError);
    const herb = seededStart("herbalist", 1);
    expect(() => env.reset({ seed: 1, state: herb, archetype: "angler" })).toThrow(QuestworldConfigError);
  });
});

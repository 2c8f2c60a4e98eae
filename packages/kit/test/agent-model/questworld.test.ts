import { questworld } from "@kiln/benchmarks";
import { LocalPolicy } from "@kiln/models";
import {
  type EpisodeSpec,
  type Message,
  type Policy,
  type Trajectory,
  episodeSpecs,
  parseToolCalls,
  runEpisodes,
} from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import {
  QUESTWORLD_SCAFFOLD_NOTE,
  QUESTWORLD_TRAIN_SEED_BASE,
  questworldCorpus,
  questworldOpdStart,
  questworldCorpusChars,
} from "../../src/agent-model/questworld-corpus.js";
import {
  QUESTWORLD_WALL_LABEL,
  atQuestworldWall,
  expertWallPath,
  questworldOpdSetup,
} from "../../src/agent-model/questworld-opd.js";
import {
  QUESTWORLD_SKILLS,
  hermesToolCallText,
  questworldPlayerFactory,
} from "../../src/agent-model/questworld-players.js";
import { WindowedPolicy, questworldView, questworldWindow } from "../../src/agent-model/questworld-window.js";
import { scaffoldedTeacher, scoreWithTeacher } from "../../src/recipes/opd-samples.js";
import { chatmlTemplate } from "@kiln/models";
import { tinyChat } from "../../src/recipes/tiny-chat.js";

/** The expert planner's episode from `start` (40 turns) and the turn whose call handed the moonpetals in. */
async function expertToHandIn(start: EpisodeSpec): Promise<{ trajectory: Trajectory; handIn: number }> {
  let env: questworld.QuestworldEnvironment | undefined;
  const run = await runEpisodes({
    makeEnv: () => {
      env = new questworld.QuestworldEnvironment();
      return env;
    },
    policy: questworld.expertPolicy(() => (env as questworld.QuestworldEnvironment).getState()),
    episodes: [start],
    limits: { maxTurns: 40 },
  });
  const trajectory = run.trajectories[0] as Trajectory;
  const handIn = trajectory.turns.findIndex(
    (x) => ((x.info?.stages ?? {}) as Record<string, number>).healers_remedy >= 2,
  );
  return { trajectory, handIn };
}

function conversation(turns: number): Message[] {
  const out: Message[] = [
    { role: "system", content: "sys" },
    { role: "user", content: "opening" },
  ];
  for (let i = 0; i < turns; i++) {
    out.push({
      role: "assistant",
      content: null,
      tool_calls: [{ id: `c${i}`, type: "function", function: { name: "observe", arguments: "{}" } }],
    });
    out.push({ role: "tool", tool_call_id: `c${i}`, content: `result ${i}` });
  }
  return out;
}

/** Records the messages every call sees; generates a fixed call and scores by message count. */
function recordingPolicy(): Policy & { seen: { kind: string; messages: Message[] }[] } {
  const seen: { kind: string; messages: Message[] }[] = [];
  return {
    id: "rec",
    seen,
    async generate(messages) {
      seen.push({ kind: "generate", messages });
      const text = hermesToolCallText({ name: "observe", arguments: {} });
      return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
    },
    async score(messages, completion) {
      seen.push({ kind: "score", messages });
      const n = typeof completion === "string" ? completion.length : completion.length;
      return { tokenIds: [], logprobs: new Array(n).fill(-messages.length) };
    },
  };
}

describe("questworldWindow", () => {
  it("keeps the system prompt, the opening and exactly the last `keep` messages", () => {
    const conv = conversation(10);
    const w = questworldWindow(conv, 4);
    expect(w.map((m) => m.content)).toEqual(["sys", "opening", null, "result 8", null, "result 9"]);
    expect(w[2].tool_calls?.[0].id).toBe("c8");
    expect(questworldWindow(conv, 3, { opening: false }).map((m) => m.content)).toEqual([
      "sys",
      "result 8",
      null,
      "result 9",
    ]);
    // Short conversations pass through whole; windows are idempotent and copies.
    expect(questworldWindow(conv.slice(0, 4), 6)).toEqual(conv.slice(0, 4));
    expect(questworldWindow(w, 4)).toEqual(w);
    w[0].content = "changed";
    expect(conv[0].content).toBe("sys");
    expect(() => questworldWindow(conv, 0)).toThrow(/keep/);
  });

  it("WindowedPolicy generates and scores from the same window, and has score() only when the inner policy does", async () => {
    const inner = recordingPolicy();
    const p = new WindowedPolicy(inner, { keep: 4 });
    const conv = conversation(7);
    await p.generate(conv);
    await p.score!(conv, "abc");
    expect(inner.seen[0].messages).toEqual(questworldWindow(conv, 4));
    expect(inner.seen[1].messages).toEqual(inner.seen[0].messages);
    const noScore = new WindowedPolicy({ id: "g", generate: inner.generate });
    expect(noScore.score).toBeUndefined();
  });

  it("a windowed LocalPolicy re-scores its own sampled tokens with the sampler's log-probs, through OPD's scoring", async () => {
    const chat = tinyChat({ seed: 3 });
    const student = new LocalPolicy({ id: "s", ...chat, defaults: { maxTokens: 12, logprobs: true } });
    const view = questworldView(4);
    const windowed = new WindowedPolicy(student, { keep: 4 });
    const setup = questworldOpdSetup({ maxTurns: 3, keep: 4 });
    const run = await runEpisodes({
      makeEnv: setup.makeEnv,
      policy: windowed,
      episodes: setup.starts(1).slice(0, 1),
      params: { maxTokens: 12, logprobs: true },
      limits: { maxTurns: 5, maxConsecutiveMalformed: 10 },
      concurrency: 1,
    });
    const traj: Trajectory = run.trajectories[0];
    expect(traj.turns.length).toBe(5);
    // The recorded prompt is the window's, not the whole conversation's.
    const last = traj.turns[4];
    const windowIds = student.promptIds(
      questworldWindow(traj.prompt.concat(...traj.turns.slice(0, 4).flatMap((t) => [t.message, ...t.observations])), 4),
      traj.tools,
    );
    expect(last.promptTokenIds).toEqual(windowIds);
    // Teacher = the student itself on the same view: teacher log-probs equal the sampler's.
    const { samples } = await scoreWithTeacher(run.trajectories, student, { view });
    expect(samples.length).toBe(5);
    for (const s of samples) {
      expect(s.teacherLogps.length).toBe(s.samplerLogps.length);
      for (const [i, lp] of s.teacherLogps.entries()) expect(lp).toBeCloseTo(s.samplerLogps[i], 4);
    }
    // Without the view the teacher would condition on more context (a different prompt) late in the episode.
    const unviewed = await scoreWithTeacher(run.trajectories, student);
    const differs = unviewed.samples[4].teacherLogps.some((lp, i) => Math.abs(lp - samples[4].teacherLogps[i]) > 1e-4);
    expect(differs).toBe(true);
    // The scaffolded teacher sees the window plus the note.
    const rec = recordingPolicy();
    await scoreWithTeacher(run.trajectories, scaffoldedTeacher(rec, "NOTE"), { view });
    const seen = rec.seen[4].messages;
    expect(seen[0].content?.endsWith("\nNOTE")).toBe(true);
    expect(seen.length).toBe(2 + 4);
  });
});

describe("questworld players and corpus", () => {
  it("the corpus is deterministic for a seed and differs between seeds", async () => {
    const a = await questworldCorpus({ seed: 5, episodes: 4, turnRate: 0.3 });
    const b = await questworldCorpus({ seed: 5, episodes: 4, turnRate: 0.3 });
    const c = await questworldCorpus({ seed: 6, episodes: 4, turnRate: 0.3 });
    expect(JSON.stringify(a)).toBe(JSON.stringify(b));
    expect(JSON.stringify(a)).not.toBe(JSON.stringify(c));
    expect(a.length).toBeGreaterThan(10);
  });

  it("documents are windowed contexts ending with one valid tool call; only expert documents carry the note", async () => {
    const docs = await questworldCorpus({ seed: 1, episodes: 12, keep: 6, noteRate: 0.5, turnRate: 0.5 });
    const tools = questworld.TOOL_SCHEMAS.map((t) => structuredClone(t));
    const template = chatmlTemplate();
    const skills = new Set(docs.map((d) => d.skill));
    expect(skills.size).toBeGreaterThan(1);
    let noted = 0;
    for (const d of docs) {
      expect(d.game).toBe("questworld");
      const last = d.messages[d.messages.length - 1];
      expect(last.role).toBe("assistant");
      expect(d.messages.length).toBeLessThanOrEqual(2 + 6 + 1);
      expect(d.messages[0].role).toBe("system");
      const parsed = parseToolCalls(d.completion, { tools });
      expect(parsed.issues).toEqual([]);
      expect(parsed.calls.length).toBe(1);
      expect(parsed.calls[0].name).toBe(last.tool_calls?.[0].function.name);
      expect(parsed.calls[0].arguments).toEqual(JSON.parse(last.tool_calls![0].function.arguments));
      // Rendered through the ChatML tool template, the reply is exactly the Hermes completion.
      const rendered = template.render(d.messages, {});
      expect(rendered.endsWith(`<|im_start|>assistant\n${d.completion}<|im_end|>\n`)).toBe(true);
      const hasNote = d.messages[0].content!.includes(QUESTWORLD_SCAFFOLD_NOTE);
      expect(hasNote).toBe(d.noted);
      if (d.noted) {
        expect(d.skill).toBe("expert");
        noted++;
      }
    }
    expect(noted).toBeGreaterThan(0);
    expect(questworldCorpusChars(docs)).toBeGreaterThan(0);
  });

  it("a document's context is the window WindowedPolicy gives at play time", async () => {
    const docs = await questworldCorpus({ seed: 2, episodes: 1, keep: 4, noteRate: 0, wallRate: 1 });
    // Replay the episode's conversation by concatenating contexts is impossible (windows drop
    // messages), so check the invariant instead: each context is its own window and keeps the head.
    for (const d of docs) {
      const context = d.messages.slice(0, -1);
      expect(questworldWindow(context, 4)).toEqual(context);
      expect(context[1].role).toBe("user");
    }
    // Turn t > 2 sees exactly 4 messages after the head, ending with the previous turn's result.
    const late = docs.find((d) => d.turn >= 3)!;
    expect(late.messages.length).toBe(2 + 4 + 1);
    expect(late.messages[late.messages.length - 2].role).toBe("tool");
  });

  it("noisy players score below the expert on the OPD evaluation", async () => {
    const setup = questworldOpdSetup({ seeds: [0, 1, 2] });
    const scores: Record<string, number> = {};
    for (const skill of QUESTWORLD_SKILLS) {
      const e = await setup.evaluate(questworldPlayerFactory(skill, 9));
      scores[skill.name] = e.core3.score.mean;
      expect(Object.keys(e.scores)).toEqual(["seed-0", "seed-1", "seed-2"]);
      expect(e.table?.length).toBe(11);
    }
    expect(scores.expert).toBeGreaterThan(scores["noisy-15"]);
    expect(scores["noisy-15"]).toBeGreaterThanOrEqual(scores["noisy-60"]);
    expect(scores.expert).toBeGreaterThan(scores["noisy-60"] + 3);
  });

  it("OPD starts use training seeds, evaluation seeds are held out", () => {
    const setup = questworldOpdSetup();
    const starts = setup.starts(2);
    expect(starts.length).toBe(6);
    for (const s of starts) expect(s.seed).toBeGreaterThanOrEqual(QUESTWORLD_TRAIN_SEED_BASE);
    expect(setup.starts(2)).toEqual(starts);
    expect(() => questworldOpdSetup({ seeds: [QUESTWORLD_TRAIN_SEED_BASE, 1] })).toThrow(/seed/);
    expect(episodeSpecs(1, 0).length).toBe(1);
  });

  it("seeded wall-state starts: k rollouts per start share its state (at the wall) with their own seeds", () => {
    const one = questworldOpdSetup({ startsPerArchetype: 2 }).starts(1);
    const setup = questworldOpdSetup({ startsPerArchetype: 2, samplesPerStart: 3 });
    const starts = setup.starts(1);
    expect(starts.length).toBe(3 * 2 * 3);
    expect(new Set(starts.map((s) => s.id)).size).toBe(starts.length);
    expect(new Set(starts.map((s) => s.seed)).size).toBe(starts.length);
    // Sample 0 of each start is the start as one sample per start plays it.
    expect(starts.filter((s) => !/-s\d+$/.test(s.id))).toEqual(one);
    for (const s of starts) {
      const state = s.state as questworld.QuestworldState;
      expect(s.seed).toBeGreaterThanOrEqual(QUESTWORLD_TRAIN_SEED_BASE);
      expect(state.place).toBe("apothecary");
      expect(state.quests.timber_for_the_mill.stage).toBe(3);
      expect(state.quests.healers_remedy.stage).toBe(1);
      expect(state.xp.foraging).toBe(questworld.xpForLevel(5));
      const first = starts.find((x) => x.id === s.id.replace(/-s\d+$/, ""));
      expect(s.state).toEqual(first?.state);
    }
    expect(() => questworldOpdSetup({ samplesPerStart: 0 })).toThrow(/samplesPerStart/);
  });

  it("path starts: states on the expert planner's way through the wall, spread up to the hand-in, each continued by the planner to it", async () => {
    const plain = questworldOpdSetup({ startsPerArchetype: 1, samplesPerStart: 2 }).starts(3);
    const setup = questworldOpdSetup({ startsPerArchetype: 1, samplesPerStart: 2, pathStartsPerArchetype: 4 });
    const starts = setup.starts(3);
    expect(setup.starts(3)).toEqual(starts);
    // The wall starts are unchanged; each archetype adds 4 path starts × 2 samples.
    expect(starts.filter((s) => !s.id.startsWith("wall-path-"))).toEqual(plain);
    const path = starts.filter((s) => s.id.startsWith("wall-path-"));
    expect(path.length).toBe(3 * 4 * 2);
    expect(new Set(starts.map((s) => s.seed)).size).toBe(starts.length);
    const calls: number[] = [];
    for (const s of path) {
      const state = s.state as questworld.QuestworldState;
      expect(s.seed).toBeGreaterThanOrEqual(QUESTWORLD_TRAIN_SEED_BASE);
      expect(state.quests.timber_for_the_mill.stage).toBe(3);
      expect(state.quests.healers_remedy.stage).toBe(1);
      calls.push(Number(/-c(\d+)/.exec(s.id)?.[1]));
      expect(state.counters.toolCalls).toBe(calls[calls.length - 1]);
    }
    // Spread: path start i of 4 lies in the i-th quarter of its own way to the hand-in (k calls played of L − 1).
    for (const s of path.filter((x) => !/-s\d+$/.test(x.id))) {
      const [, archetype, i, k] = /^wall-path-(\w+)-r3-(\d+)-c(\d+)$/.exec(s.id) ?? [];
      const length = expertWallPath(questworldOpdStart(archetype as questworld.ArchetypeId, s.seed), s.seed).length;
      expect(length).toBeGreaterThan(4);
      expect(Number(k) - 1).toBeGreaterThanOrEqual(Math.floor((Number(i) * (length - 1)) / 4));
      expect(Number(k) - 1).toBeLessThan(Math.ceil(((Number(i) + 1) * (length - 1)) / 4));
    }
    // From a path start (its own episode seed) the planner hands the moonpetals in within the rest of its way.
    for (const s of path.filter((x) => !/-s\d+$/.test(x.id))) {
      const { handIn } = await expertToHandIn(s);
      const state = s.state as questworld.QuestworldState;
      const full = expertWallPath(questworldOpdStart(state.archetype, s.seed), s.seed);
      expect(handIn).toBe(full.length - 1 - (state.counters.toolCalls as number));
    }
    expect(() => questworldOpdSetup({ pathStartsPerArchetype: -1 })).toThrow(/pathStartsPerArchetype/);
  });

  it("the wall: turns before the moonpetal hand-in are wall turns, and each episode's pass matches the wall table", async () => {
    const { trajectory: t, handIn } = await expertToHandIn(questworldOpdSetup({ startsPerArchetype: 1 }).starts(1)[0]);
    expect(handIn).toBeGreaterThan(3);
    for (let i = 0; i < t.turns.length; i++) expect(atQuestworldWall(t, i)).toBe(i <= handIn);
    // A fresh start (quest 1 not done) is not at the wall.
    const fresh = { ...t, metadata: { resetInfo: { stages: { timber_for_the_mill: 0, healers_remedy: 0 } } } };
    expect(atQuestworldWall(fresh as Trajectory, 0)).toBe(false);

    // Per episode: passed the wall ⇔ reached stage 2 of quest 2; the count is the wall table's row.
    const setup = questworldOpdSetup({ seeds: [0, 1, 2], maxTurns: 40 });
    for (const skill of [QUESTWORLD_SKILLS[0], QUESTWORLD_SKILLS[3]]) {
      const e = await setup.evaluate(questworldPlayerFactory(skill, 9));
      expect(e.wall?.label).toBe(QUESTWORLD_WALL_LABEL);
      const passed = e.wall?.passed ?? {};
      expect(Object.keys(passed).length).toBe(9);
      for (const ep of e.core3.episodes)
        expect(passed[`seed-${ep.seed}-${ep.archetype}`]).toBe(ep.stages.healers_remedy >= 2 ? 1 : 0);
      const row = e.table?.find((r) => r[1] === QUESTWORLD_WALL_LABEL);
      expect(row?.[2]).toBe(Object.values(passed).reduce((a, b) => a + b, 0));
      if (skill.epsilon === 0) expect(row?.[2]).toBe(9);
    }
  });
});

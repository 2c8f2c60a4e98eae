import { questworld } from "@kiln/benchmarks";
import { type Message, type Policy, type Trajectory, parseToolCalls, runEpisodes } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { questworldOpdStart } from "../../src/agent-model/questworld-corpus.js";
import { atQuestworldWall } from "../../src/agent-model/questworld-opd.js";
import {
  QUESTWORLD_SKILLS,
  hermesToolCallText,
  questworldPlayer,
  toolCallGeneration,
} from "../../src/agent-model/questworld-players.js";
import {
  PrivilegedQuestworldEnvironment,
  QUESTWORLD_EXPERT_NOTE_PREFIX,
  expertCallBeforeTurn,
  noteGuidedTeacher,
  questworldExpertNote,
  questworldPrivilegedCorpus,
  splitExpertNote,
  questworldTeacherPrompt,
} from "../../src/agent-model/questworld-privileged.js";
import { questworldWindow } from "../../src/agent-model/questworld-window.js";
import { scoreWithTeacher } from "../../src/recipes/opd-samples.js";
import { reproConfig } from "../../src/repro/config.js";
import { questworldReproSetup } from "../../src/repro/questworld-setup.js";
import { conversationBatch } from "../../src/trainer/chat-batches.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";
import { LocalPolicy } from "@kiln/models";

/** The call in the privileged note at the end of `messages` (what a model that copies the note would make). */
function noteCall(messages: readonly Message[]): { name: string; arguments: Record<string, unknown> } | null {
  const last = messages[messages.length - 1];
  if (last?.role !== "system" || !last.content?.startsWith(QUESTWORLD_EXPERT_NOTE_PREFIX)) return null;
  const call = parseToolCalls(last.content).calls[0];
  return call ? { name: call.name, arguments: call.arguments } : null;
}

const withExpertNoteOf = (messages: Message[], call: Parameters<typeof questworldExpertNote>[0]): Message[] => [
  ...messages,
  { role: "system", content: questworldExpertNote(call) },
];

/** A "teacher" that makes exactly the call its note names: the ceiling of a model that learnt to copy it. */
const copier: Policy = {
  id: "note-copier",
  async generate(messages) {
    const turn = messages.filter((m) => m.role === "assistant").length;
    const call = noteCall(messages);
    if (!call) return { message: { role: "assistant", content: "no note" }, text: "no note", finishReason: "stop" };
    return toolCallGeneration(call, turn);
  },
};

describe("questworld's privileged teacher: the expert planner's next call as a note", () => {
  it("the environment reports the expert's call for the state it leaves the agent in, on reset and every step", () => {
    const env = new PrivilegedQuestworldEnvironment({ archetype: "herbalist" });
    const r = env.reset({ seed: 5, state: questworldOpdStart("herbalist", 5) });
    const first = questworld.nextExpertCall(env.getState());
    expect(first).not.toBeNull();
    expect((r.info as { expertNext: unknown }).expertNext).toEqual(first);
    const call = first as questworld.ExpertCall;
    const s = env.step({
      message: toolCallGeneration(call, 0).message,
      toolCalls: [{ id: "call_0", name: call.name, arguments: call.arguments }],
    });
    expect(questworld.nextExpertCall(env.getState())).not.toEqual(first);
    expect((s.info as { expertNext: unknown }).expertNext).toEqual(questworld.nextExpertCall(env.getState()));
  });

  it("the teacher's prompt for a student turn carries the note of that turn's own state, and the notes differ as the state moves", async () => {
    let env: PrivilegedQuestworldEnvironment | undefined;
    const start = questworldOpdStart("woodsman", 11);
    const { trajectories } = await runEpisodes({
      makeEnv: () => {
        env = new PrivilegedQuestworldEnvironment();
        return env;
      },
      // The expert itself plays: its call at each turn is, by construction, the note of that turn's state.
      policy: questworldPlayer(() => (env as PrivilegedQuestworldEnvironment).getState(), {
        skill: QUESTWORLD_SKILLS[0],
        seed: 1,
      }),
      episodes: [{ id: "wall", seed: 11, state: start }],
      limits: { maxTurns: 10 },
      concurrency: 1,
    });
    const traj = trajectories[0];
    expect(traj.turns.length).toBe(10);
    const notes = new Set<string>();
    for (const turn of traj.turns) {
      const prompt = questworldTeacherPrompt(questworldWindow([{ role: "user", content: "x" }]), traj, turn.index);
      const note = prompt[prompt.length - 1];
      expect(note.role).toBe("system");
      const made = turn.message.tool_calls?.[0]?.function;
      expect(note.content).toBe(
        questworldExpertNote({
          name: made?.name as questworld.ToolName,
          arguments: JSON.parse(made?.arguments ?? "{}"),
        }),
      );
      notes.add(note.content ?? "");
    }
    // The route to the moonpetals is several different calls, not one note repeated.
    expect(notes.size).toBeGreaterThan(3);
  });

  it("scoreWithTeacher hands the teacher its privileged prompt, the student's view plus the note of each turn", async () => {
    const seen: Message[][] = [];
    const teacher: Policy = {
      id: "recorder",
      generate: copier.generate,
      async score(messages, completion) {
        seen.push(messages);
        const n = typeof completion === "string" ? 1 : completion.length;
        return { logprobs: new Array(n).fill(-1), tokenIds: [] } as never;
      },
    };
    const traj = {
      episodeId: "e",
      prompt: [
        { role: "system", content: "sys" },
        { role: "user", content: "go" },
      ],
      metadata: { resetInfo: { expertNext: { name: "move_to", arguments: { place: "village" } } } },
      turns: [0, 1].map((index) => ({
        index,
        message: { role: "assistant", content: "x" },
        observations: [{ role: "user", content: `obs ${index}` }],
        promptTokenIds: [1],
        completionTokenIds: [5, 6],
        logprobs: [-1, -1],
        info: { expertNext: { name: "gather", arguments: { resource: "moonpetal" } } },
      })),
    } as unknown as Trajectory;
    await scoreWithTeacher([traj], teacher, { teacherPrompt: questworldTeacherPrompt });
    expect(seen.map((m) => m[m.length - 1].content)).toEqual([
      questworldExpertNote({ name: "move_to", arguments: { place: "village" } }),
      questworldExpertNote({ name: "gather", arguments: { resource: "moonpetal" } }),
    ]);
    expect(seen[1].slice(0, -1).map((m) => m.content)).toEqual(["sys", "go", "x", "obs 0"]);
    // A rollout from a plain environment has no note to rebuild: a clear error, not a guess.
    const plain = { ...traj, metadata: {}, turns: [] } as unknown as Trajectory;
    expect(() => expertCallBeforeTurn(plain, 0)).toThrow(/no expertNext/);
  });

  it("the SFT set relabels every state mixed-skill players visit with the expert's call, off their path too", async () => {
    const docs = await questworldPrivilegedCorpus({ seed: 3, episodes: 6, maxTurns: 16 });
    expect(docs.length).toBeGreaterThan(50);
    const off = docs.filter((d) => !d.playerAgreed);
    expect(off.length).toBeGreaterThan(0);
    for (const d of docs) {
      const reply = d.messages[d.messages.length - 1];
      const call = reply.tool_calls?.[0]?.function;
      expect(reply.role).toBe("assistant");
      expect({ name: call?.name, arguments: JSON.parse(call?.arguments ?? "") }).toEqual(d.expert);
      expect(noteCall(d.messages.slice(0, -1))).toEqual(d.expert);
      expect(d.messages[d.messages.length - 2].content).toContain(hermesToolCallText(d.expert));
    }
    expect(await questworldPrivilegedCorpus({ seed: 3, episodes: 6, maxTurns: 16 })).toEqual(docs);
    await expect(questworldPrivilegedCorpus({ seed: 3, episodes: 0, maxTurns: 16 })).rejects.toThrow(/episodes/);
  });

  it("a teacher that acts on the note passes the wall on every evaluation start (the setup's privileged evaluation)", async () => {
    const c = reproConfig();
    const setup = questworldReproSetup(c);
    const e = await setup.privileged?.evaluateTeacher(copier);
    const passed = Object.values(e?.wall?.passed ?? {});
    expect(passed.length).toBe(c.heldout.questworldSeeds.length * 3);
    expect(passed.every((v) => v === 1)).toBe(true);
  });

  it("a malformed reply records no step: the turn after it is played from the last executed step's state", () => {
    const gather = { name: "gather", arguments: { resource: "moonpetal" } };
    const stages = { timber_for_the_mill: 3, healers_remedy: 1 };
    const traj = {
      episodeId: "m",
      prompt: [],
      metadata: { resetInfo: { expertNext: { name: "move_to", arguments: { place: "grove" } }, stages } },
      turns: [
        { index: 0, info: { expertNext: gather, stages } },
        { index: 1 }, // malformed: not executed, no info
        { index: 2, info: { expertNext: null, stages: { ...stages, healers_remedy: 2 } } },
      ],
    } as unknown as Trajectory;
    expect(expertCallBeforeTurn(traj, 0)).toEqual({ name: "move_to", arguments: { place: "grove" } });
    expect(expertCallBeforeTurn(traj, 1)).toEqual(gather);
    expect(expertCallBeforeTurn(traj, 2)).toEqual(gather);
    expect(expertCallBeforeTurn(traj, 3)).toBeNull();
    expect([0, 1, 2, 3].map((t) => atQuestworldWall(traj, t))).toEqual([true, true, true, false]);
  });

  it("the note-guided teacher reads the conversation without the note and leans towards the noted call", async () => {
    const call: questworld.ExpertCall = { name: "move_to", arguments: { place: "grove" } };
    const convo: Message[] = [
      { role: "system", content: "sys" },
      { role: "user", content: "go" },
    ];
    expect(splitExpertNote(withExpertNoteOf(convo, call))).toEqual({
      messages: convo,
      target: hermesToolCallText(call),
    });
    expect(splitExpertNote(withExpertNoteOf(convo, null))).toEqual({ messages: convo, target: null });
    expect(splitExpertNote(convo)).toEqual({ messages: convo, target: null });
    // A random tiny model guided strongly enough plays exactly the noted call — the note copier the
    // previous test walks past the wall — from a questworld wall start as from any prompt.
    const teacher = noteGuidedTeacher(new LocalPolicy({ ...tinyChat({ seed: 1 }), batching: false }), 80);
    const g = await teacher.generate(withExpertNoteOf(convo, call), undefined, { maxTokens: 80, temperature: 0 });
    expect(g.text).toBe(hermesToolCallText(call));
    const env = new PrivilegedQuestworldEnvironment({ archetype: "angler" });
    const r = env.reset({ seed: 4, state: questworldOpdStart("angler", 4) });
    const expert = questworld.nextExpertCall(env.getState()) as questworld.ExpertCall;
    const atWall = await teacher.generate(withExpertNoteOf(questworldWindow(r.messages), expert), env.tools(), {
      maxTokens: 120,
      temperature: 0,
    });
    expect(atWall.message.tool_calls?.[0]?.function).toEqual({
      name: expert.name,
      arguments: JSON.stringify(expert.arguments),
    });
  });

  it("lossOnLastReply trains on the last assistant reply only", () => {
    const t = tinyChat();
    const codec = { tokenizer: t.tokenizer, template: t.template };
    const messages: Message[] = [
      { role: "user", content: "a" },
      { role: "assistant", content: "first" },
      { role: "user", content: "b" },
      { role: "assistant", content: "second" },
    ];
    const all = conversationBatch(codec, [{ messages }]);
    const last = conversationBatch(codec, [{ messages, lossOnLastReply: true }]);
    const count = (b: typeof all) => Array.from(b.labels.dataSync()).filter((x) => x !== -100).length;
    expect(count(last)).toBeGreaterThan(0);
    expect(count(last)).toBeLessThan(count(all));
  });
});

// OPD's privileged-information teacher on questworld (kit README, "OPD on questworld"): the same
// model as the student, with the scripted expert planner's next call for the current state shown
// in its prompt, after an SFT in the run that teaches it to act on that note. The planner acts from
// any world state (questworld's nextExpertCall re-plans every call), so the note is right on the
// teacher's own states and on the student's alike: no covariate shift, unlike an SFT on the expert's
// own transcripts. The student never sees the note. Its states are recorded in the rollout (the
// environment reports `expertNext` with every reset and step), so the teacher's score of a student
// turn rebuilds the note the teacher would have had there.
import { questworld } from "@kiln/benchmarks";
import {
  type Environment,
  type Message,
  type Policy,
  type ResetResult,
  type StepResult,
  type Trajectory,
  cloneMessages,
  deriveSeed,
  mulberry32,
} from "@kiln/rollout";
import type { LocalPolicy } from "@kiln/models";
import { RecipeError } from "../errors.js";
import { type GuidedPrompt, GuidedPolicy } from "../recipes/guided-teacher.js";
import { QUESTWORLD_SKILLS, type QuestworldSkill, hermesToolCallText, questworldPlayer } from "./questworld-players.js";
import { questworldOpdStart, questworldTrainSeed } from "./questworld-corpus.js";
import { QUESTWORLD_WINDOW_KEEP, questworldWindow } from "./questworld-window.js";

/** The note's first words; the call follows as the Hermes text the model emits. */
export const QUESTWORLD_EXPERT_NOTE_PREFIX = "Expert's next call:";

/**
 * GuidedPolicy's split for the privileged note: the conversation before a trailing note and the
 * noted call's text (the reply the note-guided teacher leans towards); no note, or "none.", no target.
 */
export function splitExpertNote(messages: Message[]): GuidedPrompt {
  const last = messages[messages.length - 1];
  const content = last?.role === "system" && typeof last.content === "string" ? last.content : null;
  if (content === null || !content.startsWith(QUESTWORLD_EXPERT_NOTE_PREFIX)) return { messages, target: null };
  const rest = content.slice(QUESTWORLD_EXPERT_NOTE_PREFIX.length);
  return { messages: messages.slice(0, -1), target: rest.startsWith("\n") ? rest.slice(1) : null };
}

/**
 * The note-guided teacher (`opdTeacher=guided`): `policy` with a bonus of `guidance` nats on every
 * token that continues the call in the privileged note (GuidedPolicy); its prompts are the student's
 * view plus the note (questworldTeacherPrompt, privilegedTeacherFactory), the note itself stripped
 * before the model reads them. Nothing is trained.
 */
export function noteGuidedTeacher(policy: LocalPolicy, guidance: number): GuidedPolicy {
  return new GuidedPolicy(policy, {
    guidance,
    split: splitExpertNote,
    id: `${policy.id}+expert-note(${guidance} nats)`,
  });
}

/** The privileged note for a state whose expert call is `call` (null: the chain is over). */
export function questworldExpertNote(call: questworld.ExpertCall | null): string {
  return call
    ? `${QUESTWORLD_EXPERT_NOTE_PREFIX}\n${hermesToolCallText(call)}`
    : `${QUESTWORLD_EXPERT_NOTE_PREFIX} none.`;
}

/**
 * The teacher's prompt: the (already windowed) conversation with the note as a last system message,
 * right before the reply, where a small model copies from most easily.
 */
export function withExpertNote(messages: readonly Message[], call: questworld.ExpertCall | null): Message[] {
  return [...cloneMessages([...messages]), { role: "system", content: questworldExpertNote(call) }];
}

function expertNextOf(info: unknown): questworld.ExpertCall | null | undefined {
  if (!info || typeof info !== "object" || !("expertNext" in info)) return undefined;
  return (info as { expertNext: questworld.ExpertCall | null }).expertNext;
}

/**
 * Questworld that reports the expert planner's next call for the state it leaves the agent in
 * (`info.expertNext` on reset and on every step), so a rollout carries what the privileged teacher
 * needs to score each of its turns.
 */
export class PrivilegedQuestworldEnvironment extends questworld.QuestworldEnvironment {
  override reset(options: Parameters<questworld.QuestworldEnvironment["reset"]>[0]): ResetResult {
    const r = super.reset(options);
    return { ...r, info: { ...r.info, expertNext: questworld.nextExpertCall(this.getState()) } };
  }

  override step(action: Parameters<questworld.QuestworldEnvironment["step"]>[0]): StepResult {
    const r = super.step(action);
    return { ...r, info: { ...r.info, expertNext: questworld.nextExpertCall(this.getState()) } };
  }
}

/** A makeEnv for OPD rollouts whose turns the privileged teacher can score. */
export function privilegedQuestworldEnv(): Environment {
  return new PrivilegedQuestworldEnvironment();
}

/**
 * The expert's call for the state turn `turn` of `trajectory` was played from: the info of the
 * last executed step before it (a malformed reply is not executed and records none: the state it
 * leaves is the one before it), else the reset's. Throws when the rollout did not record it (played
 * in a plain QuestworldEnvironment): a note guessed from the messages would score the student
 * against the wrong plan.
 */
export function expertCallBeforeTurn(trajectory: Trajectory, turn: number): questworld.ExpertCall | null {
  for (let t = turn - 1; t >= 0; t--) {
    const call = expertNextOf(trajectory.turns[t]?.info);
    if (call !== undefined) return call;
  }
  const call = expertNextOf(trajectory.metadata.resetInfo);
  if (call === undefined)
    throw new RecipeError(
      `questworld privileged teacher: ${trajectory.episodeId} turn ${turn} has no expertNext in its info (play rollouts in PrivilegedQuestworldEnvironment)`,
    );
  return call;
}

/** OpdOptions.teacherPrompt for the privileged teacher: the student's view plus the note for that turn's state. */
export function questworldTeacherPrompt(messages: Message[], trajectory: Trajectory, turn: number): Message[] {
  return withExpertNote(messages, expertCallBeforeTurn(trajectory, turn));
}

/**
 * The privileged teacher at play (evaluation): per episode, `policy` answers from its conversation
 * plus the note for the live state of that episode's environment. Wrap the factory's policies in
 * the questworld window first (questworldOpdSetup.evaluate does), so the note follows the window.
 */
export function privilegedTeacherFactory(policy: Policy): questworld.PolicyFactory {
  return ({ env }) => ({
    id: `${policy.id}+expert-note`,
    generate: (messages, tools, params) =>
      policy.generate(withExpertNote(messages, questworld.nextExpertCall(env.getState())), tools, params),
  });
}

export interface QuestworldPrivilegedCorpusOptions {
  seed: number;
  /** Episodes from the wall start (questworldOpdStart). */
  episodes: number;
  /** Assistant turns per episode at most. */
  maxTurns: number;
  keep?: number;
  /**
   * Who walks the states (default QUESTWORLD_SKILLS): noisy players leave the expert's path the
   * way a model does, and every state they visit is labelled with the expert's call from there.
   */
  skills?: readonly (QuestworldSkill & { weight: number })[];
}

export interface QuestworldPrivilegedDocument {
  skill: string;
  archetype: questworld.ArchetypeId;
  episode: number;
  turn: number;
  /** The expert's call from this state: the note and the reply. */
  expert: questworld.ExpertCall;
  /** Whether the player itself made the expert's call here (false: a state off its own path next). */
  playerAgreed: boolean;
  /** Windowed context + the note + the expert's reply (the loss is on the reply). */
  messages: Message[];
}

/**
 * The privileged teacher's SFT set: players of mixed skill walk seeded wall-start episodes; every
 * state they visit becomes a document whose prompt is the window plus the expert's note and whose
 * reply is the expert's call (DAgger's relabelling, with the planner as the oracle: the states are
 * the players', the labels the expert's). Same options ⇒ the same documents.
 */
export async function questworldPrivilegedCorpus(
  options: QuestworldPrivilegedCorpusOptions,
): Promise<QuestworldPrivilegedDocument[]> {
  const keep = options.keep ?? QUESTWORLD_WINDOW_KEEP;
  const skills = options.skills ?? QUESTWORLD_SKILLS;
  if (!Number.isSafeInteger(options.episodes) || options.episodes < 1)
    throw new RecipeError(`questworldPrivilegedCorpus: episodes must be a positive integer, got ${options.episodes}`);
  if (!Number.isSafeInteger(options.maxTurns) || options.maxTurns < 1)
    throw new RecipeError(`questworldPrivilegedCorpus: maxTurns must be a positive integer, got ${options.maxTurns}`);
  const totalWeight = skills.reduce((a, s) => a + s.weight, 0);
  if (skills.length === 0 || !(totalWeight > 0) || skills.some((s) => !(s.weight >= 0)))
    throw new RecipeError("questworldPrivilegedCorpus: skills need non-negative weights with a positive sum");
  const docs: QuestworldPrivilegedDocument[] = [];
  for (let episode = 0; episode < options.episodes; episode++) {
    const draw = mulberry32(deriveSeed(options.seed, "questworld-privileged", episode));
    const archetype = questworld.ARCHETYPES[episode % questworld.ARCHETYPES.length];
    let r = draw() * totalWeight;
    const skill = skills.find((s) => (r -= s.weight) < 0) ?? skills[skills.length - 1];
    const seed = questworldTrainSeed(options.seed, "questworld-privileged-world", episode);
    const env = new questworld.QuestworldEnvironment({ archetype });
    // The expert's call from each state the player answers from, recorded before the player moves.
    const labels: (questworld.ExpertCall | null)[] = [];
    const player = questworldPlayer(() => env.getState(), {
      skill,
      seed: deriveSeed(options.seed, "questworld-privileged-player", episode),
    });
    const ep = await questworld.runQuestworldEpisode({
      env,
      policy: {
        id: player.id,
        generate: (messages, tools, params) => {
          labels.push(questworld.nextExpertCall(env.getState()));
          return player.generate(messages, tools, params);
        },
      },
      seed,
      archetype,
      state: questworldOpdStart(archetype, seed),
      maxTurns: options.maxTurns,
    });
    let turn = 0;
    ep.messages.forEach((m, i) => {
      if (m.role !== "assistant") return;
      const t = turn++;
      const expert = labels[t];
      if (!expert) return;
      const made = m.tool_calls?.[0]?.function;
      const reply: Message = {
        role: "assistant",
        content: null,
        tool_calls: [
          {
            id: `call_${t}`,
            type: "function",
            function: { name: expert.name, arguments: JSON.stringify(expert.arguments) },
          },
        ],
      };
      docs.push({
        skill: skill.name,
        archetype,
        episode,
        turn: t,
        expert,
        playerAgreed: made?.name === expert.name && made.arguments === JSON.stringify(expert.arguments),
        messages: [...withExpertNote(questworldWindow(ep.messages.slice(0, i), keep), expert), reply],
      });
    });
  }
  return docs;
}

// questworld as an @kiln/rollout Environment (questworld.md, Tools; Determinism).
// Every call costs one tool call against the budget; malformed calls (unparseable,
// unknown tool, schema violation, or a turn with no call) are answered with an error
// observation, counted, and N in a row abort the episode.

import type { Action, Environment, Message, ParsedToolCall, ResetResult, StepResult, ToolSchema } from "@kiln/rollout";
import { type ArchetypeId, isArchetype } from "./archetypes.js";
import { QuestworldConfigError, QuestworldEpisodeError } from "./errors.js";
import { seedPrng } from "./prng.js";
import { QUESTS, type QuestId, QUEST_INFO, STAGES_PER_AGENT, stageCount } from "./quests.js";
import { applyTool, nextStep, stageOf, totalStages } from "./rules.js";
import {
  DEFAULT_LIMITS,
  type EpisodeStatus,
  type Limits,
  type QuestworldState,
  checkSeed,
  cloneState,
  initialState,
  validateState,
} from "./state.js";
import { TOOL_SCHEMAS, isToolName, schemaOf } from "./tools.js";
import { validateArgs } from "./validate-args.js";

export const QUESTWORLD_ENV_ID = "questworld";
/** Bumped whenever rules or numbers change, so scores from different versions are not mixed. */
export const QUESTWORLD_VERSION = "1.0.0";

export interface QuestworldEnvOptions {
  /** Archetype for resets that pass no state and no archetype (default woodsman). */
  archetype?: ArchetypeId;
  /** Overrides of the spec's budget and malformed-call limit for fresh starts. */
  limits?: Partial<Limits>;
}

export interface QuestworldResetOptions {
  seed: number;
  /**
   * Start from this state. Its PRNG stream is kept when `state.rng.seed === seed`
   * (an exact restore); otherwise the stream is restarted from `seed` (a seeded start).
   */
  state?: QuestworldState;
  archetype?: ArchetypeId;
}

/** One call's result, as reported in `StepResult.info.results`. */
export interface CallResult {
  id: string;
  name: string;
  ok: boolean;
  malformed: boolean;
  text: string;
  payload: Record<string, unknown>;
}

/** Stages per quest. */
export type QuestStages = Record<QuestId, number>;

export function questStages(state: QuestworldState): QuestStages {
  const out = {} as QuestStages;
  for (const q of QUESTS) out[q] = stageOf(state, q);
  return out;
}

export function systemPrompt(state: QuestworldState): string {
  return [
    "You are an adventurer in questworld, a small world of places linked by paths.",
    `You play the ${state.archetype}. Progress through three quests in order: ${QUESTS.map((q) => QUEST_INFO[q].title).join(", then ")}.`,
    "Act only by calling tools, one or more per turn. Every call costs one of your",
    `${state.limits.toolCalls} tool calls; moving and working cost ticks (${state.limits.ticks} in all).`,
    "Inventory: 20 slots, items do not stack (coins do). Gathering can fail; levels raise the odds.",
  ].join("\n");
}

export class QuestworldEnvironment implements Environment<QuestworldState> {
  readonly id = QUESTWORLD_ENV_ID;
  readonly version = QUESTWORLD_VERSION;
  private readonly defaultArchetype: ArchetypeId;
  private readonly limits: Limits;
  private state: QuestworldState | null = null;

  constructor(options: QuestworldEnvOptions = {}) {
    if (options.archetype !== undefined && !isArchetype(options.archetype)) {
      throw new QuestworldConfigError(
        `archetype ${JSON.stringify(options.archetype)}: must be one of woodsman, herbalist, angler`,
      );
    }
    this.defaultArchetype = options.archetype ?? "woodsman";
    this.limits = { ...DEFAULT_LIMITS, ...options.limits };
    for (const [k, v] of Object.entries(this.limits)) {
      if (!Number.isSafeInteger(v) || v < 1)
        throw new QuestworldConfigError(`limits.${k} ${v}: must be a positive integer`);
    }
  }

  tools(): ToolSchema[] {
    return structuredClone([...TOOL_SCHEMAS]);
  }

  reset(options: QuestworldResetOptions): ResetResult {
    checkSeed(options.seed);
    let state: QuestworldState;
    if (options.state !== undefined) {
      validateState(options.state);
      if (options.archetype !== undefined && options.archetype !== options.state.archetype) {
        throw new QuestworldConfigError(
          `archetype ${options.archetype}: conflicts with the given state's archetype ${options.state.archetype}`,
        );
      }
      state = cloneState(options.state);
      if (state.rng.seed !== options.seed) state.rng = seedPrng(options.seed);
    } else {
      state = initialState(options.archetype ?? this.defaultArchetype, options.seed, this.limits);
    }
    this.state = state;
    const where = applyTool(cloneState(state), "observe", {}).text;
    const next = QUESTS.filter((q) => stageOf(state, q) < stageCount(q)).map(
      (q) => `${QUEST_INFO[q].title}: ${nextStep(state, q)}`,
    );
    const user = `${where}\nNext: ${next[0] ?? "all quests are finished"}.`;
    const messages: Message[] = [
      { role: "system", content: systemPrompt(state) },
      { role: "user", content: user },
    ];
    return {
      messages,
      info: { archetype: state.archetype, seed: options.seed, stages: questStages(state), status: state.status },
    };
  }

  getState(): QuestworldState {
    return cloneState(this.requireState());
  }

  step(action: Action): StepResult {
    const state = this.requireState();
    if (state.status !== "running") {
      throw new QuestworldEpisodeError(`step: the episode is over (status ${state.status}); call reset first`);
    }
    const observations: Message[] = [];
    const results: CallResult[] = [];
    let reward = 0;

    const entries = callEntries(action);
    if (entries.length === 0) {
      const text = "Error: no tool call found. Reply with a call to one of the tools.";
      this.countMalformed(state);
      results.push({
        id: "",
        name: "",
        ok: false,
        malformed: true,
        text,
        payload: { ok: false, error: { code: "no_tool_call", message: text } },
      });
      observations.push({ role: "user", content: text });
    }
    for (const entry of entries) {
      if (state.status !== "running") {
        const text = `Not executed: the episode ended (${state.status}).`;
        observations.push({ role: "tool", tool_call_id: entry.id, name: entry.name, content: text });
        results.push({
          id: entry.id,
          name: entry.name,
          ok: false,
          malformed: false,
          text,
          payload: { ok: false, skipped: true },
        });
        continue;
      }
      const r = this.runCall(state, entry);
      reward += r.stagesAdvanced;
      results.push(r.result);
      observations.push({ role: "tool", tool_call_id: entry.id, name: entry.name, content: r.result.text });
    }
    return {
      observations,
      reward,
      done: state.status !== "running",
      info: {
        results,
        status: state.status,
        stages: questStages(state),
        stagesReached: totalStages(state),
        counters: { ...state.counters },
      },
    };
  }

  /** Named scores for @kiln/rollout: stages per quest, their total (/10) and whether the chain was finished. */
  score(): Record<string, number> {
    const state = this.requireState();
    return { ...questStages(state), stages: totalStages(state), finished: state.status === "finished" ? 1 : 0 };
  }

  private requireState(): QuestworldState {
    if (!this.state) throw new QuestworldEpisodeError("questworld: call reset before step or getState");
    return this.state;
  }

  private countMalformed(state: QuestworldState): void {
    state.counters.toolCalls++;
    state.counters.malformed++;
    state.counters.malformedInARow++;
    this.settle(state);
  }

  private runCall(state: QuestworldState, entry: CallEntry): { result: CallResult; stagesAdvanced: number } {
    const malformed = (code: string, message: string) => {
      this.countMalformed(state);
      const text = `Error: ${message}`;
      return {
        result: {
          id: entry.id,
          name: entry.name,
          ok: false,
          malformed: true,
          text,
          payload: { ok: false, error: { code, message } },
        },
        stagesAdvanced: 0,
      };
    };
    if (entry.args === null) {
      return malformed("unparseable", `the arguments of ${entry.name || "this call"} are not a JSON object.`);
    }
    if (!isToolName(entry.name)) {
      return malformed(
        "unknown_tool",
        `unknown tool ${JSON.stringify(entry.name)}; the tools are ${TOOL_SCHEMAS.map((t) => t.function.name).join(", ")}.`,
      );
    }
    const problems = validateArgs(entry.args, schemaOf(entry.name).function.parameters);
    if (problems.length > 0) return malformed("bad_arguments", `${entry.name}: ${problems.join("; ")}.`);

    const out = applyTool(state, entry.name, entry.args);
    state.counters.toolCalls++;
    state.counters.malformedInARow = 0;
    state.counters.ticks += out.ticks;
    if (!out.ok) state.counters.errors++;
    this.settle(state);
    return {
      result: { id: entry.id, name: entry.name, ok: out.ok, malformed: false, text: out.text, payload: out.payload },
      stagesAdvanced: out.stagesAdvanced,
    };
  }

  /** End conditions after each call; a finished chain wins over an exhausted budget. */
  private settle(state: QuestworldState): void {
    const status: EpisodeStatus =
      totalStages(state) >= STAGES_PER_AGENT
        ? "finished"
        : state.counters.malformedInARow >= state.limits.malformedInARow
          ? "aborted"
          : state.counters.toolCalls >= state.limits.toolCalls || state.counters.ticks >= state.limits.ticks
            ? "out_of_budget"
            : "running";
    state.status = status;
  }
}

interface CallEntry {
  id: string;
  name: string;
  /** null when the call's arguments could not be parsed. */
  args: Record<string, unknown> | null;
}

/**
 * The calls of an action in message order. A call present in `message.tool_calls` but
 * missing from the parsed `toolCalls` failed to parse upstream: it is kept as unparseable.
 */
function callEntries(action: Action): CallEntry[] {
  const parsed = new Map<string, ParsedToolCall>();
  for (const c of action.toolCalls) parsed.set(c.id, c);
  const out: CallEntry[] = [];
  const seen = new Set<string>();
  for (const tc of action.message.tool_calls ?? []) {
    const p = parsed.get(tc.id);
    seen.add(tc.id);
    if (p) out.push({ id: p.id, name: p.name, args: isObject(p.arguments) ? p.arguments : null });
    else out.push({ id: tc.id, name: tc.function?.name ?? "", args: null });
  }
  for (const c of action.toolCalls) {
    if (!seen.has(c.id)) out.push({ id: c.id, name: c.name, args: isObject(c.arguments) ? c.arguments : null });
  }
  return out;
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

// Scripted questworld players of graded skill for the embedded agent model's corpus: the expert
// planner, and noisy experts that with probability ε per turn make a plausible wrong call instead
// (a repeat of their previous call, a move to the wrong place, a needless look-up, or a random tool
// with schema-valid arguments). A model that imitates the mixture plays like the mixture: well
// enough to make progress, badly enough to leave room for OPD. Every reply is what a model would
// emit: an assistant message with one tool call, and the same call as Hermes `<tool_call>` text.
import { questworld } from "@kiln/benchmarks";
import { type Generation, type Message, type Policy, deriveSeed, formatToolCall, mulberry32 } from "@kiln/rollout";
import { RecipeError } from "../errors.js";

export interface QuestworldSkill {
  /** Recorded on corpus documents ("expert", "noisy-15", …). */
  name: string;
  /** Probability per turn of a wrong call instead of the expert's. */
  epsilon: number;
}

/** The default skill ladder; `weight` is each skill's share of corpus episodes. */
export const QUESTWORLD_SKILLS: readonly (QuestworldSkill & { weight: number })[] = [
  { name: "expert", epsilon: 0, weight: 0.35 },
  { name: "noisy-15", epsilon: 0.15, weight: 0.3 },
  { name: "noisy-35", epsilon: 0.35, weight: 0.2 },
  { name: "noisy-60", epsilon: 0.6, weight: 0.15 },
];

export interface PlayerCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** The Hermes/Qwen3 text of one tool call, as CHATML_TOOL_TEMPLATE renders it and the rollout parser reads it. */
export function hermesToolCallText(call: PlayerCall): string {
  return formatToolCall({ name: call.name, arguments: JSON.stringify(call.arguments) });
}

/** An assistant reply carrying `call`; ids number the assistant turns, so a conversation replays identically. */
export function toolCallGeneration(call: PlayerCall, turn: number): Generation {
  const message: Message = {
    role: "assistant",
    content: null,
    tool_calls: [
      {
        id: `call_${turn}`,
        type: "function",
        function: { name: call.name, arguments: JSON.stringify(call.arguments) },
      },
    ],
  };
  return { message, text: hermesToolCallText(call), finishReason: "tool_calls" };
}

const LOOKUPS = ["observe", "inventory", "skills", "quest_log"] as const;
type Rng = () => number;
const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)];

/** A schema-valid call to a uniformly chosen tool (counts 1–3). */
function randomCall(rng: Rng): PlayerCall {
  const tool = pick(rng, questworld.TOOL_SCHEMAS);
  const params = tool.function.parameters as {
    properties?: Record<string, Record<string, unknown>>;
    required?: string[];
  };
  const required = new Set(params.required ?? []);
  const args: Record<string, unknown> = {};
  for (const [name, p] of Object.entries(params.properties ?? {})) {
    if (!required.has(name) && rng() < 0.5) continue;
    if (Array.isArray(p.enum)) args[name] = pick(rng, p.enum);
    else if (p.type === "integer") args[name] = 1 + Math.floor(rng() * 3);
  }
  return { name: tool.function.name, arguments: args };
}

/** A plausible mistake for a player whose expert call would be `expert` after `previous`. */
export function wrongCall(rng: Rng, expert: PlayerCall, previous: PlayerCall | null): PlayerCall {
  const kind = rng();
  if (kind < 0.3 && previous) return { name: previous.name, arguments: { ...previous.arguments } };
  if (kind < 0.55) {
    const target = expert.name === "move_to" ? expert.arguments.place : undefined;
    return {
      name: "move_to",
      arguments: {
        place: pick(
          rng,
          questworld.PLACES.filter((p) => p !== target),
        ),
      },
    };
  }
  if (kind < 0.75) return { name: pick(rng, LOOKUPS), arguments: {} };
  return randomCall(rng);
}

export interface QuestworldPlayerOptions {
  skill: QuestworldSkill;
  /** Seeds the player's own mistakes (the world's randomness is the environment's). */
  seed: number;
  id?: string;
}

/**
 * A scripted player reading the live state through `getState` (the episode's environment). The
 * expert's call is planned from the state every turn, so a noisy player recovers from its mistakes
 * the way the expert recovers from failed gathers.
 */
export function questworldPlayer(getState: () => questworld.QuestworldState, options: QuestworldPlayerOptions): Policy {
  const { skill } = options;
  if (!(skill.epsilon >= 0 && skill.epsilon <= 1))
    throw new RecipeError(`questworld player ${skill.name}: epsilon must be in [0, 1], got ${skill.epsilon}`);
  const rng = mulberry32(options.seed);
  let previous: PlayerCall | null = null;
  return {
    id: options.id ?? `questworld-${skill.name}`,
    async generate(messages: Message[]): Promise<Generation> {
      const turn = messages.filter((m) => m.role === "assistant").length;
      const expert = questworld.nextExpertCall(getState());
      if (!expert) {
        const text = "All done.";
        return { message: { role: "assistant", content: text }, text, finishReason: "stop" };
      }
      // Draw every turn, mistake or not, so one ε's stream does not shift with another's choices.
      const slip = rng() < skill.epsilon;
      const call = slip ? wrongCall(rng, expert, previous) : { name: expert.name, arguments: { ...expert.arguments } };
      previous = call;
      return toolCallGeneration(call, turn);
    },
  };
}

/** A questworld PolicyFactory for `skill`: one player per episode, seeded from the episode. */
export function questworldPlayerFactory(skill: QuestworldSkill, seed = 0): questworld.PolicyFactory {
  return ({ env, archetype, seed: episodeSeed }) =>
    questworldPlayer(() => env.getState(), {
      skill,
      seed: deriveSeed(seed, "player", skill.name, archetype, episodeSeed),
    });
}

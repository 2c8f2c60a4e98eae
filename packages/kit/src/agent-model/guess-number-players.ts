// Scripted guess-number players of three skills, for the embedded agent model's corpus. Each reads the
// feasible range from the conversation alone and answers in the form a model would write
// (a Hermes tool call). The mixture is built so that a model imitating all of it
// plays the *mediocre* strategy when decoding greedily — the stepper is the most common player and
// its opening guess the single most likely one — while the expert's bisection is in the data to be
// found by SFT, preference training or a teacher holding the lesson.
import {
  GUESS_TOOL,
  type Message,
  type RepairFn,
  type ScriptContext,
  type Trajectory,
  formatToolCalls,
  guessNumberHistory,
  messagesBeforeTurn,
} from "@kiln/rollout";

export type GuessSkill = "bisect" | "stepper" | "erratic";

const MALFORMED = [
  '<tool_call>\n{"name": "guess", "arguments": {"n": 50,}}\n</tool_call>',
  '<tool_call>\n{"name": "guess", "arguments": {"number": 50}}\n</tool_call>',
  '<tool_call>\n{"name": "guess", "arguments": {"n": "fifty"}}\n</tool_call>',
];

// The reply is the tool call alone: a sentence repeating the number would only give a small model a
// second place to get it wrong.
function reply(n: number): string {
  return formatToolCalls([{ name: GUESS_TOOL.function.name, arguments: { n } }], "hermes");
}

/** The next guess of a player of `skill` (the text of its reply). */
export function guessPlayerScript(skill: GuessSkill): (ctx: ScriptContext) => string {
  return ({ messages, rng }) => {
    const h = guessNumberHistory(messages);
    if (skill === "bisect") return reply(Math.floor((h.low + h.high) / 2));
    if (skill === "stepper") {
      // Walks up in tens until overshooting, then one by one from the bottom of the range: solves
      // small secrets in time and runs out of turns on large ones.
      if (h.sawLower) return reply(h.low);
      const last = h.guesses.length > 0 ? h.guesses[h.guesses.length - 1] : 0;
      return reply(Math.min(last + 10, h.high));
    }
    const u = rng();
    if (u < 0.1) return MALFORMED[Math.floor(rng() * MALFORMED.length)];
    if (u < 0.2 && h.guesses.length > 0) return reply(h.guesses[h.guesses.length - 1]);
    if (u < 0.4) return reply(1 + Math.floor(rng() * 100));
    return reply(h.low + Math.floor(rng() * (h.high - h.low + 1)));
  };
}

/** The corpus mixture: the stepper most common, then the expert, then the erratic player. */
export const GUESS_SKILL_MIX: Readonly<Record<GuessSkill, number>> = { stepper: 0.45, bisect: 0.3, erratic: 0.25 };

export function pickSkill<S extends string>(mix: Readonly<Record<S, number>>, u: number): S {
  let acc = 0;
  const entries = Object.entries(mix) as [S, number][];
  for (const [skill, w] of entries) {
    acc += w;
    if (u < acc) return skill;
  }
  return entries[entries.length - 1][0];
}

function guessOf(reply: Message): number | null {
  const call = reply.tool_calls?.[0];
  if (!call || call.function.name !== GUESS_TOOL.function.name) return null;
  try {
    const n = JSON.parse(call.function.arguments).n;
    return Number.isInteger(n) ? n : null;
  } catch {
    return null;
  }
}

/**
 * Guess-number's rules for ARP's diagnosers and its repair. An invalid move is a guess the feedback
 * already ruled out (outside the range still possible) or no readable guess at all; the repair — the
 * chosen reply of a turn-local pair — is the bisecting expert's guess for the same conversation.
 */
export function guessNumberDiagnose(): {
  invalidMove: (reply: Message, traj: Trajectory, turn: number) => boolean;
  repair: RepairFn;
} {
  return {
    invalidMove: (reply, traj, turn) => {
      const n = guessOf(reply);
      if (n === null) return true;
      const h = guessNumberHistory(messagesBeforeTurn(traj, turn));
      return n < h.low || n > h.high;
    },
    repair: (prompt, failing) => {
      const h = guessNumberHistory(prompt);
      const n = Math.floor((h.low + h.high) / 2);
      const id = failing.message.tool_calls?.[0]?.id ?? `call_${failing.index}`;
      return {
        role: "assistant",
        content: failing.message.tool_calls?.length ? failing.message.content : null,
        tool_calls: [
          { id, type: "function", function: { name: GUESS_TOOL.function.name, arguments: JSON.stringify({ n }) } },
        ],
      };
    },
  };
}

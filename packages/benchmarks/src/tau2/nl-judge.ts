import type { Policy } from "@kiln/rollout";
import { Tau2Error } from "./errors.js";
import type { Tau2Message } from "./trajectory.js";

// NL assertions graded by a judge LLM (tau2 evaluator/evaluator_nl_assertions.py; spec §5.4):
// the judge sees the whole trajectory as `role: content` lines (a tool-call turn renders as
// `assistant: None`, tool results included) and the assertion list, and answers JSON
// {"results":[{"expectedOutcome","reasoning","metExpectation"}]}. The component is 1 only if
// every assertion is met. The prompt wording is ours; upstream's default judge is
// gpt-4.1-2025-04-14 at temperature 0.

export interface NlAssertionCheck {
  assertion: string;
  met: boolean;
  reasoning: string;
}

export const NL_JUDGE_SYSTEM_PROMPT = `You are grading a customer-service conversation between a user and an agent.
You are given the conversation and a list of expected outcomes. For each expected outcome, decide whether the agent's behaviour in the conversation met it.

Answer with JSON only, in this format:
{"results": [{"expectedOutcome": "<the outcome, verbatim>", "reasoning": "<short justification>", "metExpectation": true or false}]}
Give exactly one result per expected outcome, in the given order.`;

/** The trajectory as upstream renders it for the judge. */
export function renderTrajectoryForJudge(messages: readonly Tau2Message[]): string {
  return messages
    .filter((m) => m.role !== "system")
    .map((m) => `${m.role}: ${m.content === null || m.content === undefined || m.content === "" ? "None" : m.content}`)
    .join("\n");
}

export function nlJudgeUserPrompt(messages: readonly Tau2Message[], assertions: readonly string[]): string {
  return `conversation:\n${renderTrajectoryForJudge(messages)}\n\nexpectedOutcomes:\n${JSON.stringify(assertions)}`;
}

/** Parse the judge's reply; the first JSON object in the text is used. */
export function parseJudgeReply(text: string, assertions: readonly string[]): NlAssertionCheck[] {
  const start = text.indexOf("{");
  const end = text.lastIndexOf("}");
  if (start < 0 || end < start)
    throw new Tau2Error(`NL judge reply: no JSON object in ${JSON.stringify(text.slice(0, 200))}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text.slice(start, end + 1));
  } catch {
    throw new Tau2Error(`NL judge reply: invalid JSON in ${JSON.stringify(text.slice(0, 200))}`);
  }
  const results = (parsed as { results?: unknown }).results;
  if (!Array.isArray(results) || results.length !== assertions.length) {
    throw new Tau2Error(`NL judge reply: "results" must be an array of ${assertions.length} entries`);
  }
  return results.map((r, i) => {
    const rec = r as { metExpectation?: unknown; reasoning?: unknown };
    return { assertion: assertions[i], met: rec.metExpectation === true, reasoning: String(rec.reasoning ?? "") };
  });
}

/** Ask the judge about the assertions; temperature 0 as upstream. */
export async function judgeNlAssertions(
  judge: Policy,
  messages: readonly Tau2Message[],
  assertions: readonly string[],
): Promise<NlAssertionCheck[]> {
  const gen = await judge.generate(
    [
      { role: "system", content: NL_JUDGE_SYSTEM_PROMPT },
      { role: "user", content: nlJudgeUserPrompt(messages, assertions) },
    ],
    undefined,
    { temperature: 0 },
  );
  return parseJudgeReply(gen.message.content ?? gen.text, assertions);
}

import type { GenerateParams, Message, Policy, Trajectory, TurnRecord } from "@kiln/rollout";
import { Tau2RetailEnvironment, type Tau2EnvironmentOptions } from "./environment.js";
import { type RewardInfo, isSuccess } from "./evaluate.js";
import type { Tau2Message, TerminationReason } from "./trajectory.js";

// One tau2 episode: the agent policy against the retail environment (which hosts the user
// simulator), then grading. The agent sees: system prompt (instructions + policy), the fixed
// opening as its own message, then user turns and tool results (tau2 llm_agent.py).
// Besides tau2's own result, the episode is recorded as a @kiln/rollout `Trajectory` (one turn
// per agent reply, with token ids and log-probs when the policy reports them), so trajectory
// files, branching and distillation tools of @kiln/rollout read tau2 runs like any other.

export interface Tau2EpisodeOptions extends Tau2EnvironmentOptions {
  agent: Policy;
  /** Agent sampling; temperature 0 (greedy) by default, seed set from `seed`. */
  agentParams?: GenerateParams;
  seed: number;
  trial?: number;
  /** Episode id of the rollout trajectory record (default `tau2-retail/<task>/trial-<n>`). */
  episodeId?: string;
}

export interface Tau2EpisodeResult {
  taskId: string;
  trial: number;
  seed: number;
  terminationReason: TerminationReason;
  reward: number;
  success: boolean;
  rewardInfo: RewardInfo;
  /** The agent's view of the conversation: system prompt, opening, turns, tool results (with error flags). */
  messages: Tau2Message[];
  steps: number;
  errors: number;
  durationMs: number;
  /** Policy failure that ended the episode, if any. */
  error?: string;
}

export interface Tau2EpisodeRecord {
  result: Tau2EpisodeResult;
  /** The same episode as a @kiln/rollout trajectory record (schema kiln.trajectory v1). */
  trajectory: Trajectory;
}

/** Run one episode; returns tau2's result and the rollout trajectory record. */
export async function runTau2EpisodeRecord(options: Tau2EpisodeOptions): Promise<Tau2EpisodeRecord> {
  const startedAt = Date.now();
  const env = new Tau2RetailEnvironment(options);
  const reset = await env.reset({ seed: options.seed });
  const view: Message[] = [...reset.messages];
  const tools = env.tools();
  const params: GenerateParams = { temperature: 0, ...options.agentParams, seed: options.seed };
  const turns: TurnRecord[] = [];
  let promptTokens = 0;
  let completionTokens = 0;
  let policyError: string | undefined;
  let done = env.terminationReason !== null;
  while (!done) {
    const turnStart = Date.now();
    let gen: Awaited<ReturnType<Policy["generate"]>>;
    try {
      gen = await options.agent.generate(view, tools, params);
    } catch (e) {
      policyError = e instanceof Error ? e.message : String(e);
      await env.abort(`agent: ${policyError}`);
      break;
    }
    const generateMs = Date.now() - turnStart;
    const message = gen.message;
    const res = await env.step({ message, toolCalls: [] });
    view.push(message, ...res.observations);
    done = res.done;
    promptTokens += gen.promptTokenIds?.length ?? 0;
    completionTokens += gen.completionTokenIds?.length ?? 0;
    const turn: TurnRecord = {
      index: turns.length,
      seed: options.seed,
      finishReason: gen.finishReason,
      message,
      action: (message.tool_calls ?? []).map((c) => ({
        id: c.id,
        name: c.function.name,
        arguments: parseArgs(c.function.arguments),
      })),
      toolCallIssues: [],
      observations: res.observations,
      reward: res.reward,
      done: res.done,
      timings: { startedAt: turnStart, generateMs, stepMs: Date.now() - turnStart - generateMs },
    };
    if (gen.promptTokenIds) turn.promptTokenIds = gen.promptTokenIds;
    if (gen.completionTokenIds) turn.completionTokenIds = gen.completionTokenIds;
    if (gen.logprobs) turn.logprobs = gen.logprobs.map((l) => l.logprob);
    if (res.info) turn.info = res.info;
    turns.push(turn);
  }
  const state = env.getState();
  const rewardInfo = env.reward as RewardInfo;
  const durationMs = Date.now() - startedAt;
  const result: Tau2EpisodeResult = {
    taskId: options.task.id,
    trial: options.trial ?? 0,
    seed: options.seed,
    terminationReason: state.terminationReason as TerminationReason,
    reward: rewardInfo.reward,
    success: isSuccess(rewardInfo.reward),
    rewardInfo,
    messages: [{ role: "system", content: env.systemPrompt }, ...state.messages],
    steps: state.stepCount,
    errors: state.numErrors,
    durationMs,
  };
  if (env.error !== null) result.error = env.error;
  const scores: Record<string, number> = { reward: rewardInfo.reward, success: result.success ? 1 : 0 };
  if (rewardInfo.db) scores.db = rewardInfo.db.reward;
  if (rewardInfo.communicate) scores.communicate = rewardInfo.communicate.reward;
  if (rewardInfo.nlAssertions && !("skipped" in rewardInfo.nlAssertions))
    scores.nl_assertions = rewardInfo.nlAssertions.reward;
  const trajectory: Trajectory = {
    schema: "kiln.trajectory",
    version: 1,
    episodeId: options.episodeId ?? `tau2-retail/${options.task.id}/trial-${result.trial}`,
    seed: options.seed,
    policyId: options.agent.id,
    environment: { id: env.id, version: env.version },
    tools,
    prompt: reset.messages,
    turns,
    outcome: {
      status: result.terminationReason === "infrastructure_error" ? "error" : "done",
      totalReward: result.reward,
      score: result.reward,
      scores,
    },
    stats: {
      turns: turns.length,
      promptTokens,
      completionTokens,
      malformedReplies: 0,
      malformedCalls: {},
      maxMalformedStreak: 0,
    },
    params,
    metadata: {
      benchmark: "tau2-retail",
      taskId: options.task.id,
      trial: result.trial,
      version: options.version ?? "v1.0",
      userPolicyId: options.user.id,
      terminationReason: result.terminationReason,
      steps: result.steps,
      errors: result.errors,
    },
    timings: { startedAt, durationMs },
  };
  if (policyError !== undefined)
    trajectory.outcome.error = { kind: "policy", message: policyError, turn: turns.length };
  return { result, trajectory };
}

/** Run one episode and return tau2's result. */
export async function runTau2Episode(options: Tau2EpisodeOptions): Promise<Tau2EpisodeResult> {
  return (await runTau2EpisodeRecord(options)).result;
}

function parseArgs(text: string): Record<string, unknown> {
  try {
    const v = JSON.parse(text || "{}") as unknown;
    return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

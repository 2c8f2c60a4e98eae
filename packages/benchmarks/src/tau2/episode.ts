import type { GenerateParams, Message, Policy } from "@kiln/rollout";
import { Tau2RetailEnvironment, type Tau2EnvironmentOptions } from "./environment.js";
import { type RewardInfo, isSuccess } from "./evaluate.js";
import type { Tau2Message, TerminationReason } from "./trajectory.js";

// One tau2 episode: the agent policy against the retail environment (which hosts the user
// simulator), then grading. The agent sees: system prompt (instructions + policy), the fixed
// opening as its own message, then user turns and tool results (tau2 llm_agent.py).

export interface Tau2EpisodeOptions extends Tau2EnvironmentOptions {
  agent: Policy;
  /** Agent sampling; temperature 0 (greedy) by default, seed set from `seed`. */
  agentParams?: GenerateParams;
  seed: number;
  trial?: number;
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

export async function runTau2Episode(options: Tau2EpisodeOptions): Promise<Tau2EpisodeResult> {
  const started = Date.now();
  const env = new Tau2RetailEnvironment(options);
  const reset = await env.reset({ seed: options.seed });
  const view: Message[] = [...reset.messages];
  const tools = env.tools();
  const params: GenerateParams = { temperature: 0, ...options.agentParams, seed: options.seed };
  let done = env.terminationReason !== null;
  while (!done) {
    let message: Message;
    try {
      message = (await options.agent.generate(view, tools, params)).message;
    } catch (e) {
      await env.abort(`agent: ${e instanceof Error ? e.message : String(e)}`);
      break;
    }
    const res = await env.step({ message, toolCalls: [] });
    view.push(message, ...res.observations);
    done = res.done;
  }
  const state = env.getState();
  const rewardInfo = env.reward as RewardInfo;
  const out: Tau2EpisodeResult = {
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
    durationMs: Date.now() - started,
  };
  if (env.error !== null) out.error = env.error;
  return out;
}

import type { GenerateParams, Message, Policy } from "@kiln/rollout";
import { FIRST_AGENT_MESSAGE, USER_STOP_TOKENS, loadUserGuidelines, userSystemPrompt } from "./prompts.js";
import type { Tau2Task } from "./tasks.js";

// The user simulator (tau2 src/tau2/user/user_simulator.py): any kiln policy plays the customer
// from the task's scenario under the guidelines. Its model sees the roles flipped: its own past
// messages as `assistant`, the agent's text messages as `user`; agent tool calls and tool
// results are never shown to it. Retail has no user tools.

/** True when a user message ends the episode (###STOP###, ###TRANSFER###, ###OUT-OF-SCOPE###). */
export function isUserStop(content: string | null | undefined): boolean {
  return typeof content === "string" && USER_STOP_TOKENS.some((t) => content.includes(t));
}

export interface UserSimulatorOptions {
  /** Sampling parameters; upstream uses temperature 0 and the trial seed. */
  params?: GenerateParams;
  guidelines?: string;
  dataDir?: string;
}

export class UserSimulator {
  readonly systemPrompt: string;
  /** The simulator's own view: system prompt then flipped turns. */
  private readonly history: Message[];

  constructor(
    readonly policy: Policy,
    readonly task: Tau2Task,
    private readonly options: UserSimulatorOptions = {},
  ) {
    this.systemPrompt = userSystemPrompt(task, options.guidelines ?? loadUserGuidelines(options.dataDir));
    this.history = [{ role: "system", content: this.systemPrompt }];
  }

  /** Messages the simulator's model would be sent next (for inspection and tests). */
  view(): readonly Message[] {
    return this.history;
  }

  /**
   * The user's reply to an agent text message (the first call answers the fixed opening).
   * Returns the text as the simulator produced it; an empty reply is returned as "".
   */
  async reply(agentText: string = FIRST_AGENT_MESSAGE): Promise<string> {
    this.history.push({ role: "user", content: agentText });
    const gen = await this.policy.generate(this.history, undefined, this.options.params);
    const text = gen.message.content ?? "";
    this.history.push({ role: "assistant", content: text });
    return text;
  }
}

import type { Message } from "@kiln/rollout";

// A tau2 trajectory: OpenAI-shaped messages plus upstream's per-message extras.

/** Why an episode ended (tau2 data_model/simulation.py TerminationReason). */
export type TerminationReason =
  | "user_stop"
  | "agent_stop"
  | "max_steps"
  | "too_many_errors"
  | "agent_error"
  | "user_error"
  | "timeout";

/** Only these runs are graded; every other termination scores 0 (evaluator.py). */
export const GRADED_TERMINATIONS: ReadonlySet<TerminationReason> = new Set(["user_stop", "agent_stop"]);

export interface Tau2Message extends Message {
  /** Tool results: whether the tool raised (counts toward max_errors). */
  error?: boolean;
}

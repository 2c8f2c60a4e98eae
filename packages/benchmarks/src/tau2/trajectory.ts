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
  | "timeout"
  /** A policy (agent, user simulator or judge) threw, e.g. its server failed after retries. */
  | "infrastructure_error";

/**
 * Runs ended by a failing model server rather than by the agent's behaviour. Upstream retries
 * them and drops those that still fail before computing metrics (tau2 runner/progress.py).
 */
export const INFRASTRUCTURE_ERROR: TerminationReason = "infrastructure_error";

/** Only these runs are graded; every other termination scores 0 (evaluator.py). */
export const GRADED_TERMINATIONS: ReadonlySet<TerminationReason> = new Set(["user_stop", "agent_stop"]);

export interface Tau2Message extends Message {
  /** Tool results: whether the tool raised (counts toward max_errors). */
  error?: boolean;
}

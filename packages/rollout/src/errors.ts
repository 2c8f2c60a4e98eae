// Typed errors of @kiln/rollout. Each message names the thing and the rule it broke.

/** Base class: every error this package throws on purpose is a RolloutError. */
export class RolloutError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A caller passed options that cannot work (negative limits, empty URL list, ...). */
export class RolloutConfigError extends RolloutError {}

/** An OpenAI-compatible server answered with an error status or an unusable body. */
export class PolicyHttpError extends RolloutError {
  constructor(
    message: string,
    /** HTTP status, or 0 for network errors and timeouts. */
    readonly status: number,
    /** Whether a retry (possibly on another base URL) may succeed. */
    readonly retryable: boolean,
  ) {
    super(message);
  }
}

/** A policy does not implement an optional capability (score, complete). */
export class PolicyCapabilityError extends RolloutError {}

/** A trajectory file or record is corrupt, torn, or of an unsupported schema version. */
export class TrajectoryFileError extends RolloutError {}

/** Replaying a recorded episode did not reproduce its observations (non-deterministic environment). */
export class BranchReplayError extends RolloutError {}

/** A seeded-start record is invalid. */
export class SeededStartError extends RolloutError {}

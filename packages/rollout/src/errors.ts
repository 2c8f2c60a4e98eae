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

/**
 * A policy refuses a request because of what the caller sent (prompt longer than the context,
 * no chat template for a chat request, a token id outside the vocabulary). The OpenAI-compatible
 * server answers it with `status` (default 400) and an OpenAI error body naming `param`.
 */
export class PolicyRequestError extends RolloutError {
  constructor(
    message: string,
    readonly param: string | null = null,
    readonly status = 400,
  ) {
    super(message);
  }
}

/** Generation stopped because its AbortSignal fired (e.g. the HTTP client went away). */
export class GenerationAbortedError extends RolloutError {}

/** A policy does not implement an optional capability (score, complete). */
export class PolicyCapabilityError extends RolloutError {}

/**
 * What went wrong with a trajectory file: `corrupt` (damage that is not a torn tail: bad CRC,
 * bad size field, bytes that do not inflate), `garbage` (bytes that are not a record at all),
 * `too-large` (a record or file beyond the reader's cap), `schema` (a record that is not a
 * trajectory this version reads), `usage` (the writer was misused).
 */
export type TrajectoryFileProblem = "corrupt" | "garbage" | "too-large" | "schema" | "usage";

/** A trajectory file or record is corrupt, torn, too large, or of an unsupported schema version. */
export class TrajectoryFileError extends RolloutError {
  constructor(
    message: string,
    readonly problem: TrajectoryFileProblem = "corrupt",
    /** Byte offset in the file where the damage starts, when known. */
    readonly byteOffset?: number,
    /** 1-based number of the episode (gzip member or line) that is damaged, when known. */
    readonly episode?: number,
  ) {
    super(message);
  }
}

/** Replaying a recorded episode did not reproduce its observations (non-deterministic environment). */
export class BranchReplayError extends RolloutError {}

/** A seeded-start record is invalid. */
export class SeededStartError extends RolloutError {}

/** A trainer configuration or checkpoint that cannot be used, named in the message. */
export class TrainerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TrainerError";
  }
}

/** A step produced a NaN or infinite loss or gradient norm; the weights were not updated. */
export class NonFiniteError extends TrainerError {
  constructor(
    message: string,
    readonly step: number,
    /** The last checkpoint written before the bad step (null when none was). */
    readonly lastGoodCheckpoint: string | null,
  ) {
    super(message);
    this.name = "NonFiniteError";
  }
}

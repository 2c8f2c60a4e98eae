// Typed errors for questworld. In-game mistakes (wrong place, missing item, bad
// arguments) are never thrown: they come back as observations (questworld.md, Tools).
// These classes are for programming errors at the API boundary.

/** Base class of every error questworld throws. */
export class QuestworldError extends Error {
  override name = "QuestworldError";
}

/** A world state (saved, restored or hand-built) breaks a rule of the state format. */
export class QuestworldStateError extends QuestworldError {
  override name = "QuestworldStateError";
}

/** An option passed to the environment, evaluation or runner is invalid. */
export class QuestworldConfigError extends QuestworldError {
  override name = "QuestworldConfigError";
}

/** The environment was used out of order (step before reset, step after the episode ended). */
export class QuestworldEpisodeError extends QuestworldError {
  override name = "QuestworldEpisodeError";
}

/** Base class of every error raised by the clembench port. */
export class ClembenchError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A game instance or experiment lacks a field, or a field has the wrong type. */
export class InstanceError extends ClembenchError {}

/** A shipped resource (instances, templates, word lists) is missing or malformed. */
export class ResourceError extends ClembenchError {}

/** The game master was driven against its protocol (e.g. a player without a context). */
export class GameProtocolError extends ClembenchError {}

/** A scorer could not compute scores from an interactions record (clemcore then writes no scores.json). */
export class ScoringError extends ClembenchError {}

/** A scores.json carries "Played"; clemeval derives it from "Aborted" and refuses duplicates (clemcore PlayedScoreError). */
export class PlayedScoreError extends ClembenchError {}

/** A results directory or scores file does not follow clemcore's layout. */
export class ResultsLayoutError extends ClembenchError {}

/** Bad runner / CLI options. */
export class RunnerOptionsError extends ClembenchError {}

// Typed errors of @kiln/models: each message names the thing and the rule it broke.

export class ModelsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** config.json is missing a field, has a wrong type, or asks for something not implemented. */
export class ModelConfigError extends ModelsError {}

/** config.json names an architecture this package cannot build. */
export class UnsupportedArchitectureError extends ModelConfigError {}

/** Checkpoint tensors do not match the model: missing, unexpected or wrongly shaped keys. */
export class WeightLoadError extends ModelsError {
  constructor(
    message: string,
    readonly missing: string[] = [],
    readonly unexpected: string[] = [],
    readonly mismatched: string[] = [],
  ) {
    super(message);
  }
}

/** A model file that is missing or not valid JSON. */
export class ModelFileError extends ModelsError {}

/** tokenizer.json / tokenizer_config.json missing or unusable. */
export class TokenizerError extends ModelsError {}

/** A chat template that is absent, fails to render, or renders something unusable. */
export class ChatTemplateError extends ModelsError {}

/** Invalid generation or scoring arguments (sampling parameters, prompts, stop strings). */
export class GenerationError extends ModelsError {}

/**
 * A synchronous helper (`generate`, `scoreCompletions`, …) was called where its tensors live in memory the
 * host cannot read without waiting (WebGPU). The message names the async variant that works on every backend.
 */
export class SyncReadError extends ModelsError {
  constructor(
    /** The helper that was called, e.g. "generate". */
    readonly helper: string,
    /** The variant to call instead, e.g. "generateAsync". */
    readonly asyncVariant: string,
    /** The backend whose memory could not be read. */
    readonly backend: string,
  ) {
    super(
      `${helper}() reads tensors synchronously, but backend "${backend}" keeps them in memory the host cannot ` +
        `read without waiting; call \`await ${asyncVariant}(…)\` instead (same arguments and result, every backend)`,
    );
  }
}

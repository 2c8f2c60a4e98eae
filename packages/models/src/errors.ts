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

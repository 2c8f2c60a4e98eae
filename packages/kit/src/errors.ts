// A recipe or the training glue below it was given inputs it cannot use (no data, a bad option); the
// message names both. Kit-wide, so every floor of kit can raise it (docs/ARCHITECTURE.md §Floors).
export class RecipeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RecipeError";
  }
}

/**
 * What a user typed cannot be used (a mistyped command line, a teacher whose tokenizer differs): the CLI
 * prints it with a pointer to `--help` and exits 2. Here, below the CLI, so recipes can raise it too.
 */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

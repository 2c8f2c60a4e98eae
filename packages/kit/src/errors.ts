// A recipe or the training glue below it was given inputs it cannot use (no data, a bad option); the
// message names both. Kit-wide, so every floor of kit can raise it (docs/ARCHITECTURE.md §Floors).
export class RecipeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RecipeError";
  }
}

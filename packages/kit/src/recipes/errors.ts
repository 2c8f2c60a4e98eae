/** A recipe was given inputs it cannot use (no data, a bad option); the message names both. */
export class RecipeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RecipeError";
  }
}

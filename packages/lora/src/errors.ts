/** A LoRA misuse: unknown adapter or target, shape mismatch, merging twice, bad config. */
export class LoraError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LoraError";
  }
}

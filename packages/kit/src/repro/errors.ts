/** A repro run was asked for something it cannot do (a missing model, an unknown ablation). */
export class ReproError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReproError";
  }
}

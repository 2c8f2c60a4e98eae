// Typed errors: each message names the loss, the argument and the rule it broke.

export class LossError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Tensors whose shapes or dtypes do not fit together (logits vs labels, masks, pairs). */
export class LossInputError extends LossError {}

/** An option outside its allowed range (β, ε, clip thresholds, temperature, top-k). */
export class LossOptionError extends LossError {}

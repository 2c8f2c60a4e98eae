// Typed errors: every message names the op and the offending shapes / dtypes / values.

export class TensorError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** Shapes that cannot be combined (broadcasting, matmul inner dims, reshape sizes). */
export class ShapeError extends TensorError {}

/** A dtype an op does not accept (e.g. float math on i32 indices). */
export class DTypeError extends TensorError {}

/** An index outside its range (gather, slice, targets of cross-entropy). */
export class IndexError extends TensorError {}

/** A backend that is unknown, not initialised, or unavailable on this platform. */
export class BackendError extends TensorError {}

/** Misuse of autograd (backward on a non-scalar without a gradient, on a tensor with no graph). */
export class AutogradError extends TensorError {}

export function fmtShape(shape: readonly number[]): string {
  return `[${shape.join(", ")}]`;
}

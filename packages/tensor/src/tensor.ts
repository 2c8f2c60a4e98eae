import { type DType, type StorageArray, allocate, fromFloat32Array, toFloat32Array } from "./dtype.js";
import { DTypeError, ShapeError, fmtShape } from "./errors.js";
import { type Shape, checkShape, sizeOf, stridesOf } from "./shape.js";

/** A node of the autograd tape: the op that made a tensor and how to push a gradient back to its inputs. */
export interface GradNode {
  readonly op: string;
  readonly inputs: readonly Tensor[];
  /** Gradients w.r.t. each input (null where an input needs none). Runs with grad recording off. */
  backward(gradOutput: Tensor): (Tensor | null)[];
}

let nextId = 1;

/**
 * An n-dimensional array in row-major contiguous storage. Reshape-like ops return views
 * that share storage; other ops return fresh tensors. Floats compute in f32; bf16/f16 are
 * storage formats (frozen weights), i32 holds indices.
 */
export class Tensor {
  readonly id = nextId++;
  readonly shape: readonly number[];
  readonly dtype: DType;
  /** Exactly `size` elements, row-major. A view's data is a subarray of its base's storage. */
  readonly data: StorageArray;
  requiresGrad = false;
  grad: Tensor | null = null;
  node: GradNode | null = null;
  name?: string;

  constructor(data: StorageArray, shape: Shape, dtype: DType = "f32") {
    checkShape("Tensor", shape);
    const size = sizeOf(shape);
    if (data.length !== size) {
      throw new ShapeError(`Tensor: data has ${data.length} elements but shape ${fmtShape(shape)} needs ${size}`);
    }
    const expected = dtype === "f32" ? Float32Array : dtype === "i32" ? Int32Array : Uint16Array;
    if (!(data instanceof expected)) {
      throw new DTypeError(`Tensor: dtype ${dtype} needs a ${expected.name}, got ${data.constructor.name}`);
    }
    this.data = data;
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
  }

  get size(): number {
    return this.data.length;
  }

  get rank(): number {
    return this.shape.length;
  }

  /** Row-major strides in elements (storage is always contiguous). */
  get strides(): number[] {
    return stridesOf(this.shape);
  }

  /** The f32 storage; throws for other dtypes (use `.float()` to widen). */
  get f32(): Float32Array {
    if (this.dtype !== "f32") throw new DTypeError(`expected an f32 tensor, got ${this.dtype} ${fmtShape(this.shape)}`);
    return this.data as Float32Array;
  }

  /** Values as a plain f32 array (a copy, widened from bf16/f16/i32). */
  toFloat32Array(): Float32Array {
    return toFloat32Array(this.data, this.dtype);
  }

  toArray(): number[] {
    return Array.from(this.toFloat32Array());
  }

  /** The single value of a one-element tensor. */
  item(): number {
    if (this.size !== 1)
      throw new ShapeError(`item: tensor of shape ${fmtShape(this.shape)} has ${this.size} elements, not 1`);
    return this.dtype === "f32" || this.dtype === "i32" ? this.data[0] : this.toFloat32Array()[0];
  }

  /** A tensor sharing this storage with no autograd history. */
  detach(): Tensor {
    return new Tensor(this.data, this.shape, this.dtype);
  }

  /** Marks a leaf as trainable (returns this for chaining). */
  requireGrad(flag = true): this {
    if (flag && this.dtype !== "f32")
      throw new DTypeError(`requireGrad: only f32 tensors can require grad, got ${this.dtype}`);
    this.requiresGrad = flag;
    return this;
  }

  /** A deep copy of the values (no history). */
  clone(): Tensor {
    return new Tensor(this.data.slice() as StorageArray, this.shape, this.dtype);
  }

  /** Convert storage dtype (no gradient flows through a dtype change to bf16/f16/i32). */
  to(dtype: DType): Tensor {
    if (dtype === this.dtype) return this;
    const values = toFloat32Array(this.data, this.dtype);
    return new Tensor(fromFloat32Array(values, dtype), this.shape, dtype);
  }

  toString(): string {
    const preview = Array.from(this.toFloat32Array().subarray(0, 8), (v) => Number(v.toPrecision(5)));
    return `Tensor(${this.dtype} ${fmtShape(this.shape)}${this.requiresGrad ? " grad" : ""}) [${preview.join(", ")}${this.size > 8 ? ", …" : ""}]`;
  }
}

export function isTensor(x: unknown): x is Tensor {
  return x instanceof Tensor;
}

/** A fresh zero-filled tensor. */
export function emptyLike(shape: Shape, dtype: DType = "f32"): Tensor {
  return new Tensor(allocate(dtype, sizeOf(shape)), shape, dtype);
}

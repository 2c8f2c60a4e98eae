import { activeStorage, kernel } from "./backend.js";
import { jsStorage } from "./backends/js/storage.js";
import { type DType, type StorageArray, toFloat32Array } from "./dtype.js";
import { DTypeError, ShapeError, fmtShape } from "./errors.js";
import { type Shape, checkShape, sizeOf, stridesOf } from "./shape.js";
import { DataSyncError, DisposedError, Storage, type StorageBackend } from "./storage.js";

/** A node of the autograd tape: the op that made a tensor and how to push a gradient back to its inputs. */
export interface GradNode {
  readonly op: string;
  readonly inputs: readonly Tensor[];
  /** Tensors the backward closure reads besides the inputs and the output (kept alive by `tidy`). */
  readonly saved?: readonly Tensor[];
  /** Tensors the op made only for its backward (disposed once the backward ran; kept alive by `tidy` until then). */
  readonly temporaries?: readonly Tensor[];
  /** Gradients w.r.t. each input (null where an input needs none). Runs with grad recording off. */
  backward(gradOutput: Tensor): (Tensor | null)[];
}

let nextId = 1;

// ---- tidy scopes: every tensor made inside a scope is listed in it ----
interface Scope {
  tensors: Tensor[];
}
const scopes: Scope[] = [];

const EXPECTED: Record<DType, new (n: number) => StorageArray> = {
  f32: Float32Array,
  bf16: Uint16Array,
  f16: Uint16Array,
  i32: Int32Array,
};

/**
 * An n-dimensional row-major contiguous array on a backend. It refers to backend-owned `Storage` (shared by
 * views: reshape-likes and narrow on dim 0) at an element `offset`. Floats compute in f32; bf16/f16 are
 * storage formats (frozen weights), i32 holds indices.
 *
 * Host access: `await t.data()` on every backend (a copy); `t.dataSync()` on host-visible backends (js, wasm:
 * the storage itself, no copy — writes go to the tensor); other backends throw DataSyncError.
 */
export class Tensor {
  readonly id = nextId++;
  readonly shape: readonly number[];
  readonly dtype: DType;
  readonly storage: Storage;
  /** First element of this tensor inside `storage`. */
  readonly offset: number;
  readonly size: number;
  requiresGrad = false;
  grad: Tensor | null = null;
  node: GradNode | null = null;
  name?: string;
  private disposedFlag = false;
  private cachedArg: unknown = null;
  private cachedEpoch = -1;
  private cachedBackend: StorageBackend | null = null;

  /**
   * From a host typed array (adopted, not copied: the tensor reads and writes it, on js storage) or from a
   * backend `Storage` handle at an element offset (a view).
   */
  constructor(data: StorageArray | Storage, shape: Shape, dtype: DType = "f32", offset = 0) {
    checkShape("Tensor", shape);
    const size = sizeOf(shape);
    if (data instanceof Storage) {
      if (data.dtype !== dtype)
        throw new DTypeError(`Tensor: storage holds ${data.dtype}, the tensor was given dtype ${dtype}`);
      if (offset < 0 || offset + size > data.length)
        throw new ShapeError(
          `Tensor: a view of ${size} elements at offset ${offset} does not fit storage of ${data.length}`,
        );
      if (data.released) throw new DisposedError(`Tensor: a view of storage that was already disposed`);
      this.storage = data;
    } else {
      if (data.length !== size) {
        throw new ShapeError(`Tensor: data has ${data.length} elements but shape ${fmtShape(shape)} needs ${size}`);
      }
      if (!(data instanceof EXPECTED[dtype])) {
        throw new DTypeError(`Tensor: dtype ${dtype} needs a ${EXPECTED[dtype].name}, got ${data.constructor.name}`);
      }
      this.storage = new Storage(jsStorage, data, dtype, size, false);
      offset = 0;
    }
    this.storage.refs++;
    this.offset = offset;
    this.size = size;
    this.shape = Object.freeze([...shape]);
    this.dtype = dtype;
    if (scopes.length > 0) scopes[scopes.length - 1].tensors.push(this);
  }

  /** A fresh zero-filled tensor on the active backend. */
  static zeros(shape: Shape, dtype: DType = "f32"): Tensor {
    const size = sizeOf(shape);
    const backend = activeStorage();
    return new Tensor(new Storage(backend, backend.alloc(dtype, size), dtype, size, true), shape, dtype);
  }

  /**
   * A fresh zero-filled op output on the active backend. Inside `tidy()` it is ordinary backend storage;
   * outside, a backend with `allocTransient` (wasm) may place it where the garbage collector reclaims it,
   * because code that never disposes would otherwise grow memory the collector cannot see.
   */
  static output(shape: Shape, dtype: DType = "f32"): Tensor {
    const backend = activeStorage();
    if (scopes.length > 0 || !backend.allocTransient) return Tensor.zeros(shape, dtype);
    const size = sizeOf(shape);
    return new Tensor(new Storage(backend, backend.allocTransient(dtype, size), dtype, size, false), shape, dtype);
  }

  /**
   * An op output whose every element the caller's kernel overwrites: placed like `output`, but inside `tidy()`
   * its memory is NOT zeroed (a reused pool block holds whatever was there before). Use `output` where a
   * kernel accumulates into its output or leaves elements unwritten.
   */
  static empty(shape: Shape, dtype: DType = "f32"): Tensor {
    const backend = activeStorage();
    const size = sizeOf(shape);
    if (scopes.length > 0 || !backend.allocTransient) {
      const native = backend.allocEmpty ? backend.allocEmpty(dtype, size) : backend.alloc(dtype, size);
      return new Tensor(new Storage(backend, native, dtype, size, true), shape, dtype);
    }
    return new Tensor(new Storage(backend, backend.allocTransient(dtype, size), dtype, size, false), shape, dtype);
  }

  /** An op-internal tensor holding a copy of `host` (placed like `output`). */
  static outputFrom(host: StorageArray, shape: Shape, dtype: DType = "f32"): Tensor {
    const backend = activeStorage();
    if (!backend.hostVisible) return Tensor.fromHost(host, shape, dtype);
    const t = Tensor.empty(shape, dtype);
    t.dataSync().set(host);
    return t;
  }

  /** A tensor holding `host` on the active backend (js adopts the array; wasm and devices copy it in). */
  static fromHost(host: StorageArray, shape: Shape, dtype: DType = "f32"): Tensor {
    const backend = activeStorage();
    if (backend === jsStorage) return new Tensor(host, shape, dtype);
    if (host.length !== sizeOf(shape))
      throw new ShapeError(
        `Tensor: data has ${host.length} elements but shape ${fmtShape(shape)} needs ${sizeOf(shape)}`,
      );
    if (!(host instanceof EXPECTED[dtype]))
      throw new DTypeError(`Tensor: dtype ${dtype} needs a ${EXPECTED[dtype].name}, got ${host.constructor.name}`);
    const native = backend.upload(host, dtype);
    return new Tensor(new Storage(backend, native, dtype, host.length, !backend.adoptsUploads), shape, dtype);
  }

  get rank(): number {
    return this.shape.length;
  }

  /** Row-major strides in elements (storage is always contiguous). */
  get strides(): number[] {
    return stridesOf(this.shape);
  }

  /** The backend that owns this tensor's memory. */
  get backend(): string {
    return this.storage.backend.name;
  }

  get isDisposed(): boolean {
    return this.disposedFlag;
  }

  /**
   * The kernel argument for this tensor on its own backend (a typed array on js/wasm). Ops use it; it is
   * cached per storage epoch.
   */
  arg(): unknown {
    if (this.disposedFlag || this.storage.released) this.throwDisposed();
    const backend = this.storage.backend;
    if (this.cachedEpoch !== backend.epoch || this.cachedBackend !== backend) {
      this.cachedArg = backend.view(this.storage.native, this.dtype, this.offset, this.size);
      this.cachedEpoch = backend.epoch;
      this.cachedBackend = backend;
    }
    return this.cachedArg;
  }

  private throwDisposed(): never {
    throw new DisposedError(
      `tensor ${this.name ?? `#${this.id}`} ${this.dtype} ${fmtShape(this.shape)} was used after dispose()` +
        " (or after the tidy() that created it ended without returning or keep()ing it)",
    );
  }

  /**
   * The values as the storage's own typed array (no copy; writes change the tensor): Float32Array for f32,
   * Uint16Array bits for bf16/f16, Int32Array for i32. Only on host-visible backends (js, wasm); elsewhere
   * a DataSyncError tells you to `await t.data()`. On wasm the view may be invalidated when the heap grows
   * (a non-shared memory): take it again after running ops.
   */
  dataSync(): StorageArray {
    const backend = this.storage.backend;
    if (!backend.hostVisible) {
      throw new DataSyncError(
        `dataSync: tensor ${fmtShape(this.shape)} lives on backend "${backend.name}", whose memory cannot be read ` +
          "without waiting; use `await t.data()` (or `await t.array()`)",
      );
    }
    return this.arg() as StorageArray;
  }

  /** `dataSync()` of an f32 tensor as a Float32Array; throws for other dtypes (use `.float()` to widen). */
  f32Sync(): Float32Array {
    if (this.dtype !== "f32") throw new DTypeError(`expected an f32 tensor, got ${this.dtype} ${fmtShape(this.shape)}`);
    return this.dataSync() as Float32Array;
  }

  /** A host copy of the values in the storage dtype, on every backend. */
  async data(): Promise<StorageArray> {
    if (this.disposedFlag || this.storage.released) this.throwDisposed();
    return this.storage.backend.read(this.storage.native, this.dtype, this.offset, this.size);
  }

  /** Values as a plain f32 array (a copy, widened from bf16/f16/i32). Host-visible backends only. */
  toFloat32Array(): Float32Array {
    return toFloat32Array(this.dataSync(), this.dtype);
  }

  /** `toFloat32Array` on every backend. */
  async toFloat32ArrayAsync(): Promise<Float32Array> {
    const host = await this.data();
    return this.dtype === "f32" ? (host as Float32Array) : toFloat32Array(host, this.dtype);
  }

  toArray(): number[] {
    return Array.from(this.toFloat32Array());
  }

  /** `toArray` on every backend. */
  async array(): Promise<number[]> {
    return Array.from(await this.toFloat32ArrayAsync());
  }

  /** The single value of a one-element tensor (host-visible backends; `itemAsync` everywhere). */
  item(): number {
    if (this.size !== 1)
      throw new ShapeError(`item: tensor of shape ${fmtShape(this.shape)} has ${this.size} elements, not 1`);
    const d = this.dataSync();
    return this.dtype === "f32" || this.dtype === "i32" ? d[0] : this.toFloat32Array()[0];
  }

  async itemAsync(): Promise<number> {
    if (this.size !== 1)
      throw new ShapeError(`item: tensor of shape ${fmtShape(this.shape)} has ${this.size} elements, not 1`);
    return (await this.toFloat32ArrayAsync())[0];
  }

  /** A tensor sharing this storage with no autograd history. */
  detach(): Tensor {
    if (this.disposedFlag) this.throwDisposed();
    return new Tensor(this.storage, this.shape, this.dtype, this.offset);
  }

  /** Marks a leaf as trainable (returns this for chaining). */
  requireGrad(flag = true): this {
    if (flag && this.dtype !== "f32")
      throw new DTypeError(`requireGrad: only f32 tensors can require grad, got ${this.dtype}`);
    this.requiresGrad = flag;
    return this;
  }

  /** A deep copy of the values (no history) on the active backend. */
  clone(): Tensor {
    const out = Tensor.empty(this.shape, this.dtype);
    kernel("copy")(argOf(this) as StorageArray, argOf(out) as StorageArray, {
      shape: [this.size],
      srcOffset: 0,
      srcStrides: [1],
      dstOffset: 0,
      dstStrides: [1],
    });
    return out;
  }

  /** Convert storage dtype (no gradient flows through a dtype change to bf16/f16/i32). */
  to(dtype: DType): Tensor {
    if (dtype === this.dtype) return this;
    const out = Tensor.empty(this.shape, dtype);
    kernel("cast")(argOf(this) as StorageArray, argOf(out) as StorageArray, this.size, this.dtype, dtype);
    return out;
  }

  /**
   * Free this tensor's reference to its storage (the memory goes back to the backend's pool when no view
   * uses it any more). Idempotent. A disposed tensor throws DisposedError on use.
   */
  dispose(): void {
    if (this.disposedFlag) return;
    this.disposedFlag = true;
    this.cachedArg = null;
    this.storage.unref();
  }

  toString(): string {
    if (this.disposedFlag) return `Tensor(${this.dtype} ${fmtShape(this.shape)} disposed)`;
    const head = `Tensor(${this.dtype} ${fmtShape(this.shape)}${this.requiresGrad ? " grad" : ""}`;
    if (!this.storage.backend.hostVisible) return `${head} on ${this.backend})`;
    const preview = Array.from(this.toFloat32Array().subarray(0, 8), (v) => Number(v.toPrecision(5)));
    return `${head}) [${preview.join(", ")}${this.size > 8 ? ", …" : ""}]`;
  }
}

export function isTensor(x: unknown): x is Tensor {
  return x instanceof Tensor;
}

/** A fresh zero-filled tensor on the active backend. */
export function emptyLike(shape: Shape, dtype: DType = "f32"): Tensor {
  return Tensor.zeros(shape, dtype);
}

// ---- memory API ----

/** Dispose tensors (any nesting of arrays / objects of tensors). */
export function dispose(x: unknown): void {
  if (x instanceof Tensor) x.dispose();
  else if (Array.isArray(x)) for (const v of x) dispose(v);
  else if (x !== null && typeof x === "object" && !ArrayBuffer.isView(x))
    for (const v of Object.values(x as Record<string, unknown>)) dispose(v);
}

/**
 * Mark a tensor made inside `tidy` as surviving it (optimizer state, caches). Returns it. Outside a tidy it
 * does nothing.
 */
export function keep<T extends Tensor>(t: T): T {
  for (const scope of scopes) {
    const i = scope.tensors.lastIndexOf(t);
    if (i >= 0) scope.tensors.splice(i, 1);
  }
  return t;
}

function collect(x: unknown, out: Set<Tensor>): void {
  if (x instanceof Tensor) out.add(x);
  else if (Array.isArray(x)) for (const v of x) collect(v, out);
  else if (x !== null && typeof x === "object" && !ArrayBuffer.isView(x) && !(x instanceof Promise))
    for (const v of Object.values(x as Record<string, unknown>)) collect(v, out);
}

/**
 * Run `fn` and dispose every tensor it created, except what it returns (tensors in arrays / plain objects),
 * what it `keep()`s, leaf gradients (`.grad`) written by `backward` inside it, and what the autograd tape of
 * a returned tensor still needs (its inputs and saved tensors, recursively). Nested tidies pass survivors
 * on to the enclosing one. `fn` must be synchronous.
 */
export function tidy<T>(fn: () => T): T {
  const scope: Scope = { tensors: [] };
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (err) {
    scopes.splice(scopes.indexOf(scope), 1);
    for (const t of scope.tensors) t.dispose();
    throw err;
  }
  scopes.splice(scopes.indexOf(scope), 1);
  if (result instanceof Promise) throw new TypeError("tidy: fn must be synchronous (it returned a Promise)");
  const survivors = new Set<Tensor>();
  collect(result, survivors);
  // What the tape of a surviving tensor still reads.
  const stack = [...survivors];
  while (stack.length > 0) {
    const t = stack.pop() as Tensor;
    if (t.grad && !survivors.has(t.grad)) {
      survivors.add(t.grad);
      stack.push(t.grad);
    }
    const node = t.node;
    if (!node) continue;
    for (const list of [node.inputs, node.saved ?? [], node.temporaries ?? []])
      for (const u of list)
        if (!survivors.has(u)) {
          survivors.add(u);
          stack.push(u);
        }
  }
  const parent = scopes.length > 0 ? scopes[scopes.length - 1] : null;
  for (const t of scope.tensors) {
    if (survivors.has(t) || gradOwners.has(t)) parent?.tensors.push(t);
    else t.dispose();
  }
  return result;
}

/** Leaf gradients live as long as their parameter: `backward` registers them here. */
const gradOwners = new WeakSet<Tensor>();

/**
 * Takes `t`'s gradient: returns it and sets `t.grad` to null. The gradient becomes an ordinary tensor, which the
 * enclosing `tidy` frees, instead of a leaf gradient, which outlives every tidy. For backward closures that run a
 * sub-graph on detached copies of their inputs (checkpoint, chunked heads) and hand those copies' gradients on:
 * read with `.grad`, each step's copy stayed allocated for good (an agent-model build grew 3 MiB a step and ran
 * out of wasm memory after 1,100 steps).
 */
export function takeGrad(t: Tensor): Tensor | null {
  const g = t.grad;
  t.grad = null;
  if (g) gradOwners.delete(g);
  return g;
}

/** Used by autograd: `g` is now some leaf's `.grad`, which `tidy` must not free. */
export function markLeafGrad(g: Tensor): void {
  gradOwners.add(g);
}

/** Tensors currently tracked by open tidy scopes (for tests and leak hunting). */
export function trackedTensorCount(): number {
  let n = 0;
  for (const s of scopes) n += s.tensors.length;
  return n;
}

/**
 * The kernel argument for `t` on the ACTIVE backend: its own view when it lives there or when both backends
 * are host-visible (kernels of host-visible backends take each other's typed arrays), else a copy uploaded to
 * the active backend. Memory on a device backend that is not the active one cannot be reached synchronously.
 */
export function argOf(t: Tensor): unknown {
  const own = t.storage.backend;
  const act = activeStorage();
  if (own === act || (own.hostVisible && act.hostVisible)) return t.arg();
  if (own.hostVisible) return Tensor.fromHost(t.dataSync(), t.shape, t.dtype).arg();
  throw new DataSyncError(
    `tensor ${fmtShape(t.shape)} lives on backend "${own.name}" but the active backend is "${act.name}"; ` +
      `move it first: await toBackend(t, "${act.name}")`,
  );
}

/** A copy of `t` on backend storage `target` (async: reading a device may wait). */
export async function copyToStorage(t: Tensor, target: StorageBackend): Promise<Tensor> {
  const host = await t.data();
  const native = target.upload(host, t.dtype);
  const out = new Tensor(new Storage(target, native, t.dtype, t.size, !target.adoptsUploads), t.shape, t.dtype);
  return out;
}

/** `t`'s storage under a new shape of the same size, handing over `t`'s reference (t is disposed). */
export function viewAs(t: Tensor, shape: Shape): Tensor {
  const out = new Tensor(t.storage, shape, t.dtype, t.offset);
  t.dispose();
  return out;
}

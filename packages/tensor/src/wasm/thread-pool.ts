// Worker threads that run kernel exports on the shared WebAssembly.Memory. The main thread hands each
// worker a job through its control block (see worker-source.ts), computes its own share, then blocks
// on Atomics until every worker is done. Node allows Atomics.wait on the main thread; a browser's main
// thread does not, so there the wait degrades to a spin on Atomics.load.
import { BackendError } from "../errors.js";
import {
  ARGS_OFFSET,
  CONTROL_BYTES,
  CTL_ARGC,
  CTL_DONE,
  CTL_OP,
  CTL_SEQ,
  CTL_SPIN,
  MAX_ARGS,
  WORKER_OPS,
  WORKER_SOURCE,
  type WorkerOp,
} from "./worker-source.js";

interface WorkerHandle {
  ctl: Int32Array;
  args: Float64Array;
  terminate(): void;
}

function isNode(): boolean {
  const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
  return typeof proc?.versions?.node === "string";
}

/** Whether this thread may block in Atomics.wait (false on a browser's main thread). */
function canBlock(): boolean {
  try {
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 1, 0);
    return true;
  } catch {
    return false;
  }
}

async function spawnNode(init: object): Promise<WorkerHandle["terminate"]> {
  const wt = await import("node:worker_threads");
  const worker = new wt.Worker(WORKER_SOURCE, { eval: true, workerData: init });
  await new Promise<void>((resolve, reject) => {
    worker.once("message", () => resolve());
    worker.once("error", (err) => reject(new BackendError(`wasm worker failed to start: ${String(err)}`)));
    worker.once("exit", (code) => reject(new BackendError(`wasm worker exited during start (code ${code})`)));
  });
  worker.removeAllListeners();
  // A blocked idle worker must not keep the process alive (tests and scripts exit without dispose()).
  worker.unref();
  return () => void worker.terminate();
}

async function spawnBrowser(init: object): Promise<WorkerHandle["terminate"]> {
  const url = URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "text/javascript" }));
  const worker = new Worker(url);
  try {
    await new Promise<void>((resolve, reject) => {
      worker.onmessage = () => resolve();
      worker.onerror = (event) => reject(new BackendError(`wasm worker failed to start: ${event.message}`));
      worker.postMessage(init);
    });
  } finally {
    URL.revokeObjectURL(url);
  }
  worker.onmessage = null;
  worker.onerror = null;
  return () => worker.terminate();
}

export class ThreadPool {
  private readonly blocking = canBlock();
  private disposed = false;
  private spinMicros = 0;

  private constructor(private readonly workers: WorkerHandle[]) {}

  /** Number of worker threads (the main thread is not counted). */
  get size(): number {
    return this.workers.length;
  }

  static async create(count: number, module: WebAssembly.Module, memory: WebAssembly.Memory): Promise<ThreadPool> {
    const node = isNode();
    const spawned = await Promise.all(
      Array.from({ length: count }, async () => {
        const control = new SharedArrayBuffer(CONTROL_BYTES);
        const init = { module, memory, control };
        const terminate = await (node ? spawnNode(init) : spawnBrowser(init));
        return {
          ctl: new Int32Array(control, 0, 16),
          args: new Float64Array(control, ARGS_OFFSET, MAX_ARGS),
          terminate,
        };
      }),
    );
    return new ThreadPool(spawned);
  }

  /** Starts `op(...args)` on worker `index`; returns at once. */
  start(index: number, op: WorkerOp, args: readonly number[]): void {
    if (this.disposed) throw new BackendError("wasm kernels: used after dispose()");
    const w = this.workers[index];
    if (args.length > MAX_ARGS)
      throw new BackendError(`wasm kernels: ${op} takes ${args.length} arguments, max ${MAX_ARGS}`);
    w.args.set(args);
    w.ctl[CTL_OP] = WORKER_OPS.indexOf(op);
    w.ctl[CTL_ARGC] = args.length;
    Atomics.store(w.ctl, CTL_DONE, 0);
    Atomics.add(w.ctl, CTL_SEQ, 1);
    Atomics.notify(w.ctl, CTL_SEQ);
  }

  /**
   * Microseconds each thread polls before it sleeps: a worker after its job (for the next one), the caller in
   * `join` (for the worker to finish). 0 (the default): both sleep at once. Polling spares the futex wake-up
   * (tens of µs) between the many short jobs of a dense step, at the price of a busy core meanwhile.
   */
  get spin(): number {
    return this.spinMicros;
  }

  setSpin(micros: number): void {
    this.spinMicros = Math.max(0, Math.floor(micros));
    for (const w of this.workers) Atomics.store(w.ctl, CTL_SPIN, this.spinMicros);
  }

  /** Waits for the job started on worker `index`. */
  join(index: number): void {
    const ctl = this.workers[index].ctl;
    if (this.spinMicros > 0 && Atomics.load(ctl, CTL_DONE) === 0) {
      const until = performance.now() + this.spinMicros / 1000;
      while (Atomics.load(ctl, CTL_DONE) === 0 && performance.now() < until) {
        // poll: the worker is about to finish
      }
    }
    if (this.blocking) {
      while (Atomics.load(ctl, CTL_DONE) === 0) Atomics.wait(ctl, CTL_DONE, 0);
    } else {
      while (Atomics.load(ctl, CTL_DONE) === 0) {
        // spin: a browser main thread may not block
      }
    }
    if (Atomics.load(ctl, CTL_DONE) === 2) throw new BackendError(`wasm worker ${index}: kernel trapped`);
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    for (const w of this.workers) {
      w.ctl[CTL_OP] = -1;
      Atomics.add(w.ctl, CTL_SEQ, 1);
      Atomics.notify(w.ctl, CTL_SEQ);
      w.terminate();
    }
  }
}

// The worker source has a browser branch (no `require`/`process`: init arrives as the first message on
// `self`). Node has no Web Worker, so this runs that branch in a worker_thread whose `require`,
// `process` and `self` are shadowed to look like a dedicated browser worker, and drives one job through
// the control block the way thread-pool.ts does.
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";
import { decodeBase64 } from "../../src/wasm/base64.js";
import { WASM_SIMD_SHARED } from "../../src/wasm/kernels.generated.js";
import {
  ARGS_OFFSET,
  CONTROL_BYTES,
  CTL_ARGC,
  CTL_DONE,
  CTL_OP,
  CTL_SEQ,
  MAX_ARGS,
  WORKER_OPS,
  WORKER_SOURCE,
} from "../../src/wasm/worker-source.js";

const BROWSER_SHIM = `
const { parentPort } = require("node:worker_threads");
const self = {
  postMessage: (message) => parentPort.postMessage(message),
  close: () => parentPort.close(),
};
parentPort.once("message", (data) => self.onmessage({ data }));
(function (require, process) {
${WORKER_SOURCE}
})(undefined, undefined);
`;

describe("worker source, browser branch", () => {
  it("starts from a posted init message and runs a gemm job from its control block", async () => {
    const module = await WebAssembly.compile(decodeBase64(WASM_SIMD_SHARED));
    const memory = new WebAssembly.Memory({ initial: 64, maximum: 64, shared: true });
    const control = new SharedArrayBuffer(CONTROL_BYTES);
    const worker = new Worker(BROWSER_SHIM, { eval: true });
    try {
      const ready = new Promise((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
      });
      worker.postMessage({ module, memory, control });
      expect(await ready).toBe("ready");

      // C[2x3] = A[2x2] · B[2x3] at fixed addresses, scratch after them
      const f32 = new Float32Array(memory.buffer);
      const [pa, pb, pc, scratch] = [4096, 4096 + 64, 4096 + 128, 8192];
      f32.set([1, 2, 3, 4], pa / 4);
      f32.set([1, 0, 2, 0, 1, 3], pb / 4);
      const ctl = new Int32Array(control, 0, 16);
      const args = new Float64Array(control, ARGS_OFFSET, MAX_ARGS);
      const job = [pa, pb, pc, 2, 3, 2, 0, 4, 6, 0, 2, scratch, 0, 0];
      args.set(job);
      ctl[CTL_OP] = WORKER_OPS.indexOf("gemm");
      ctl[CTL_ARGC] = job.length;
      Atomics.store(ctl, CTL_DONE, 0);
      Atomics.add(ctl, CTL_SEQ, 1);
      Atomics.notify(ctl, CTL_SEQ);
      expect(Atomics.wait(ctl, CTL_DONE, 0, 10_000)).not.toBe("timed-out");
      expect(Atomics.load(ctl, CTL_DONE)).toBe(1);
      expect(Array.from(f32.subarray(pc / 4, pc / 4 + 6))).toEqual([1, 2, 8, 3, 4, 18]);

      // quit: the browser branch leaves its loop and closes itself
      const exited = new Promise((resolve) => worker.once("exit", resolve));
      ctl[CTL_OP] = -1;
      Atomics.add(ctl, CTL_SEQ, 1);
      Atomics.notify(ctl, CTL_SEQ);
      await exited;
    } finally {
      await worker.terminate();
    }
  });
});

// The worker program, as source text so no separate file has to be resolved by Node, bundlers or
// browsers: Node runs it with `new Worker(code, { eval: true, workerData })`, browsers from a Blob URL
// with the init object posted as the first message.
//
// Protocol (one control SharedArrayBuffer per worker, see thread-pool.ts):
//   Int32 [0] seq   bumped by the main thread for every job (workers Atomics.wait on it)
//   Int32 [1] done  0 = running, 1 = finished, 2 = failed (main thread waits on it)
//   Int32 [2] op    index into OPS below; -1 = quit
//   Int32 [3] argc  number of arguments in the Float64 args area
//   Float64 args from byte 64 on (f64 holds every i32 pointer and f32 scalar exactly)

/** Export names, indexed by op code (embedded into the worker text below). */
export const WORKER_OPS = [
  "",
  "gemm",
  "gemv",
  "rmsnorm",
  "ce_fwd",
  "ce_bwd",
  "attn_fwd",
  "attn_bwd",
  "swiglu_fwd",
  "swiglu_bwd",
  "adamw",
  "softmax_rows",
  "kl_fwd_rows",
  "kl_rev_rows",
  "rope",
  "rmsnorm_bwd",
  "attn_decode_ragged",
  "binary2d",
  "copy4d",
  "bf16_widen",
  "bf16_round",
  "attn_tile_softmax",
  "attn_tile_probs",
  "attn_tile_dscores",
] as const;
export type WorkerOp = (typeof WORKER_OPS)[number];
export const MAX_ARGS = 32;
export const CONTROL_BYTES = 64 + MAX_ARGS * 8;
export const CTL_SEQ = 0;
export const CTL_DONE = 1;
export const CTL_OP = 2;
export const CTL_ARGC = 3;
export const ARGS_OFFSET = 64;

export const WORKER_SOURCE = `"use strict";
function kilnWasmWorker(init, ready) {
  const instance = new WebAssembly.Instance(init.module, { env: { memory: init.memory, log: Math.log } });
  const ex = instance.exports;
  const fns = ${JSON.stringify(WORKER_OPS)}.map((name) => ex[name]);
  const ctl = new Int32Array(init.control, 0, 16);
  const args = new Float64Array(init.control, ${ARGS_OFFSET}, ${MAX_ARGS});
  ready();
  // seq starts at 0; reading it here instead would lose a job posted right after "ready".
  let seen = 0;
  for (;;) {
    Atomics.wait(ctl, ${CTL_SEQ}, seen);
    const seq = Atomics.load(ctl, ${CTL_SEQ});
    if (seq === seen) continue;
    seen = seq;
    const op = ctl[${CTL_OP}];
    if (op < 0) return;
    let status = 1;
    try {
      const argc = ctl[${CTL_ARGC}];
      const a = [];
      for (let i = 0; i < argc; i++) a.push(args[i]);
      fns[op].apply(null, a);
    } catch (e) {
      status = 2;
    }
    Atomics.store(ctl, ${CTL_DONE}, status);
    Atomics.notify(ctl, ${CTL_DONE});
  }
}
if (typeof require === "function" && typeof process === "object") {
  const wt = require("node:worker_threads");
  kilnWasmWorker(wt.workerData, () => wt.parentPort.postMessage("ready"));
} else {
  self.onmessage = (event) => {
    self.onmessage = null;
    kilnWasmWorker(event.data, () => self.postMessage("ready"));
    self.close();
  };
}
`;

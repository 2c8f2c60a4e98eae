// The worker program, as source text so no separate file has to be resolved by Node, bundlers or
// browsers: Node runs it with `new Worker(code, { eval: true, workerData })`, browsers from a Blob URL
// with the init object posted as the first message.
//
// sgemm and attn_groups run sgemmOnMemory and attentionGroupsJob (wasm/attention-groups.ts), embedded below
// by their text.
//
// Protocol (one control SharedArrayBuffer per worker, see thread-pool.ts):
//   Int32 [0] seq   bumped by the main thread for every job (workers Atomics.wait on it)
//   Int32 [1] done  0 = running, 1 = finished, 2 = failed (main thread waits on it)
//   Int32 [2] op    index into OPS below; -1 = quit
//   Int32 [3] argc  number of arguments in the Float64 args area
//   Int32 [4] spin  microseconds the worker polls seq after a job before it sleeps in Atomics.wait (0 = none)
//   Float64 args from byte 64 on (f64 holds every i32 pointer and f32 scalar exactly)

import { attentionGroupsJob, sgemmOnMemory } from "./attention-groups.js";

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
  // Not wasm exports: JS in the worker (see JS_OPS below), for the native backend's BLAS calls.
  "blas_load",
  "sgemm",
  "onednn_load",
  "gemm_bf16",
  "attn_groups",
] as const;
export type WorkerOp = (typeof WORKER_OPS)[number];
/** Worker ops written in JS (not module exports). */
export type JsWorkerOp = "blas_load" | "sgemm" | "onednn_load" | "gemm_bf16" | "attn_groups";
export const MAX_ARGS = 32;
export const CONTROL_BYTES = 64 + MAX_ARGS * 8;
export const CTL_SEQ = 0;
export const CTL_DONE = 1;
export const CTL_OP = 2;
export const CTL_ARGC = 3;
export const CTL_SPIN = 4;
export const ARGS_OFFSET = 64;

/**
 * cblas_sgemm as koffi binds it, on the main thread (backends/native/blas.ts) and in the workers alike: typed
 * arrays, passed by pointer.
 */
export const SGEMM_SIGNATURE =
  "void cblas_sgemm(int, int, int, int, int, int, float, float*, int, float*, int, float, _Inout_ float*, int)";

/** cblas_sgemv as koffi binds it (main thread only: decode's matrix-vector products). */
export const SGEMV_SIGNATURE =
  "void cblas_sgemv(int, int, int, int, float, float*, int, float*, int, float, _Inout_ float*, int)";

/** oneDNN's bf16 GEMM as koffi binds it, on the main thread and in the workers alike. */
export const GEMM_BF16_SIGNATURE =
  "int dnnl_gemm_bf16bf16f32(char, char, int64_t, int64_t, int64_t, float, uint16_t*, int64_t, uint16_t*, int64_t, float, _Inout_ float*, int64_t)";

export const WORKER_SOURCE = `"use strict";
function kilnWasmWorker(init, ready) {
  const instance = new WebAssembly.Instance(init.module, { env: { memory: init.memory, log: Math.log } });
  const ex = instance.exports;
  const names = ${JSON.stringify(WORKER_OPS)};
  const fns = names.map((name) => ex[name]);
  // BLAS through koffi (Node only): blas_load(koffiPath, koffiLen, libPath, libLen) with the paths as UTF-8 in
  // the memory, then sgemm(transA, transB, m, n, k, a, lda, b, ldb, beta, c, ldc) on byte offsets into it,
  // row-major, alpha = 1 (the same library the main thread loaded: dlopen returns the loaded copy).
  let sgemm = null;
  const text = (p, n) => new TextDecoder().decode(new Uint8Array(init.memory.buffer, p, n).slice());
  const view = (buf, p, rows, cols, ld) => new Float32Array(buf, p, rows === 0 ? 0 : (rows - 1) * ld + cols);
  let koffi = null;
  fns[names.indexOf("blas_load")] = (kp, kn, lp, ln) => {
    koffi = require(text(kp, kn));
    sgemm = koffi.load(text(lp, ln)).func(${JSON.stringify(SGEMM_SIGNATURE)});
  };
  // onednn_load(dnnl, dnnlLen, openmp, openmpLen) after blas_load: oneDNN's bf16 GEMM, and this thread's OpenMP
  // team set to one thread (an OpenMP thread count is per calling thread), then gemm_bf16 as sgemm with bf16 A, B.
  let gemmBf16 = null;
  const u16 = (buf, p, rows, cols, ld) => new Uint16Array(buf, p, rows === 0 ? 0 : (rows - 1) * ld + cols);
  fns[names.indexOf("onednn_load")] = (dp, dn, op, on) => {
    gemmBf16 = koffi.load(text(dp, dn)).func(${JSON.stringify(GEMM_BF16_SIGNATURE)});
    koffi.load(text(op, on)).func("void omp_set_num_threads(int)")(1);
  };
  fns[names.indexOf("gemm_bf16")] = (ta, tb, m, n, k, pa, lda, pb, ldb, beta, pc, ldc) => {
    const buf = init.memory.buffer;
    const a = ta === 84 ? u16(buf, pa, k, m, lda) : u16(buf, pa, m, k, lda);
    const b = tb === 84 ? u16(buf, pb, n, k, ldb) : u16(buf, pb, k, n, ldb);
    const status = gemmBf16(ta, tb, m, n, k, 1, a, lda, b, ldb, beta, view(buf, pc, m, n, ldc), ldc);
    if (status !== 0) throw new Error("dnnl_gemm_bf16bf16f32 status " + status);
  };
  ${sgemmOnMemory.toString()}
  fns[names.indexOf("sgemm")] = (...a) => sgemmOnMemory(init.memory.buffer, sgemm, ...a);
  ${attentionGroupsJob.toString()}
  const sgemmAt = fns[names.indexOf("sgemm")];
  fns[names.indexOf("attn_groups")] = (...a) => attentionGroupsJob(a, init.memory.buffer, sgemmAt, ex);
  const ctl = new Int32Array(init.control, 0, 16);
  const args = new Float64Array(init.control, ${ARGS_OFFSET}, ${MAX_ARGS});
  ready();
  // seq starts at 0; reading it here instead would lose a job posted right after "ready".
  let seen = 0;
  for (;;) {
    const spin = ctl[${CTL_SPIN}];
    if (spin > 0 && Atomics.load(ctl, ${CTL_SEQ}) === seen) {
      // Poll a little before sleeping: the next job of a dense step then starts without a futex wake-up.
      const until = performance.now() + spin / 1000;
      // Also stops when spin is set to 0 meanwhile (the caller is about to run a library's own threads).
      while (Atomics.load(ctl, ${CTL_SEQ}) === seen && Atomics.load(ctl, ${CTL_SPIN}) > 0 && performance.now() < until) {}
    }
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

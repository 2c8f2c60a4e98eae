// One decoder measurement in its own process (so peak RSS belongs to one config):
//   tsx --conditions=source bench/decoder-run.ts <js|wasm|native|gpujs> [threads] [reps] [checkpoint 0|1] [relaxed 0|1]
//     [gemmSplit workers|library] [workerSpinMicros]
// native loads OpenBLAS ignoring OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (as the PyTorch peer runs) and reports its core.
// Prints one JSON line: median step times (ms) and peak RSS (MiB). Runs KILN_BENCH_WARMUP steps first (default 1).
import { readFileSync } from "node:fs";
import { warmupFromEnv } from "../../../tooling/src/bench.js";
import * as T from "../src/index.js";
import { decoderLoss, referenceTraining } from "./decoder-model.js";

const [
  backend = "wasm",
  threadsArg = "2",
  repsArg = "3",
  checkpointArg = "0",
  relaxedArg = "1",
  gemmSplit = "workers",
  spinArg,
] = process.argv.slice(2);
const reps = Number(repsArg);
if (backend !== "js")
  await T.initBackend(backend, {
    threads: Number(threadsArg),
    relaxedSimd: relaxedArg === "1",
    ignoreOpenblasEnv: true,
    gemmSplit: gemmSplit as T.GemmSplit,
    workerSpinMicros: spinArg === undefined ? undefined : Number(spinArg),
  });
const { cfg, params, ids, opt, clearGrads } = referenceTraining();
const checkpointLayers = checkpointArg === "1";

const fwdBwd: number[] = [];
const step: number[] = [];
const cpu: number[] = [];
let lastLoss = 0;
const warmup = warmupFromEnv();
for (let r = 0; r < reps + warmup; r++) {
  // The step runs inside tidy(): its activations are freed (and their memory reused) when it returns, and on
  // wasm they stay resident in the kernels' memory instead of being copied in and out per kernel call.
  clearGrads();
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let t1 = t0;
  const loss = T.tidy(() => {
    const l = decoderLoss(params, cfg, ids, checkpointLayers);
    T.backward(l);
    t1 = performance.now();
    opt.step();
    return l;
  });
  const t2 = performance.now();
  const c1 = process.cpuUsage(c0);
  lastLoss = loss.item();
  loss.dispose();
  if (r >= warmup) {
    fwdBwd.push(t1 - t0);
    step.push(t2 - t0);
    cpu.push((c1.user + c1.system) / 1000);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
console.log(
  JSON.stringify({
    backend,
    threads: Number(threadsArg),
    fwd_bwd_ms: median(fwdBwd),
    step_ms: median(step),
    // CPU time of the whole process per step (all threads): comparable across loaded runs.
    step_cpu_ms: median(cpu),
    tokens: cfg.batch * cfg.seq,
    peak_rss_mib: hwm ? Number(hwm[1]) / 1024 : null,
    loss: lastLoss,
    blas: T.nativeBackendInfo()?.summary ?? null,
  }),
);
T.disposeNativeBackend();
T.disposeWasmBackend();
await T.disposeGpujsBackend();

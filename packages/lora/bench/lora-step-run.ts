// One LoRA SFT measurement in its own process (peak RSS belongs to this config):
//   tsx --conditions=source bench/lora-step-run.ts [backend] [threads] [reps] [bf16Gemm widen|onednn]
//     [gemmSplit workers|library] [workerSpinMicros]
// native loads OpenBLAS ignoring OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (as the PyTorch peer runs) and reports its core.
// Frozen bf16 base (the tensor benchmark's reference decoder as a Llama), LoRA r=16 α=32
// on all linear layers, AdamW on the adapter, next-token loss on B=4 × T=128 tokens. KILN_BENCH_WARMUP steps
// (default 1) run before the measured ones.
import { readFileSync } from "node:fs";
import * as T from "@kiln/tensor";
import { warmupFromEnv } from "../../../tooling/src/bench.js";
import { LORA_BENCH_SHAPE, loraBenchStep } from "./lora-bench-step.js";

const [backend = "wasm", threads = "2", repsArg = "3", bf16Gemm = "widen", gemmSplit = "workers", spinArg] =
  process.argv.slice(2);
const reps = Number(repsArg);
if (backend !== "js")
  await T.initBackend(backend, {
    threads: Number(threads),
    relaxedSimd: true,
    ignoreOpenblasEnv: true,
    bf16Gemm: bf16Gemm === "onednn" ? "onednn" : "widen",
    gemmSplit: gemmSplit as T.GemmSplit,
    workerSpinMicros: spinArg === undefined ? undefined : Number(spinArg),
  });
const { B, S } = LORA_BENCH_SHAPE;
const { step, trainable } = loraBenchStep();
const times: number[] = [];
const cpu: number[] = [];
const warmup = warmupFromEnv();
for (let r = 0; r < reps + warmup; r++) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  step();
  if (r >= warmup) {
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
}
const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
console.log(
  JSON.stringify({
    step_ms: [...times].sort((a, b) => a - b)[times.length >> 1],
    // CPU time of the whole process per step (all threads): on a loaded machine, the work itself.
    step_cpu_ms: [...cpu].sort((a, b) => a - b)[cpu.length >> 1],
    tokens: B * S,
    peak_rss_mib: hwm ? Number(hwm[1]) / 1024 : null,
    trainable,
    blas: T.nativeBackendInfo()?.summary ?? null,
  }),
);
T.disposeNativeBackend();
T.disposeWasmBackend();

// One benchmark case of @kiln/losses in its own process, so its peak memory is its own:
// `tsx --conditions=source bench/kiln-case.ts <ce|kl|jsd> <tokens> <vocab> <reps>`.
// Prints one JSON line: median/min ms of forward+backward and the peak RSS increase (MiB) over
// the baseline taken after the inputs exist (VmHWM − VmRSS at baseline, like the torch peer).
import { readFileSync } from "node:fs";
import { Tensor, backward, initBackend, record } from "@kiln/tensor";
import { distillationLoss, sftLoss } from "../src/index.js";

const [kind, tokensArg, vocabArg, repsArg, backendArg = "js", logitsArg = "layer"] = process.argv.slice(2);
if (backendArg === "wasm") await useWasm();
const T = Number(tokensArg);
const V = Number(vocabArg);
const reps = Number(repsArg);

function status(field: "VmRSS" | "VmHWM"): number {
  const m = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync("/proc/self/status", "utf8"));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}

/** Deterministic N(0, 2²)-ish logits without a second buffer (sum of uniforms). */
function fill(out: Float32Array, seed: number): void {
  let s = seed >>> 0;
  for (let i = 0; i < out.length; i++) {
    let acc = 0;
    for (let k = 0; k < 4; k++) {
      s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
      acc += s / 4294967296;
    }
    out[i] = (acc - 2) * 3.46;
  }
}

const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const student = new Tensor(new Float32Array(T * V), [T, V]);
fill(student.dataSync() as Float32Array, 1);
const teacher = kind === "ce" ? null : new Tensor(new Float32Array(T * V), [T, V]);
if (teacher) fill(teacher.dataSync() as Float32Array, 2);
const labels = new Int32Array(T);
for (let i = 0; i < T; i++) labels[i] = (i * 7919) % V;
const labelsT = new Tensor(labels, [T], "i32");
gc();
const baseline = status("VmRSS");

const times: number[] = [];
let value = 0;
/**
 * The logits the loss sees. "leaf": the input tensor itself, so backward ends by accumulating into
 * its .grad — which @kiln/tensor does by copying the incoming gradient (PyTorch steals it), one
 * extra [T×V]. "layer" (default): the logits come out of a producer op, as they come out of
 * lm_head in training; the op shares the input's storage and its backward consumes the logits'
 * gradient (here: returns a one-element parameter gradient), so that gradient dies after use.
 */
const producerParam = new Tensor(new Float32Array(1), [1]).requireGrad();
function logitsFor(): Tensor {
  if (logitsArg === "leaf") {
    student.requireGrad();
    return student;
  }
  return record(new Tensor(student.dataSync(), [T, V]), "producer", [producerParam], () => [
    new Tensor(new Float32Array(1), [1]),
  ]);
}

for (let r = 0; r < reps + 1; r++) {
  student.grad = null;
  producerParam.grad = null;
  const t0 = performance.now();
  const logits = logitsFor();
  const { loss } =
    kind === "ce"
      ? sftLoss(logits, labelsT, { shift: false })
      : distillationLoss(
          logits,
          teacher as Tensor,
          kind === "kl" ? { kind: "forward_kl" } : { kind: "jsd", beta: 0.5 },
        );
  backward(loss);
  const ms = performance.now() - t0;
  value = loss.item();
  if (r > 0) times.push(ms); // first run is warm-up
  student.grad = null;
  gc();
}
times.sort((a, b) => a - b);
const peak = status("VmHWM");
process.stdout.write(
  `${JSON.stringify({ median_ms: times[times.length >> 1], min_ms: times[0], peak_delta_mib: peak - baseline, baseline_mib: baseline, loss: value })}\n`,
);

/** The wasm SIMD backend, single-threaded (the peer runs one torch thread). */
async function useWasm(): Promise<void> {
  await initBackend("wasm", { threads: Number(process.env.KILN_BENCH_THREADS ?? 1) });
}

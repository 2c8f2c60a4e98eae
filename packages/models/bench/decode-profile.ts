// `pnpm bench models decode-profile [--model reference|stories260K|qwen3] [--layers N] [--dtype f32|bf16]
// [--backend native|wasm] [--steps S] [--prompt P] [--phase decode|prefill] [--no-timers]`: where one KV-cache
// decode step's time goes (or, with --phase prefill, one prefill of the P-token prompt: S prefills, each into a
// fresh cache). Every kernel the active backend runs is wrapped with a timer; the rest of the step (op dispatch,
// allocation, shape checks, the KV-cache append, argmax and the logits readback) is "outside kernels". Kernel
// times are wall time on one thread; the step's process CPU time is printed next to its wall time, so load from
// other processes shows up as wall ≫ CPU.
import {
  type KernelName,
  Tensor,
  backendKernels,
  initBackend,
  noGrad,
  referenceKernel,
  setBackend,
} from "@kiln/tensor";
import { readFileSync } from "node:fs";
import { convertLlama2cToHf } from "@kiln/hub-io";
import { type Model, argmaxOf, createModel, loadModel } from "../src/index.js";
import { qwen3_06b } from "./train-step.js";
import { REFERENCE_CONFIG } from "./reference-config.js";

const argv = process.argv.slice(2);
const opt = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const which = opt("model", "reference");
const backend = opt("backend", "native");
const steps = Number(opt("steps", "32"));
if (!["reference", "stories260K", "qwen3"].includes(which))
  throw new Error(`--model must be reference, stories260K or qwen3, got ${which}`);
const prompt = Number(opt("prompt", which === "qwen3" ? "64" : "128"));
const phase = opt("phase", "decode");
if (phase !== "decode" && phase !== "prefill") throw new Error(`--phase must be decode or prefill, got ${phase}`);
const dtype = opt("dtype", which === "qwen3" ? "bf16" : "f32") as "f32" | "bf16";
await initBackend("wasm", { threads: 1, activate: false });
if (backend === "native") await initBackend("native", { threads: 1, activate: false, ignoreOpenblasEnv: true });
setBackend(backend);
// The two models `pnpm bench models` measures, or a Qwen3-0.6B-shaped one (random weights).
const stories260K = () => {
  const data = (name: string) => new Uint8Array(readFileSync(new URL(`../data/stories260K/${name}`, import.meta.url)));
  return loadModel(convertLlama2cToHf(data("stories260K.bin"), data("tok512.bin")).files, { dtype });
};
const model: Model =
  which === "stories260K"
    ? await stories260K()
    : createModel(which === "reference" ? REFERENCE_CONFIG : qwen3_06b(Number(opt("layers", "28"))), {
        seed: 0,
        dtype,
      });

// process.cpuUsage costs a syscall (several µs), too much around each of ~70 kernels a step: kernels are timed
// on the wall clock (so a loaded machine inflates them; compare with the step's CPU time), and --no-timers
// leaves them unwrapped (for --cpu-prof).
const timers = !argv.includes("--no-timers");
const clock = () => performance.now();
const timing = new Map<string, { ms: number; calls: number }>();
let inKernels = 0;
const kernels = backendKernels(backend) as Record<string, unknown>;
const names = new Set([...Object.keys(kernels)]);
for (const name of timers ? names : []) {
  const inner = (kernels[name] ?? referenceKernel(name as KernelName)) as (...a: unknown[]) => unknown;
  if (typeof inner !== "function") continue;
  kernels[name] = (...args: unknown[]) => {
    const t0 = clock();
    const r = inner(...args);
    const dt = clock() - t0;
    inKernels += dt;
    const e = timing.get(name) ?? { ms: 0, calls: 0 };
    e.ms += dt;
    e.calls++;
    timing.set(name, e);
    return r;
  };
}
let argmaxMs = 0;
let readMs = 0;
const promptIds = (V: number) =>
  new Tensor(
    Int32Array.from({ length: prompt }, (_, i) => (i * 7 + 3) % V),
    [1, prompt],
    "i32",
  );
function resetTimers(): void {
  timing.clear();
  inKernels = 0;
  argmaxMs = 0;
  readMs = 0;
}
/** `steps` decode steps after one prefill, or `steps` prefills (each into a fresh cache). */
function rep(): { ms: number; cpuMs: number } {
  return noGrad(() => {
    const V = model.config.vocabSize;
    let cache = model.newCache(1);
    let logits = model.forward(promptIds(V), { cache, logitsToKeep: 1 });
    let tok = argmaxOf(logits.toFloat32Array());
    resetTimers();
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    for (let s = 0; s < steps; s++) {
      if (phase === "prefill") {
        cache.dispose();
        cache = model.newCache(1);
        logits = model.forward(promptIds(V), { cache, logitsToKeep: 1 });
      } else logits = model.forward(new Tensor(Int32Array.of(tok), [1, 1], "i32"), { cache });
      const r0 = clock();
      const host = logits.toFloat32Array();
      const r1 = clock();
      tok = argmaxOf(host);
      argmaxMs += clock() - r1;
      readMs += r1 - r0;
    }
    const ms = performance.now() - t0;
    const c = process.cpuUsage(c0);
    cache.dispose();
    return { ms, cpuMs: (c.user + c.system) / 1000 };
  });
}
rep(); // warm-up (JIT)
rep();
const { ms, cpuMs: stepCpuMs } = rep();
const per = (x: number) => (x / steps).toFixed(3);
const unit = phase === "prefill" ? "prefill" : "token";
const tokensPerStep = phase === "prefill" ? prompt : 1;
console.log(
  `${which} ${dtype} on ${backend}: ${per(ms)} ms/${unit} wall (${((steps * tokensPerStep * 1000) / ms).toFixed(1)} tok/s), ${per(stepCpuMs)} ms/${unit} process CPU`,
);
const rows = [...timing].sort((a, b) => b[1].ms - a[1].ms);
for (const [name, e] of rows)
  console.log(
    `  ${name.padEnd(22)} ${per(e.ms).padStart(9)} ms/${unit}  ${(e.calls / steps).toFixed(1).padStart(6)} calls/${unit}  ${((e.ms / e.calls) * 1000).toFixed(1).padStart(8)} µs/call`,
  );
console.log(`  ${"logits readback".padEnd(22)} ${per(readMs).padStart(9)} ms/${unit}`);
console.log(`  ${"argmax".padEnd(22)} ${per(argmaxMs).padStart(9)} ms/${unit}`);
console.log(
  `  ${"outside kernels".padEnd(22)} ${per(ms - inKernels - argmaxMs - readMs).padStart(9)} ms/${unit} (wall: dispatch, allocation, cache)`,
);
process.exit(0);

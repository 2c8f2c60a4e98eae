// Square f32 matmul GFLOP/s (2·n³ / median time) for plain JS, kiln wasm (1 and 2 threads, plain and
// relaxed SIMD), kiln-native (the native backend's CBLAS GEMM, 1 and 2 threads) and peers in the same run: PyTorch + OpenBLAS (1 torch thread; OpenBLAS with 1 and with
// 2 threads) and @tensorflow/tfjs-backend-wasm. A peer that is not installed is reported as missing.
// The machine may be shared, so contenders are measured in interleaved rounds and each reported value
// is the median over rounds of per-round medians. Single-threaded contenders are also reported per
// CPU-second of their process (2·n³ / CPU time), which is what one core delivers when others compete.
import { type BenchReporter, timeIt } from "../../../tooling/src/bench.js";
import { pinnedHere, torchNote } from "../../../tooling/src/peer.js";
import { NativeGemm, loadBlas } from "../src/backends/native/index.js";
import { type WasmKernels, createWasmKernels, enableRelaxedSimd } from "../src/wasm/index.js";
import { jsBlockedMatmul } from "./js-matmul.js";
import { TorchPeer } from "./torch-peer.js";

// `--sizes=1024,2048` measures only those sizes.
const SIZES = process.argv
  .find((a) => a.startsWith("--sizes="))
  ?.slice(8)
  .split(",")
  .map(Number) ?? [256, 512, 1024, 2048];
const ROUNDS = 3;

const gflops = (n: number, ms: number) => (2 * n ** 3) / (ms * 1e6);
const reps = (n: number) => (n >= 2048 ? 2 : n >= 1024 ? 3 : 7);
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

function random(n: number): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.random() * 2 - 1;
  return out;
}

interface Sample {
  wall: number;
  cpu: number;
}
type Timer = (n: number) => Promise<Sample>; // median ms for one round

/** Times fn with wall and process CPU time (meaningful for the single-threaded contenders only). */
async function timeBoth(fn: () => void, count: number, warmup: number): Promise<Sample> {
  const cpu: number[] = [];
  const wall = await timeIt(
    () => {
      const start = process.cpuUsage();
      fn();
      const d = process.cpuUsage(start);
      cpu.push((d.user + d.system) / 1000);
    },
    count,
    warmup,
  );
  return { wall: wall.median, cpu: median(cpu.slice(warmup)) };
}

async function tfjsWasmTimer(): Promise<Timer | null> {
  try {
    const tf = await import("@tensorflow/tfjs-core");
    await import("@tensorflow/tfjs-backend-wasm");
    if (!(await tf.setBackend("wasm"))) throw new Error("setBackend('wasm') failed");
    await tf.ready();
    return async (n) => {
      const a = tf.tensor2d(random(n * n), [n, n]);
      const b = tf.tensor2d(random(n * n), [n, n]);
      const t = await timeBoth(
        () => {
          const c = tf.matMul(a, b);
          c.dataSync();
          c.dispose();
        },
        reps(n),
        1,
      );
      a.dispose();
      b.dispose();
      return t;
    };
  } catch (err) {
    process.stderr.write(`  tfjs-wasm peer missing (${String(err)})\n`);
    return null;
  }
}

function kilnTimer(kernels: WasmKernels): Timer {
  return (n) => {
    const a = random(n * n);
    const b = random(n * n);
    const c = new Float32Array(n * n);
    return timeBoth(() => kernels.matmul(a, b, c, { batch: 1, m: n, n, k: n }), reps(n), 1);
  };
}

/** kiln-native: the native backend's GEMM (CBLAS through the FFI) with the library set to `threads`. */
function nativeTimer(gemm: NativeGemm, threads: number): Timer {
  return (n) => {
    gemm.blas.setThreads(threads);
    const a = random(n * n);
    const b = random(n * n);
    const c = new Float32Array(n * n);
    return timeBoth(() => gemm.matmul(a, b, c, { batch: 1, m: n, n, k: n }), reps(n), 1);
  };
}

/** The native GEMM at full speed (OpenBLAS's pinning variables ignored while it loads, as for the peer), or null. */
async function nativeGemmOrNull(): Promise<NativeGemm | null> {
  try {
    const blas = await loadBlas({ ignoreOpenblasEnv: true });
    const pinned = pinnedHere();
    process.stderr.write(
      `  kiln-native: ${blas.vendor} ${blas.path}, core ${blas.core ?? "?"}${pinned.length ? ` (loaded ignoring ${pinned.join(" ")})` : ""}\n`,
    );
    return new NativeGemm(blas);
  } catch (err) {
    process.stderr.write(`  kiln-native unavailable: ${(err as Error).message}\n`);
    return null;
  }
}

const jsTimer: Timer = (n) => {
  const a = random(n * n);
  const b = random(n * n);
  const c = new Float32Array(n * n);
  return timeBoth(() => jsBlockedMatmul(a, b, c, n, n, n), n >= 1024 ? 1 : 3, n >= 1024 ? 0 : 1);
};

export async function benchMatmul(reporter: BenchReporter): Promise<void> {
  const torch1 = await TorchPeer.start(1);
  const torch2 = await TorchPeer.start(2);
  const native = await nativeGemmOrNull();
  enableRelaxedSimd();
  const kernels: Record<string, WasmKernels | null> = {};
  for (const [name, threads, relaxedSimd] of [
    ["wasm-1t", 1, false],
    ["wasm-2t", 2, false],
    ["wasm-relaxed-1t", 1, true],
    ["wasm-relaxed-2t", 2, true],
  ] as const) {
    try {
      kernels[name] = await createWasmKernels({ threads, relaxedSimd });
    } catch (err) {
      process.stderr.write(`  ${name} unavailable: ${String(err)}\n`);
      kernels[name] = null;
    }
  }
  const timers: Record<string, Timer | null> = {
    "js-blocked": jsTimer,
    "tfjs-wasm": await tfjsWasmTimer(),
    "torch-openblas-1t": torch1 ? (n) => torch1.time(n, reps(n)) : null,
    "torch-openblas-2t": torch2 ? (n) => torch2.time(n, reps(n)) : null,
    "native-1t": native ? nativeTimer(native, 1) : null,
    "native-2t": native ? nativeTimer(native, 2) : null,
  };
  for (const [name, k] of Object.entries(kernels)) timers[name] = k ? kilnTimer(k) : null;

  const wall: Record<string, Record<number, number | null>> = {};
  const cpu: Record<string, Record<number, number | null>> = {};
  for (const name of Object.keys(timers)) {
    wall[name] = {};
    cpu[name] = {};
  }
  try {
    for (const n of SIZES) {
      const samples: Record<string, Sample[]> = {};
      for (let round = 0; round < ROUNDS; round++) {
        for (const [name, timer] of Object.entries(timers)) {
          if (!timer) continue;
          // plain JS at n >= 1024 takes seconds per call: one round is enough to place it
          if (name === "js-blocked" && n >= 1024 && round > 0) continue;
          (samples[name] ??= []).push(await timer(n));
        }
      }
      for (const name of Object.keys(timers)) {
        const s = samples[name];
        wall[name][n] = s ? gflops(n, median(s.map((x) => x.wall))) : null;
        cpu[name][n] = s ? gflops(n, median(s.map((x) => x.cpu))) : null;
      }
    }
  } finally {
    for (const k of Object.values(kernels)) k?.dispose();
    torch1?.close();
    torch2?.close();
  }

  const nativeCore = native
    ? `kiln-native OpenBLAS core ${native.blas.core ?? native.blas.vendor}`
    : "kiln-native missing";
  const peer1 = torchNote(1, undefined, torch1?.blasCore);
  for (const n of SIZES) {
    const row = (metric: string, peer: string, note?: string, perCpu = false) => {
      const src = perCpu ? cpu : wall;
      reporter.add({
        case: `matmul f32 ${n}x${n}x${n}`,
        metric: perCpu ? `${metric} per cpu-s` : metric,
        unit: "GFLOP/s",
        better: "higher",
        kiln: src[metric][n],
        peer,
        peer_value: src[peer][n],
        ...(note ? { note } : {}),
      });
    };
    row("js-blocked", "tfjs-wasm", "plain TypeScript, 4-row register block");
    row("wasm-1t", "tfjs-wasm", "tfjs-wasm: SIMD, no threads in Node");
    row("native-1t", "torch-openblas-1t", `${nativeCore}, 1 thread; peer: ${peer1}, OPENBLAS_NUM_THREADS=1`);
    row("native-2t", "torch-openblas-2t", `${nativeCore}, 2 threads; peer: ${peer1}, OPENBLAS_NUM_THREADS=2`);
    row("wasm-1t", "torch-openblas-1t", `peer: ${peer1}, OPENBLAS_NUM_THREADS=1`);
    row("wasm-relaxed-1t", "torch-openblas-1t", "f32x4.relaxed_madd");
    row("wasm-2t", "torch-openblas-2t", `peer: ${peer1}, OPENBLAS_NUM_THREADS=2`);
    row("wasm-relaxed-2t", "torch-openblas-2t", `peer: ${peer1}, OPENBLAS_NUM_THREADS=2`);
    row("wasm-1t", "torch-openblas-1t", "2·n³ / process CPU time", true);
    row("wasm-relaxed-1t", "torch-openblas-1t", "2·n³ / process CPU time", true);
    row("native-1t", "torch-openblas-1t", `2·n³ / process CPU time; ${nativeCore}`, true);
  }
}

// Forward+backward (+AdamW) of the reference decoder (4 layers, d=256, 4 heads, T=128, B=4,
// vocab 2048, SwiGLU, RMSNorm, RoPE): tokens/s and peak RSS, kiln vs PyTorch with the same
// model. Each configuration runs in its own process so its peak RSS is its own.
import { spawn, spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BenchReporter, benchWarmupSteps } from "../../../tooling/src/bench.js";
import { peerEnv, torchNote } from "../../../tooling/src/peer.js";

const here = dirname(fileURLToPath(import.meta.url));

interface DecoderSample {
  fwd_bwd_ms: number;
  step_ms: number;
  tokens: number;
  peak_rss_mib: number | null;
  /** CPU time of the whole process per step (all threads). */
  step_cpu_ms?: number;
  blas?: string | null;
  /** The peer's: the OpenBLAS core torch mapped in the timed process itself. */
  blas_core?: string | null;
}

/** The JSON object on a child process's last line of output. */
function lastJsonLine<T>(stdout: string): T | null {
  return JSON.parse(stdout.trim().split("\n").pop() ?? "null");
}

function runJson(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): DecoderSample | null {
  const r = spawnSync(cmd, args, { cwd: join(here, ".."), encoding: "utf8", env });
  if (r.status !== 0) {
    process.stderr.write(`bench decoder: ${cmd} ${args.join(" ")} failed: ${r.stderr || r.error}\n`);
    return null;
  }
  return lastJsonLine<DecoderSample>(r.stdout);
}

/** GFLOP/s of bench/core-ceiling.ts in `copies` processes started together (null where one failed). */
async function ceilingRun(tsx: string, copies: number, seconds: number): Promise<number[] | null> {
  const one = () =>
    new Promise<number | null>((resolve) => {
      const child = spawn(tsx, ["--conditions=source", join(here, "core-ceiling.ts"), String(seconds)], {
        cwd: join(here, ".."),
        stdio: ["ignore", "pipe", "inherit"],
      });
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
      });
      child.on("close", (code) => {
        if (code !== 0) return resolve(null);
        const line = lastJsonLine<{ gflops?: number }>(out);
        resolve(typeof line?.gflops === "number" ? line.gflops : null);
      });
    });
  const rates = await Promise.all(Array.from({ length: copies }, one));
  return rates.every((r) => r !== null) ? (rates as number[]) : null;
}

/**
 * What two threads can reach on this machine at all: single-threaded products in two processes at once against
 * one alone (medians over interleaved rounds). Two vCPUs that are SMT siblings on the host share one core's
 * vector units, and the pair then runs near 1× one — the ceiling for any two-thread step here.
 */
async function benchCoreCeiling(reporter: BenchReporter, tsx: string, rounds: number): Promise<void> {
  const solo: number[] = [];
  const pair: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const one = await ceilingRun(tsx, 1, 3);
    const two = await ceilingRun(tsx, 2, 3);
    if (one) solo.push(one[0]);
    if (two) pair.push(two[0] + two[1]);
  }
  const med = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[xs.length >> 1] : null);
  reporter.add({
    case: "machine: 1024³ sgemm in two single-thread processes at once vs one",
    metric: "GFLOP/s",
    unit: "GFLOP/s",
    better: "higher",
    kiln: med(pair),
    peer: "one process alone",
    peer_value: med(solo),
    note: `kiln-native, 1 thread each, 3 s per process; median of ${rounds} interleaved rounds; the ratio is the machine's ceiling for two threads`,
  });
}

export async function benchDecoder(reporter: BenchReporter, reps = 3): Promise<void> {
  const tsx = join(here, "..", "..", "..", "node_modules", ".bin", "tsx");
  const rounds = Number(process.argv.find((a) => a.startsWith("--rounds="))?.slice(9) ?? 3);
  const warmup = benchWarmupSteps();
  const kiln = (args: string[]) => () => runJson(tsx, ["--conditions=source", join(here, "decoder-run.ts"), ...args]);
  // The peer at full speed, 1 thread (tooling/src/peer.ts); kiln-native on 1 thread is the like-for-like row.
  const torchRun = () => runJson("/usr/bin/python3", [join(here, "decoder_torch.py"), String(reps)], peerEnv(1));
  const runners: [string, () => DecoderSample | null][] = [
    ["native 1 thread", kiln(["native", "1", String(reps), "0", "1"])],
    ["native 2 threads", kiln(["native", "2", String(reps), "0", "1"])],
    ["wasm 2 threads relaxed-SIMD", kiln(["wasm", "2", String(reps), "0", "1"])],
    ["wasm 2 threads relaxed-SIMD, checkpointed layers", kiln(["wasm", "2", String(reps), "1", "1"])],
    ["wasm 1 thread", kiln(["wasm", "1", String(reps), "0", "0"])],
  ];
  // Rounds interleave every configuration and the peer, so a busy machine slows all of them alike.
  const samples = new Map<string, DecoderSample[]>();
  const add = (name: string, s: DecoderSample | null) => {
    if (s) samples.set(name, [...(samples.get(name) ?? []), s]);
  };
  for (let r = 0; r < rounds; r++) {
    add("torch", torchRun());
    for (const [name, run] of runners) add(name, run());
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
  const combine = (list: DecoderSample[] | undefined): DecoderSample | null =>
    list?.length
      ? {
          fwd_bwd_ms: med(list.map((s) => s.fwd_bwd_ms)),
          step_ms: med(list.map((s) => s.step_ms)),
          step_cpu_ms: med(list.map((s) => s.step_cpu_ms ?? Number.NaN)),
          tokens: list[0].tokens,
          peak_rss_mib: list[0].peak_rss_mib === null ? null : med(list.map((s) => s.peak_rss_mib as number)),
          blas: list[0].blas,
          blas_core: list[0].blas_core,
        }
      : null;
  await benchCoreCeiling(reporter, tsx, rounds);
  const torch = combine(samples.get("torch"));
  const peerNote = `peer: ${torchNote(1, undefined, torch?.blas_core)}; median of ${rounds} interleaved rounds, each the median of ${reps} steps after ${warmup} warm-up steps`;
  const configs: [string, DecoderSample | null][] = runners.map(([name]) => [name, combine(samples.get(name))]);
  const tps = (s: DecoderSample | null, key: "fwd_bwd_ms" | "step_ms") => (s ? (s.tokens / s[key]) * 1000 : null);
  const rowNote = (s: DecoderSample | null) => (s?.blas ? `kiln-native: ${s.blas}; ${peerNote}` : peerNote);
  for (const [name, s] of configs) {
    reporter.add({
      case: `decoder fwd+bwd, ${name}`,
      metric: "tokens/s",
      unit: "tok/s",
      better: "higher",
      kiln: tps(s, "fwd_bwd_ms"),
      peer: "pytorch-1thread",
      peer_value: tps(torch, "fwd_bwd_ms"),
      note: rowNote(s),
    });
    reporter.add({
      case: `decoder fwd+bwd+AdamW, ${name}`,
      metric: "tokens/s",
      unit: "tok/s",
      better: "higher",
      kiln: tps(s, "step_ms"),
      peer: "pytorch-1thread",
      peer_value: tps(torch, "step_ms"),
      note: rowNote(s),
    });
    // On a loaded machine wall time mostly measures the share of a core each process got; CPU time per
    // step does not (for one-thread configurations it is the work itself).
    reporter.add({
      case: `decoder fwd+bwd+AdamW, ${name}`,
      metric: "CPU time per step",
      unit: "ms",
      better: "lower",
      kiln: s?.step_cpu_ms ?? null,
      peer: "pytorch-1thread",
      peer_value: torch?.step_cpu_ms ?? null,
      note: rowNote(s),
    });
    if (name === "native 2 threads") {
      const single = configs.find(([n]) => n === "native 1 thread")?.[1] ?? null;
      reporter.add({
        case: "decoder fwd+bwd+AdamW, native 2 threads vs 1 thread",
        metric: "tokens/s",
        unit: "tok/s",
        better: "higher",
        kiln: tps(s, "step_ms"),
        peer: "kiln-native 1 thread",
        peer_value: tps(single, "step_ms"),
        note: "the same run's medians; compare with the machine's two-thread ceiling row",
      });
    }
    reporter.add({
      case: `decoder train step, ${name}`,
      metric: "peak RSS",
      unit: "MiB",
      better: "lower",
      kiln: s?.peak_rss_mib ?? null,
      peer: "pytorch-1thread",
      peer_value: torch?.peak_rss_mib ?? null,
      note: rowNote(s),
    });
  }
}

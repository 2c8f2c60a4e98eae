// `pnpm bench lora`: a LoRA SFT step (frozen bf16 base, r=16, all-linear) on the reference
// decoder, kiln vs PyTorch with the same adapter, each measured in its own process. PyTorch runs on
// one thread at full speed (OpenBLAS's pinning variables removed, tooling/src/peer.ts), with a bf16
// base (oneDNN's bf16 GEMMs where present) and with an f32 base. kiln-native (BLAS GEMMs) runs on
// one thread like the peer (and on two, against the same one-thread peer), with bf16 weights widened
// to f32 ("widen") and through oneDNN's bf16 GEMM ("onednn", what the bf16 peer does; on one thread and two); kiln wasm on
// two threads and one. Configurations run in interleaved rounds (the machine may be shared) and each
// value is the median over rounds; every process runs --warmup steps (default 40) before it measures.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchReporter, benchWarmupSteps } from "../../../tooling/src/bench.js";
import { peerEnv, torchNote } from "../../../tooling/src/peer.js";

const here = dirname(fileURLToPath(import.meta.url));
const reps = process.argv.includes("--quick") ? "1" : "5";

type Sample = Record<string, number | string | null>;

function runJson(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): Sample | null {
  const r = spawnSync(cmd, args, { cwd: join(here, ".."), encoding: "utf8", env });
  if (r.status !== 0) {
    process.stderr.write(
      `bench lora: ${cmd} ${args.join(" ")} failed: ${(r.stderr || String(r.error)).trim().split("\n").pop()}\n`,
    );
    return null;
  }
  const line = r.stdout.trim().split("\n").pop() ?? "";
  return JSON.parse(line);
}

const reporter = new BenchReporter("lora");
const tsx = join(here, "..", "..", "..", "node_modules", ".bin", "tsx");
const rounds = Number(
  process.argv.find((a) => a.startsWith("--rounds="))?.slice(9) ?? (process.argv.includes("--quick") ? 1 : 3),
);
// --quick measures after one warm-up step unless --warmup says otherwise.
const quickWarmup = process.argv.includes("--quick") && !process.argv.some((a) => a.startsWith("--warmup="));
const warmup = benchWarmupSteps(quickWarmup ? [...process.argv, "--warmup=1"] : process.argv);
const kilnRun =
  (backend: string, threads: number, bf16 = "widen") =>
  () =>
    runJson(tsx, ["--conditions=source", join(here, "lora-step-run.ts"), backend, String(threads), reps, bf16]);
const torchRun = (base: string) => () =>
  runJson("/usr/bin/python3", [join(here, "lora_step_torch.py"), reps, base], peerEnv(1));
const configs: Record<string, () => Sample | null> = {
  "native-1t": kilnRun("native", 1),
  "native-2t": kilnRun("native", 2),
  "native-onednn-1t": kilnRun("native", 1, "onednn"),
  "native-onednn-2t": kilnRun("native", 2, "onednn"),
  "wasm-2t": kilnRun("wasm", 2),
  "wasm-1t": kilnRun("wasm", 1),
  "torch-bf16": torchRun("bfloat16"),
  "torch-f32": torchRun("float32"),
};
const samples: Record<string, Sample[]> = {};
for (let r = 0; r < rounds; r++)
  for (const [name, run] of Object.entries(configs)) {
    const s = run();
    if (s) (samples[name] ??= []).push(s);
  }
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const tokS = (name: string) =>
  samples[name]?.length
    ? median(samples[name].map((s) => ((s.tokens as number) / (s.step_ms as number)) * 1000))
    : null;
const rss = (name: string) =>
  samples[name]?.length ? median(samples[name].map((s) => s.peak_rss_mib as number)) : null;
const blas = (name: string) => (samples[name]?.[0]?.blas as string | null | undefined) ?? null;
// The core each peer read from its own timed process (tooling/python/torch_blas.py).
const peerCore = (samples["torch-f32"]?.[0]?.blas_core ?? samples["torch-bf16"]?.[0]?.blas_core ?? null) as
  | string
  | null;
const peer = `peer: ${torchNote(1, undefined, peerCore)}`;
const note = (kiln: string) =>
  `${blas(kiln) ? `kiln-native: ${blas(kiln)}; ` : ""}${peer}; median of ${rounds} interleaved rounds, each the median of ${reps} steps after ${warmup} warm-up steps`;
const CASE = "lora-sft-step r=16 all-linear (B=4,T=128)";
const peers = { "torch-bf16": "pytorch-1thread-bf16-base", "torch-f32": "pytorch-1thread-f32-base" } as const;
const rows: [string, keyof typeof peers, string][] = [
  ["native-1t", "torch-f32", "kiln-native 1 thread, bf16 base widened to f32 per GEMM"],
  ["native-1t", "torch-bf16", "kiln-native 1 thread, bf16 base widened to f32 per GEMM"],
  ["native-2t", "torch-f32", "kiln-native 2 threads (peer 1 thread), bf16 base widened to f32 per GEMM"],
  [
    "native-onednn-1t",
    "torch-bf16",
    "kiln-native 1 thread, oneDNN bf16 GEMMs (activations rounded to bf16, as the peer)",
  ],
  [
    "native-onednn-2t",
    "torch-bf16",
    "kiln-native 2 threads (peer 1 thread), oneDNN bf16 GEMMs (activations rounded to bf16, as the peer)",
  ],
  ["wasm-2t", "torch-bf16", "kiln wasm 2 threads"],
  ["wasm-1t", "torch-bf16", "kiln wasm 1 thread"],
  ["wasm-1t", "torch-f32", "kiln wasm 1 thread"],
];
for (const [kiln, peerName, label] of rows) {
  reporter.add({
    case: `${CASE}, ${label}`,
    metric: "tokens/s",
    unit: "tok/s",
    better: "higher",
    kiln: tokS(kiln),
    peer: peers[peerName],
    peer_value: tokS(peerName),
    note: note(kiln),
  });
}
// On a loaded machine wall time mostly measures each process's share of a core; CPU time per step does not.
const cpuMs = (name: string) =>
  samples[name]?.length ? median(samples[name].map((s) => s.step_cpu_ms as number)) : null;
for (const [kiln, peerName, label] of rows) {
  reporter.add({
    case: `${CASE}, ${label}`,
    metric: "CPU time per step",
    unit: "ms",
    better: "lower",
    kiln: cpuMs(kiln),
    peer: peers[peerName],
    peer_value: cpuMs(peerName),
    note: note(kiln),
  });
}
for (const [kiln, peerName, label] of [
  ["native-1t", "torch-bf16", "kiln-native 1 thread (widen)"],
  ["native-onednn-1t", "torch-bf16", "kiln-native 1 thread (oneDNN)"],
  ["wasm-2t", "torch-bf16", "kiln wasm 2 threads"],
] as const) {
  reporter.add({
    case: `${CASE}, ${label}`,
    metric: "peak RSS",
    unit: "MiB",
    better: "lower",
    kiln: rss(kiln),
    peer: peers[peerName],
    peer_value: rss(peerName),
    note: note(kiln),
  });
}
reporter.finish();

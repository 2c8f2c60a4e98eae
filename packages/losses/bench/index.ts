// `pnpm bench losses [--json] [--tokens N] [--vocab V] [--rounds R] [--reps R] [--backend wasm|js|both] [--leaf] [--jsd]`:
// cross-entropy and full-vocabulary KL, forward + backward, kiln vs PyTorch (one thread) in the
// same run. Each side runs every case in its own child process, so peak memory is the increase
// over that process's baseline after its inputs exist. kiln runs on the wasm SIMD backend with one
// thread (like the peer) and/or the plain-js backend. PyTorch is reported missing when
// python3/torch is absent.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchReporter } from "../../../tooling/src/bench.js";
import { peerEnv, torchNote } from "../../../tooling/src/peer.js";

const here = dirname(fileURLToPath(import.meta.url));
const argv = process.argv.slice(2);
const opt = (name: string, dflt: number): number => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? Number(argv[i + 1]) : dflt;
};
const T = opt("tokens", 2048);
const V = opt("vocab", 151_936);
const reps = opt("reps", 1);
const backendArg = argv.includes("--backend") ? argv[argv.indexOf("--backend") + 1] : "both";
const backends = backendArg === "both" ? ["wasm", "js"] : [backendArg];
// Leaf logits (--leaf) or logits produced by a layer (default); both PyTorch's AccumulateGrad and
// kiln's autograd take a fresh gradient buffer over instead of copying it into a leaf.
const logitsMode = argv.includes("--leaf") ? "leaf" : "layer";
const cases: { kind: string; label: string }[] = [
  { kind: "ce", label: "cross-entropy" },
  { kind: "kl", label: "full-vocab forward KL" },
];
if (argv.includes("--jsd")) cases.push({ kind: "jsd", label: "full-vocab JSD β=0.5" });

interface CaseResult {
  median_ms: number;
  min_ms: number;
  peak_delta_mib: number;
  loss: number;
}

function runJson(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): CaseResult | null {
  const r = spawnSync(cmd, args, { cwd: join(here, ".."), encoding: "utf8", env, maxBuffer: 1 << 20 });
  if (r.status !== 0) {
    process.stderr.write(
      `  ${cmd} ${args.join(" ")}: failed (${(r.stderr || String(r.error)).trim().split("\n").pop()})\n`,
    );
    return null;
  }
  return JSON.parse(r.stdout.trim().split("\n").pop() ?? "null");
}

const reporter = new BenchReporter("losses");
const tsx = join(here, "..", "..", "..", "node_modules", ".bin", "tsx");
const python = process.env.PYTHON ?? "/usr/bin/python3";
const peer = "pytorch-1thread";
// Rounds interleave the peer and kiln so that a busy machine slows both alike; each child times
// one forward+backward after a warm-up, and the median over rounds is reported.
const rounds = opt("rounds", 3);
const median = (xs: number[]): number | null => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
for (const c of cases) {
  const torchRuns: CaseResult[] = [];
  const kilnRuns = new Map<string, CaseResult[]>(backends.map((b) => [b, []]));
  for (let r = 0; r < rounds; r++) {
    // Full speed, 1 thread: OpenBLAS's pinning variables removed (tooling/src/peer.ts).
    const torch = runJson(
      python,
      [join(here, "torch_case.py"), c.kind, String(T), String(V), String(reps)],
      peerEnv(1),
    );
    if (torch) torchRuns.push(torch);
    for (const backend of backends) {
      const args = ["--expose-gc", "--conditions=source", join(here, "kiln-case.ts"), c.kind, String(T), String(V)];
      const kiln = runJson(tsx, [...args, String(reps), backend, logitsMode]);
      if (kiln) kilnRuns.get(backend)?.push(kiln);
    }
    if (torchRuns.length === 0 && r === 0 && backends.every((b) => kilnRuns.get(b)?.length === 0)) break;
  }
  const torchMs = median(torchRuns.map((x) => x.median_ms));
  const torchMem = torchRuns.length ? Math.max(...torchRuns.map((x) => x.peak_delta_mib)) : null;
  for (const backend of backends) {
    const runs = kilnRuns.get(backend) ?? [];
    const kilnMs = median(runs.map((x) => x.median_ms));
    const kilnMem = runs.length ? Math.max(...runs.map((x) => x.peak_delta_mib)) : null;
    const name = `${c.label} fwd+bwd T=${T} V=${V} [kiln ${backend === "wasm" ? "wasm, 1 thread" : "js"}, ${logitsMode} logits]`;
    // Throughput (tokens/s, higher is better): a ratio ≥ 1 means kiln is faster.
    const tps = (ms: number | null) => (ms === null ? null : (T / ms) * 1000);
    const note = `median of ${runs.length} interleaved rounds; peer: ${torchNote(1, python)}`;
    reporter.add({
      case: name,
      metric: "throughput",
      unit: "tok/s",
      better: "higher",
      kiln: tps(kilnMs),
      peer,
      peer_value: tps(torchMs),
      note,
    });
    reporter.add({
      case: name,
      metric: "time (median)",
      unit: "ms",
      better: "lower",
      kiln: kilnMs,
      peer,
      peer_value: torchMs,
      note,
    });
    reporter.add({
      case: name,
      metric: "peak memory over inputs",
      unit: "MiB",
      better: "lower",
      kiln: kilnMem,
      peer,
      peer_value: torchMem,
      note: `max over rounds; one [T×V] f32 = ${((T * V * 4) / 2 ** 20).toFixed(0)} MiB; peer: ${torchNote(1, python)}`,
    });
  }
}
reporter.finish();

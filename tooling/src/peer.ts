import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

// Benchmark peers (PyTorch subprocesses) run at full speed: the variables that pin OpenBLAS to an
// older kernel (OPENBLAS_CORETYPE=Haswell on an AVX-512 CPU halves its GEMM speed) are removed from
// the peer's own environment only, its thread count is set explicitly, and the BLAS core it runs on
// is recorded in the row's note. Tests and the user's own environment are left as they are.

/** Environment variables that pin OpenBLAS's kernel choice (read when the library loads). */
export const OPENBLAS_PINNING = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"] as const;

/** The environment for a peer process: pinning removed, BLAS/OpenMP threads set to `threads`. */
export function peerEnv(threads: number, base: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...base };
  for (const name of OPENBLAS_PINNING) delete env[name];
  env.OPENBLAS_NUM_THREADS = String(threads);
  env.OMP_NUM_THREADS = String(threads);
  env.MKL_NUM_THREADS = String(threads);
  return env;
}

/** What the pinning variables are set to in this process (for notes), e.g. "OPENBLAS_CORETYPE=Haswell". */
export function pinnedHere(env: NodeJS.ProcessEnv = process.env): string[] {
  return OPENBLAS_PINNING.filter((v) => env[v] !== undefined).map((v) => `${v}=${env[v]}`);
}

export interface TorchInfo {
  torch: string;
  /** OpenBLAS core of the BLAS torch itself has mapped (openblas_get_corename), or null where it is not OpenBLAS. */
  core: string | null;
  /** That library's path, as mapped into torch's process. */
  library: string | null;
  onednn: boolean;
  threads: number;
}

/**
 * tooling/python/torch_blas.py: peers import it to report, from their own process, the BLAS torch has mapped
 * (never a separately loaded libopenblas, which may be another file or see another environment).
 */
export const TORCH_BLAS_PY_DIR = join(dirname(fileURLToPath(import.meta.url)), "..", "python");

// Run in a process with the peer's environment; the BLAS is read from torch's own mappings (torch_blas.py).
const INFO_SCRIPT = `
import json, os, sys, torch
sys.path.insert(0, ${JSON.stringify(TORCH_BLAS_PY_DIR)})
from torch_blas import torch_blas
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
b = torch_blas()
print(json.dumps({"torch": torch.__version__, "core": b["blas_core"], "library": b["blas_library"], "onednn": torch.backends.mkldnn.is_available(), "threads": torch.get_num_threads()}))
`;

const infoCache = new Map<string, TorchInfo | null>();

/** torch's version, BLAS core and threads under peerEnv(threads); null when python3/torch is missing. */
export function torchInfo(threads: number, python = "/usr/bin/python3"): TorchInfo | null {
  const key = `${python}:${threads}`;
  if (infoCache.has(key)) return infoCache.get(key) ?? null;
  const r = spawnSync(python, ["-c", INFO_SCRIPT], { env: peerEnv(threads), encoding: "utf8" });
  let info: TorchInfo | null = null;
  if (r.status === 0) {
    try {
      info = JSON.parse(r.stdout.trim().split("\n").pop() ?? "null");
    } catch {
      info = null;
    }
  }
  infoCache.set(key, info);
  return info;
}

/**
 * "torch 1.13.0, 1 thread, BLAS core Cooperlake read in torch's process (OPENBLAS_CORETYPE unset for the peer),
 * oneDNN". `measuredCore`: the core a peer reported from the very process that was timed (preferred).
 */
export function torchNote(threads: number, python?: string, measuredCore?: string | null): string {
  const info = torchInfo(threads, python);
  if (!info) return "torch missing";
  const removed = pinnedHere();
  const core = measuredCore ?? info.core;
  return (
    `torch ${info.torch}, ${info.threads} thread${info.threads === 1 ? "" : "s"}, ` +
    `BLAS core ${core ?? "not OpenBLAS"} read in torch's own process` +
    `${removed.length ? ` (${removed.map((r) => r.split("=")[0]).join(", ")} unset for the peer)` : ""}` +
    `${info.onednn ? ", oneDNN" : ""}`
  );
}

import { spawnSync } from "node:child_process";

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
  /** OpenBLAS core torch's BLAS runs on (openblas_get_corename), or null where it is not OpenBLAS. */
  core: string | null;
  onednn: boolean;
  threads: number;
}

// Asked of the library torch itself links (Debian: libblas.so.3 → OpenBLAS), in a process with the peer's environment.
const INFO_SCRIPT = `
import ctypes, json, torch
torch.set_num_threads(int(__import__("os").environ.get("OMP_NUM_THREADS", "1")))
core = None
for name in ("libblas.so.3", "libopenblas.so.0"):
    try:
        lib = ctypes.CDLL(name)
        lib.openblas_get_corename.restype = ctypes.c_char_p
        core = lib.openblas_get_corename().decode()
        break
    except (OSError, AttributeError):
        pass
print(json.dumps({"torch": torch.__version__, "core": core, "onednn": torch.backends.mkldnn.is_available(), "threads": torch.get_num_threads()}))
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

/** "torch 1.13.0, 1 thread, OpenBLAS core Cooperlake (OPENBLAS_CORETYPE, OPENBLAS_L2_SIZE unset), oneDNN". */
export function torchNote(threads: number, python?: string): string {
  const info = torchInfo(threads, python);
  if (!info) return "torch missing";
  const removed = pinnedHere();
  return (
    `torch ${info.torch}, ${info.threads} thread${info.threads === 1 ? "" : "s"}, ` +
    `BLAS core ${info.core ?? "not OpenBLAS"}${removed.length ? ` (${removed.map((r) => r.split("=")[0]).join(", ")} unset for the peer)` : ""}` +
    `${info.onednn ? ", oneDNN" : ""}`
  );
}

// Drives bench/torch_matmul.py as a long-lived child so PyTorch timings interleave with kiln's.
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { peerEnv } from "../../../tooling/src/peer.js";

const script = join(dirname(fileURLToPath(import.meta.url)), "torch_matmul.py");

export class TorchPeer {
  private constructor(
    private readonly child: ChildProcessWithoutNullStreams,
    private readonly lines: AsyncIterator<string>,
    readonly version: string,
    /** OpenBLAS core of the BLAS torch mapped in this peer's own process (tooling/python/torch_blas.py). */
    readonly blasCore: string | null,
  ) {}

  /** Starts the peer, or returns null (with the reason on stderr) when python3 or torch is missing. */
  static async start(openblasThreads: number, python = "/usr/bin/python3"): Promise<TorchPeer | null> {
    const child = spawn(python, [script], {
      // Full speed: OpenBLAS's kernel-pinning variables removed (tooling/src/peer.ts); torch itself on 1 thread.
      env: { ...peerEnv(openblasThreads), OMP_NUM_THREADS: "1" },
    });
    let stderr = "";
    child.stderr.on("data", (d) => (stderr += d));
    let reason = "";
    const failed = new Promise<null>((resolve) => {
      child.on("error", (err) => {
        reason = err.message;
        resolve(null);
      });
      child.on("exit", (code) => {
        reason ||= `${python} exited with code ${code}`;
        resolve(null);
      });
    });
    const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
    const first = await Promise.race([lines.next(), failed]);
    if (!first || first.done) {
      const detail = stderr.trim().split("\n").pop();
      process.stderr.write(`  torch peer missing: ${detail || reason || "no output"}\n`);
      child.kill();
      return null;
    }
    const hello = JSON.parse(first.value);
    return new TorchPeer(child, lines, hello.torch, hello.blas_core ?? null);
  }

  /** Median wall and process-CPU milliseconds of `reps` matmuls of n x n. */
  async time(n: number, reps: number): Promise<{ wall: number; cpu: number }> {
    this.child.stdin.write(`${n} ${reps}\n`);
    const line = await this.lines.next();
    if (line.done) throw new Error("torch peer exited");
    const r = JSON.parse(line.value);
    return { wall: r.median_s * 1000, cpu: r.median_cpu_s * 1000 };
  }

  close(): void {
    this.child.stdin.end();
  }
}

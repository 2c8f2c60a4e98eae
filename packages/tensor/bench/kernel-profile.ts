// Per-kernel wall and CPU time of a step on the native (or wasm) backend, for finding what does not scale
// with threads: every registered kernel, every BLAS / oneDNN call, bf16 conversion and attention tile is
// wrapped with a timer. Times are "self" (a kernel's own time minus the BLAS calls made inside it), so the
// rows add up to the time spent in kernels; the rest of the step is JS on the main thread (op dispatch,
// autograd, allocation). CPU is the process's (all threads): CPU / wall ≈ threads busy during the call.
// Used by bench/step-profile.ts and the lora package's bench/lora-profile.ts.
import * as T from "../src/index.js";

interface Row {
  calls: number;
  wall: number;
  cpu: number;
}

export interface KernelProfile {
  /** Clears the counters (e.g. after warm-up steps). */
  reset(): void;
  /** Rows sorted by wall time, ms summed over the steps since reset. */
  rows(): [string, Row][];
  /** Removes the wrappers. */
  restore(): void;
}

function cpuMs(): number {
  const c = process.cpuUsage();
  return (c.user + c.system) / 1000;
}

/** Wraps the kernels of `backend` (default native) and the native library calls under it. */
export function profileKernels(backend = "native"): KernelProfile {
  const table = new Map<string, Row>();
  // Time spent in wrapped children of the frame on top (subtracted from the parent's self time).
  const childWall: number[] = [];
  const childCpu: number[] = [];
  const undo: (() => void)[] = [];
  const names: string[] = [];
  const wrap = <F extends (...args: never[]) => unknown>(
    label: string,
    fn: F,
    detail?: (args: unknown[]) => string,
  ): F =>
    ((...args: Parameters<F>) => {
      const parent = names[names.length - 1];
      const name = `${label}${detail ? ` ${detail(args)}` : ""}${parent && detail ? ` in ${parent}` : ""}`;
      names.push(label);
      childWall.push(0);
      childCpu.push(0);
      const w0 = performance.now();
      const c0 = cpuMs();
      try {
        return fn(...args);
      } finally {
        const wall = performance.now() - w0;
        const cpu = cpuMs() - c0;
        const cw = childWall.pop() as number;
        const cc = childCpu.pop() as number;
        names.pop();
        const row = table.get(name) ?? { calls: 0, wall: 0, cpu: 0 };
        row.calls++;
        row.wall += wall - cw;
        row.cpu += cpu - cc;
        table.set(name, row);
        if (childWall.length) {
          childWall[childWall.length - 1] += wall;
          childCpu[childCpu.length - 1] += cpu;
        }
      }
    }) as F;
  const patch = (obj: Record<string, unknown>, key: string, name: string, detail?: (args: unknown[]) => string) => {
    const original = obj[key];
    if (typeof original !== "function") return;
    const bound = (original as (...a: unknown[]) => unknown).bind(obj);
    obj[key] = wrap(name, bound, detail);
    undo.push(() => {
      obj[key] = original;
    });
  };
  const kernels = T.backendKernels(backend) as Record<string, unknown>;
  for (const key of Object.keys(kernels)) patch(kernels, key, key);
  const wasm = T.wasmKernels() as unknown as Record<string, unknown> | null;
  if (wasm) {
    patch(wasm, "bf16Resident", "bf16 widen/round (wasm)");
    const tiles = wasm.attentionTiles as Record<string, unknown>;
    for (const key of ["softmax", "probs", "dscores", "zero"]) patch(tiles, key, `attention tile ${key}`);
  }
  const gemm = T.nativeGemm() as unknown as {
    blas: Record<string, unknown>;
    options: { onednn?: Record<string, unknown> | null };
  } | null;
  if (gemm) {
    // cblas_sgemm(order, transA, transB, m, n, k, …) and dnnl_gemm_bf16bf16f32(transA, transB, m, n, k, …).
    patch(gemm.blas, "sgemm", "BLAS sgemm", (a) => `${a[3]}×${a[4]}×${a[5]}`);
    // A product split between this thread and the workers: its wall time includes the wait for theirs.
    patch(
      gemm as unknown as Record<string, unknown>,
      "splitSgemm",
      "split sgemm (caller + workers)",
      (a) => `${a[10]}×${a[11]}×${(a[2] as { k: number }).k}`,
    );
    if (gemm.options.onednn)
      patch(gemm.options.onednn, "gemmBf16", "oneDNN gemm_bf16", (a) => `${a[2]}×${a[3]}×${a[4]}`);
  }
  return {
    reset: () => table.clear(),
    rows: () => [...table.entries()].sort((a, b) => b[1].wall - a[1].wall),
    restore: () => {
      for (const u of undo.reverse()) u();
    },
  };
}

/** Prints a profile as a markdown table, per step (ms), with the step's total wall/CPU and the share outside kernels. */
export function printProfile(label: string, p: KernelProfile, steps: number, stepWall: number, stepCpu: number): void {
  const rows = p.rows();
  let wall = 0;
  let cpu = 0;
  console.log(
    `\n${label}: ${steps} steps, per step wall ${(stepWall / steps).toFixed(1)} ms, CPU ${(stepCpu / steps).toFixed(1)} ms`,
  );
  console.log("| kernel (self time) | calls/step | wall ms/step | CPU ms/step | CPU/wall |");
  console.log("|---|---|---|---|---|");
  for (const [name, r] of rows) {
    wall += r.wall;
    cpu += r.cpu;
    console.log(
      `| ${name} | ${(r.calls / steps).toFixed(0)} | ${(r.wall / steps).toFixed(2)} | ${(r.cpu / steps).toFixed(2)} | ${(r.cpu / Math.max(r.wall, 1e-9)).toFixed(2)} |`,
    );
  }
  console.log(
    `| (outside kernels: JS on the main thread) | | ${((stepWall - wall) / steps).toFixed(2)} | ${((stepCpu - cpu) / steps).toFixed(2)} | |`,
  );
}

/**
 * Profiles `steps` calls of `step` after two warm-up calls (tier-up, pools), then prints the table, restores the
 * kernels and returns. `step` is timed whole (wall and process CPU).
 */
export function profileSteps(label: string, backend: string, steps: number, step: () => void): void {
  const profile = profileKernels(backend);
  let wall = 0;
  let cpu = 0;
  for (let r = 0; r < steps + 2; r++) {
    if (r === 2) {
      profile.reset();
      wall = 0;
      cpu = 0;
    }
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    step();
    wall += performance.now() - t0;
    const c = process.cpuUsage(c0);
    cpu += (c.user + c.system) / 1000;
  }
  printProfile(label, profile, steps, wall, cpu);
  profile.restore();
}

import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { BackendError } from "../../src/errors.js";
import { createWasmKernels, sharedMemorySupported, wasmSimdSupported } from "../../src/wasm/index.js";

const here = dirname(fileURLToPath(import.meta.url));
const tsx = join(here, "..", "..", "..", "..", "node_modules", ".bin", "tsx");

describe("wasm kernels lifecycle", () => {
  it("detects SIMD and shared memory on Node 20", () => {
    expect(wasmSimdSupported()).toBe(true);
    expect(sharedMemorySupported()).toBe(true);
  });

  it("defaults to min(2, cores) threads and threads: 1 runs without workers", async () => {
    const { availableParallelism } = await import("node:os");
    const auto = await createWasmKernels();
    expect(auto.threads).toBe(Math.min(2, availableParallelism()));
    auto.dispose();
    const single = await createWasmKernels({ threads: 1 });
    expect(single.threads).toBe(1);
    const out = new Float32Array(1);
    single.matmul(new Float32Array([2]), new Float32Array([3]), out, { batch: 1, m: 1, n: 1, k: 1 });
    expect(out[0]).toBe(6);
    single.dispose();
  });

  it("rejects bad options with BackendError", async () => {
    await expect(createWasmKernels({ threads: 0 })).rejects.toThrow(/threads must be an integer in \[1, 64\]/);
    await expect(createWasmKernels({ threads: 1.5 })).rejects.toThrow(BackendError);
    await expect(createWasmKernels({ maxMemoryMiB: 8 })).rejects.toThrow(/maxMemoryMiB/);
  });

  it("throws BackendError when used after dispose (dispose is idempotent)", async () => {
    const k = await createWasmKernels({ threads: 2 });
    k.dispose();
    k.dispose();
    expect(() =>
      k.matmul(new Float32Array(1), new Float32Array(1), new Float32Array(1), { batch: 1, m: 1, n: 1, k: 1 }),
    ).toThrow(/matmul called after dispose/);
  });

  it("grows memory for inputs larger than the initial heap and reports the memory limit", async () => {
    const k = await createWasmKernels({ threads: 2, maxMemoryMiB: 64 });
    const n = 1;
    const m = 5_000_000; // 20 MB for A and 20 MB out: more than the 16 MiB initial data area
    const a = new Float32Array(m).fill(0.5);
    const out = new Float32Array(m);
    k.matmul(a, new Float32Array([4]), out, { batch: 1, m, n, k: 1 });
    expect(out[0]).toBe(2);
    expect(out[m - 1]).toBe(2);
    const big = new Float32Array(9_000_000);
    expect(() =>
      k.matmul(big, new Float32Array(1), new Float32Array(9_000_000), { batch: 1, m: 9_000_000, n: 1, k: 1 }),
    ).toThrow(/cannot grow memory/);
    k.dispose();
  });

  it("a process that never calls dispose() still exits", () => {
    const res = spawnSync(tsx, [join(here, "fixtures", "no-dispose.ts")], { encoding: "utf8", timeout: 20_000 });
    expect(res.error).toBeUndefined();
    expect(res.status).toBe(0);
    expect(res.stdout.trim()).toBe("threads=2 c00=128 clast=128");
  });
});

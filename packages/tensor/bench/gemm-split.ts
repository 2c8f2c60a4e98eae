// Thread-split probe for skinny GEMMs (the rank-r LoRA shapes): the same call on a 1-thread and a
// 2-thread kernel instance, interleaved, median wall time per call.
//   tsx --conditions=source bench/gemm-split.ts [reps]
import { enableRelaxedSimd } from "../src/wasm/features.js";
import { createWasmKernels } from "../src/wasm/index.js";
import type { MatmulShape } from "../src/wasm/index.js";

enableRelaxedSimd();
const reps = Number(process.argv[2] ?? 200);
const two = await createWasmKernels({ threads: 2, relaxedSimd: true });
// The same instance with splitting off: the shared-memory module and heap are the same for both arms.
const one = {
  matmul(a: Float32Array, b: Float32Array, out: Float32Array, s: MatmulShape) {
    (two as unknown as { split: string }).split = "never";
    two.matmul(a, b, out, s);
    (two as unknown as { split: string }).split = "auto";
  },
  dispose() {},
};
const cases: [string, MatmulShape][] = [];
for (const [rows, f] of [
  [512, 256],
  [512, 688],
  [2048, 256],
  [128, 256],
]) {
  cases.push([`x·Aᵀ m=${rows} n=16 k=${f}`, { batch: 1, m: rows, n: 16, k: f, transB: true }]);
  cases.push([`u·Bᵀ m=${rows} n=${f} k=16`, { batch: 1, m: rows, n: f, k: 16, transB: true, accumulate: true }]);
  cases.push([`g·B m=${rows} n=16 k=${f}`, { batch: 1, m: rows, n: 16, k: f }]);
  cases.push([`gᵀ·u m=${f} n=16 k=${rows}`, { batch: 1, m: f, n: 16, k: rows, transA: true }]);
  cases.push([`duᵀ·x m=16 n=${f} k=${rows}`, { batch: 1, m: 16, n: f, k: rows, transA: true }]);
  cases.push([`du·A m=${rows} n=${f} k=16`, { batch: 1, m: rows, n: f, k: 16, accumulate: true }]);
}
const rows = 512;
cases.push([`square m=${rows} n=256 k=256`, { batch: 1, m: rows, n: 256, k: 256, transB: true }]);
cases.push([`m=${rows} n=64 k=256`, { batch: 1, m: rows, n: 64, k: 256, transB: true }]);
cases.push([`m=${rows} n=32 k=256`, { batch: 1, m: rows, n: 32, k: 256, transB: true }]);
cases.push([`m=${rows} n=256 k=32`, { batch: 1, m: rows, n: 256, k: 32, transB: true }]);
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
for (const [name, s] of cases) {
  const a = Float32Array.from({ length: s.m * s.k }, () => Math.random());
  const b = Float32Array.from({ length: s.k * s.n }, () => Math.random());
  const out = new Float32Array(s.m * s.n);
  const t1: number[] = [];
  const t2: number[] = [];
  for (let r = 0; r < reps; r++) {
    for (const [k, ts] of [
      [one, t1],
      [two, t2],
    ] as const) {
      const t0 = performance.now();
      k.matmul(a, b, out, s);
      ts.push(performance.now() - t0);
    }
  }
  const m1 = med(t1);
  const m2 = med(t2);
  const flops = 2 * s.m * s.n * s.k;
  console.log(
    `${name.padEnd(28)} ${(flops / 1e6).toFixed(2).padStart(6)} MFLOP  1T ${(m1 * 1000).toFixed(0).padStart(5)} µs  2T ${(m2 * 1000).toFixed(0).padStart(5)} µs  2T/1T ${(m2 / m1).toFixed(2)}`,
  );
}
one.dispose();
two.dispose();

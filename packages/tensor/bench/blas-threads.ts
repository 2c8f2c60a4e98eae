// OpenBLAS's own two-thread scaling on the GEMM shapes of the benchmark steps (the reference decoder's
// and the LoRA step's, see bench/step-profile.ts): each shape timed at 1 and at 2 library threads in the
// same process, interleaved, median µs per call.
//   tsx --conditions=source bench/blas-threads.ts [reps]
import { CBLAS_NO_TRANS, CBLAS_ROW_MAJOR, loadBlas } from "../src/backends/native/blas.js";

const reps = Number(process.argv[2] ?? 40);
const blas = await loadBlas({ ignoreOpenblasEnv: true });
const shapes: [number, number, number][] = [
  [512, 256, 256],
  [512, 688, 256],
  [512, 256, 688],
  [688, 256, 512],
  [256, 256, 512],
  [512, 2048, 256],
  [512, 256, 2048],
  [128, 128, 64],
  [128, 64, 128],
  [512, 16, 256],
  [16, 256, 512],
  [512, 256, 16],
  [512, 688, 16],
];
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`${blas.vendor} core ${blas.core}`);
console.log("| m×n×k | 1 thread µs | 2 threads µs | speed-up | GFLOP/s 1t |");
console.log("|---|---|---|---|---|");
for (const [m, n, k] of shapes) {
  const a = Float32Array.from({ length: m * k }, (_, i) => Math.sin(i));
  const b = Float32Array.from({ length: k * n }, (_, i) => Math.cos(i));
  const c = new Float32Array(m * n);
  const t: Record<number, number[]> = { 1: [], 2: [] };
  for (let r = 0; r < reps; r++)
    for (const threads of [1, 2]) {
      blas.setThreads(threads);
      const inner = 10;
      blas.sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, m, n, k, 1, a, k, b, n, 0, c, n);
      const t0 = performance.now();
      for (let i = 0; i < inner; i++)
        blas.sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, m, n, k, 1, a, k, b, n, 0, c, n);
      t[threads].push(((performance.now() - t0) * 1000) / inner);
    }
  const one = med(t[1]);
  const two = med(t[2]);
  console.log(
    `| ${m}×${n}×${k} | ${one.toFixed(0)} | ${two.toFixed(0)} | ${(one / two).toFixed(2)}× | ${((2 * m * n * k) / one / 1000).toFixed(0)} |`,
  );
}

// Products split between the caller and the wasm worker (each part one single-threaded sgemm, see
// NativeGemm's splitSgemm) against one BLAS thread and against OpenBLAS's own two threads, on the GEMM shapes
// of the benchmark steps, in one process, interleaved: median µs per call, and whether the split result equals
// the one-thread result bit for bit (all four transpose combinations). Shapes under WORKER_SPLIT_FLOPS are not
// split (the "split" column is then the one-thread path), nor skinny ones (a dimension ≤ 16) with 16 rows or
// under WORKER_SPLIT_FLOPS_SKINNY; other skinny ones split by rows where the library allows it.
//   tsx --conditions=source bench/worker-split.ts [reps] [spin µs]
import type { MatmulShape } from "../src/backend.js";
import * as T from "../src/index.js";

const reps = Number(process.argv[2] ?? 30);
const spin = Number(process.argv[3] ?? T.WORKER_SPIN_MICROS);
await T.initBackend("native", { threads: 2, ignoreOpenblasEnv: true, activate: false, workerSpinMicros: spin });
const wasm = T.wasmKernels();
const worker = wasm?.workerBlas ?? null;
const heap = wasm?.wasmHeap;
if (!worker || !heap || T.nativeBackendInfo()?.gemmSplit !== "workers") throw new Error("no BLAS on the workers");
const blas = (T.nativeGemm() as T.NativeGemm).blas;
const one = new T.NativeGemm(blas, { threads: 1 });
const library = new T.NativeGemm(blas, { threads: 2 });
const split = new T.NativeGemm(blas, { threads: 2, worker });
const resident = (n: number) => {
  const off = heap.alloc(n * 4, false);
  return () => new Float32Array(heap.buffer(), off, n);
};
const shapes: [number, number, number][] = [
  [512, 256, 256],
  [512, 688, 256],
  [512, 256, 688],
  [256, 256, 512],
  [256, 688, 512],
  [688, 256, 512],
  [512, 2048, 256],
  [512, 256, 2048],
  [256, 2048, 512],
  [128, 128, 64],
  [128, 64, 128],
  [64, 128, 128],
  [512, 16, 256],
  [16, 256, 512],
  [256, 16, 512],
  [512, 256, 16],
  [512, 688, 16],
  [37, 29, 300],
  [100, 7, 50],
];
const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
console.log(`${T.nativeBackendInfo()?.summary}; spin ${spin} µs`);
console.log("| m×n×k | 1 thread µs | library 2t µs | split µs | split / 1t | split / library | bits |");
console.log("|---|---|---|---|---|---|---|");
let seed = 1;
for (const [m, n, k] of shapes) {
  const A = resident(m * k);
  const B = resident(k * n);
  const C1 = resident(m * n);
  const C2 = resident(m * n);
  const fill = (x: Float32Array) => {
    for (let i = 0; i < x.length; i++) x[i] = Math.sin(seed++ * 0.7311) * 1.3;
  };
  fill(A());
  fill(B());
  let same = true;
  // The one-thread arm never sets the library's thread count (it expects one): the backend may have left two.
  blas.setThreads(1);
  (one as unknown as { blasThreads: number }).blasThreads = 1;
  for (const transA of [false, true])
    for (const transB of [false, true])
      for (const accumulate of [false, true]) {
        const shape: MatmulShape = { batch: 1, m, n, k, transA, transB, accumulate };
        fill(C1());
        C2().set(C1());
        one.matmul(A(), B(), C1(), shape);
        split.matmul(A(), B(), C2(), shape);
        const x = C1();
        const y = C2();
        for (let i = 0; i < x.length; i++) if (!Object.is(x[i], y[i])) same = false;
      }
  const t = { one: [] as number[], library: [] as number[], split: [] as number[] };
  const shape: MatmulShape = { batch: 1, m, n, k };
  const inner = Math.max(2, Math.min(50, Math.round(2e8 / (2 * m * n * k))));
  for (let r = 0; r < reps; r++)
    for (const [name, g] of [
      ["one", one],
      ["library", library],
      ["split", split],
    ] as const) {
      // The library's thread count is switched per call by each NativeGemm: set it as this one expects.
      blas.setThreads(name === "library" ? 2 : 1);
      (g as unknown as { blasThreads: number }).blasThreads = name === "library" ? 2 : 1;
      g.matmul(A(), B(), C1(), shape);
      const t0 = performance.now();
      for (let i = 0; i < inner; i++) g.matmul(A(), B(), C1(), shape);
      t[name].push(((performance.now() - t0) * 1000) / inner);
    }
  const [o, l, s] = [med(t.one), med(t.library), med(t.split)];
  console.log(
    `| ${m}×${n}×${k} | ${o.toFixed(0)} | ${l.toFixed(0)} | ${s.toFixed(0)} | ${(o / s).toFixed(2)}× | ${(l / s).toFixed(2)}× | ${same ? "same" : "DIFFER"} |`,
  );
}
T.disposeNativeBackend();
T.disposeWasmBackend();

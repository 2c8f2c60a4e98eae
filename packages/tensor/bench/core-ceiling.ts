// The machine's own two-thread ceiling for vector code: one process runs single-threaded 1024³ products on
// kiln-native for `seconds` and prints its GFLOP/s as JSON. bench/decoder.ts runs it alone, then two at once:
// on two full cores the pair sums to about twice the solo rate; on two vCPUs that share one core's vector
// units (SMT siblings of the host) it stays near one — and no two-thread step can do better than that.
//   tsx --conditions=source bench/core-ceiling.ts [seconds]
import * as T from "../src/index.js";

const seconds = Number(process.argv[2] ?? 3);
await T.initBackend("native", { threads: 1, ignoreOpenblasEnv: true });
const n = 1024;
const rng = new T.Rng(7);
const a = T.keep(new T.Tensor(Float32Array.from(rng.uniform(n * n)), [n, n]));
const b = T.keep(new T.Tensor(Float32Array.from(rng.uniform(n * n)), [n, n]));
T.tidy(() => T.matmul(a, b));
let count = 0;
const t0 = performance.now();
while (performance.now() - t0 < seconds * 1000) {
  T.tidy(() => T.matmul(a, b));
  count++;
}
const ms = performance.now() - t0;
console.log(JSON.stringify({ gflops: (2 * n ** 3 * count) / ms / 1e6, products: count, ms }));

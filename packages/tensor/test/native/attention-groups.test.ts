// Tiled attention by (batch, kv head) groups on the caller and a worker at once (wasm/attention-groups.ts):
// forward and backward bit for bit the one-thread tiled attention, on fresh random inputs, for grouped-query
// heads, several query blocks per head, a key cache longer than the queries and no mask; calls with a tile too
// short for an sgemm decline the groups and still give the same bits.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AttentionShape } from "../../src/backend.js";
import { type AttentionGroupThreads, makeTiledAttention } from "../../src/backends/attention-gemm.js";
import { loadBlas } from "../../src/backends/native/blas.js";
import * as T from "../../src/index.js";
import { firstDifference, randomArray } from "../helpers.js";

let unavailable: string | null = null;
try {
  await loadBlas();
} catch (err) {
  unavailable = (err as Error).message;
}
if (unavailable) process.stderr.write(`native attention-group tests skipped: ${unavailable}\n`);

describe.skipIf(unavailable !== null)("native: attention by kv-head groups on two threads", () => {
  let kernels: T.WasmKernels;
  let one: T.NativeGemm;
  let jobs = 0;
  let groupThreads: AttentionGroupThreads;
  beforeAll(async () => {
    await T.initBackend("native", { threads: 2, activate: false });
    kernels = T.wasmKernels() as T.WasmKernels;
    const worker = kernels.workerBlas as T.WorkerBlas;
    one = new T.NativeGemm((T.nativeGemm() as T.NativeGemm).blas, { threads: 1 });
    groupThreads = {
      workers: worker.workers,
      free: () => !worker.busy(),
      start: (index, args) => {
        jobs++;
        return worker.attentionGroups(index, args);
      },
      sgemm: () => one.oneThreadSgemm(),
    };
  });
  afterAll(() => {
    T.disposeNativeBackend();
    T.disposeWasmBackend();
  });

  const resident = (src: Float32Array | number) => {
    const n = typeof src === "number" ? src : src.length;
    const heap = kernels.wasmHeap;
    // alloc before buffer(): an alloc that grows the memory leaves an earlier buffer() at the old length.
    const a = new Float32Array(heap.buffer(), heap.alloc(n * 4, false), n);
    if (typeof src === "number") a.fill(Number.NaN);
    else a.set(src);
    return a;
  };

  const cases: [string, AttentionShape, number, boolean][] = [
    // [what, shape, tile elements, groups taken]
    [
      "3 batches × 2 kv heads, 2 queries per kv head, three query blocks, causal",
      { batch: 3, heads: 4, kvHeads: 2, tq: 150, tk: 150, headDim: 32, scale: 0.17, causal: true },
      64 * 150,
      true,
    ],
    [
      "a key cache 20 longer than the queries",
      { batch: 2, heads: 2, kvHeads: 2, tq: 70, tk: 90, headDim: 24, scale: 0.2, causal: true },
      1 << 18,
      true,
    ],
    [
      "no mask, 3 kv heads of 2",
      { batch: 1, heads: 6, kvHeads: 3, tq: 40, tk: 100, headDim: 64, scale: 0.125, causal: false },
      1 << 18,
      true,
    ],
    [
      "a last query block of 2 rows (declined)",
      { batch: 2, heads: 2, kvHeads: 1, tq: 130, tk: 130, headDim: 16, scale: 0.25, causal: true },
      64 * 130,
      false,
    ],
  ];

  for (const [what, s, tileElements, taken] of cases)
    it(`${what}: forward and backward bit for bit the one-thread tiles`, () => {
      const qLen = s.batch * s.heads * s.tq * s.headDim;
      const kvLen = s.batch * s.kvHeads * s.tk * s.headDim;
      const inputs = [randomArray(qLen, -2, 2), randomArray(kvLen, -2, 2), randomArray(kvLen), randomArray(qLen)];
      const run = (threads: AttentionGroupThreads | null) => {
        const [q, k, v, dOut] = inputs.map(resident);
        const [out, lse, dq, dk, dv] = [qLen, qLen / s.headDim, qLen, kvLen, kvLen].map(resident);
        const tiled = makeTiledAttention(one.matmul.bind(one), kernels.attentionTiles, tileElements, threads);
        expect(tiled.forward(q, k, v, out, lse, s)).toBe(true);
        expect(tiled.backward(q, k, v, out, lse, dOut, dq, dk, dv, s)).toBe(true);
        return { out, lse, dq, dk, dv };
      };
      const want = run(null);
      const before = jobs;
      const got = run(groupThreads);
      expect(jobs - before, "group jobs on the worker").toBe(taken ? 2 : 0);
      for (const key of ["out", "lse", "dq", "dk", "dv"] as const) {
        expect(firstDifference(got[key], want[key]), key).toBe(-1);
        expect(want[key].every(Number.isFinite), `${key} finite`).toBe(true);
      }
    });
});

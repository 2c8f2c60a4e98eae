// Products split between the calling thread and the wasm workers, each part a single-threaded cblas_sgemm
// (NativeGemm's splitSgemm, gemmSplit "workers"): bit for bit the one-thread product, on fresh random inputs,
// and a training step on two threads equal to the same step on one. Skipped in one line where no BLAS loads.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { koffiModulePath, loadBlas, loadOneDnn } from "../../src/backends/native/blas.js";
import * as T from "../../src/index.js";
import { expectClose, firstDifference, randomArray } from "../helpers.js";
import { matmulReference } from "./matmul-reference.js";

let unavailable: string | null = null;
try {
  await loadBlas();
} catch (err) {
  unavailable = (err as Error).message;
}
if (unavailable) process.stderr.write(`native worker-split tests skipped: ${unavailable}\n`);

describe.skipIf(unavailable !== null)("native: products split between the caller and the workers", () => {
  let worker: T.WorkerBlas;
  let heap: T.WasmKernels["wasmHeap"];
  let one: T.NativeGemm;
  let calls = 0;
  let split: T.NativeGemm;
  const resident = (host: Float32Array) => {
    // alloc before buffer(): an alloc that grows the memory leaves an earlier buffer() at the old length.
    const offset = heap.alloc(host.length * 4, false);
    const a = new Float32Array(heap.buffer(), offset, host.length);
    a.set(host);
    return a;
  };
  beforeAll(async () => {
    await T.initBackend("native", { threads: 2, activate: false });
    const wasm = T.wasmKernels() as T.WasmKernels;
    worker = wasm.workerBlas as T.WorkerBlas;
    heap = wasm.wasmHeap;
    const blas = (T.nativeGemm() as T.NativeGemm).blas;
    one = new T.NativeGemm(blas, { threads: 1 });
    const counted: T.WorkerBlas = {
      workers: worker.workers,
      load: (k, l) => worker.load(k, l),
      loadOneDnn: (l, o) => worker.loadOneDnn(l, o),
      gemmBf16: (...args) => worker.gemmBf16(...args),
      attentionGroups: (...args) => worker.attentionGroups(...args),
      owns: (...arrays) => worker.owns(...arrays),
      busy: () => worker.busy(),
      setSpin: (us) => worker.setSpin(us),
      get spinMicros() {
        return worker.spinMicros;
      },
      sgemm: (...args) => {
        calls++;
        return worker.sgemm(...args);
      },
    };
    split = new T.NativeGemm(blas, { threads: 2, worker: counted });
  });
  afterAll(() => {
    T.disposeNativeBackend();
    T.disposeWasmBackend();
  });

  it("a gemmSplit or workerSpinMicros it does not know is a BackendError naming it", async () => {
    T.disposeNativeBackend();
    await expect(
      T.initBackend("native", { threads: 2, activate: false, gemmSplit: "openmp" as T.GemmSplit }),
    ).rejects.toThrow(/gemmSplit must be "workers" or "library", got openmp/);
    await expect(T.initBackend("native", { threads: 2, activate: false, workerSpinMicros: -5 })).rejects.toThrow(
      /workerSpinMicros must be a number in \[0, 1e6\], got -5/,
    );
    await T.initBackend("native", { threads: 2, activate: false, gemmSplit: "library" });
    expect(T.nativeBackendInfo()?.gemmSplit).toBe("library");
    expect(T.nativeBackendInfo()?.summary).toContain("products split by the library");
    T.disposeNativeBackend();
    await T.initBackend("native", { threads: 2, activate: false });
  });

  it("says the workers split products (and the library does when asked)", () => {
    const info = T.nativeBackendInfo();
    expect(info?.gemmSplit).toBe("workers");
    expect(info?.summary).toContain("products split by the workers (at ");
    expect(info?.splitAlignment?.rows ?? info?.splitAlignment?.cols).toBeGreaterThanOrEqual(16);
    expect(worker.workers).toBe(1);
  });

  // The benchmark steps' shapes and odd ones that end mid register block (rows split; columns for the short,
  // wide C); every transpose and accumulate combination; a shared B (one tall product) and a batch.
  const shapes: [number, number, number][] = [
    [512, 256, 256],
    [256, 256, 512],
    [96, 700, 131],
    [300, 97, 301],
    [48, 2000, 100],
  ];
  let seed = 31000;
  for (const [m, n, k] of shapes)
    it(`${m}×${n}×${k}: bit for bit the one-thread product, all transposes, accumulating or not`, () => {
      for (const transA of [false, true])
        for (const transB of [false, true])
          for (const accumulate of [false, true])
            for (const batching of ["one", "shared B", "batch"] as const) {
              const batch = batching === "one" ? 1 : 2;
              const shape: T.MatmulShape = {
                batch,
                m,
                n,
                k,
                transA: batching === "shared B" ? false : transA,
                transB,
                accumulate,
                batchStrideB: batching === "shared B" ? 0 : k * n,
              };
              const a = resident(randomArray(batch * m * k, -1, 1, seed++));
              const b = resident(randomArray(batch * k * n, -1, 1, seed++));
              const initial = randomArray(batch * m * n, -1, 1, seed++);
              const got = resident(initial);
              const want = resident(initial);
              const before = calls;
              split.matmul(a, b, got, shape);
              one.matmul(a, b, want, shape);
              const what = `transA=${shape.transA} transB=${transB} accumulate=${accumulate} ${batching}`;
              expect(calls, what).toBeGreaterThan(before);
              expect(firstDifference(got, want), what).toBe(-1);
              // The one-thread product is checked against float64 in native.test.ts; here once per transpose pair.
              if (batching === "one" && accumulate)
                expectClose(got, matmulReference(a, b, initial, shape), 1e-5, 1e-5 * Math.sqrt(k));
            }
    });

  // LoRA's rank-16 products: split by rows where the probe found they keep their bits, whole where they have
  // too few rows (the weight gradient duᵀ·x has 16).
  const skinny: [number, number, number][] = [
    [512, 16, 256],
    [512, 256, 16],
    [2048, 688, 16],
    [300, 16, 700],
    [16, 256, 512],
  ];
  for (const [m, n, k] of skinny)
    it(`skinny ${m}×${n}×${k}: ${m > 16 ? "split by rows" : "whole"}, bit for bit the one-thread product`, () => {
      expect(T.nativeBackendInfo()?.skinnyRowSplit).toBe(split.skinnyRowSplit);
      const splits = m > 16 && split.skinnyRowSplit;
      for (const transA of [false, true])
        for (const transB of [false, true])
          for (const accumulate of [false, true]) {
            const shape: T.MatmulShape = { batch: 1, m, n, k, transA, transB, accumulate };
            const a = resident(randomArray(m * k, -1, 1, seed++));
            const b = resident(randomArray(k * n, -1, 1, seed++));
            const initial = randomArray(m * n, -1, 1, seed++);
            const got = resident(initial);
            const want = resident(initial);
            const before = calls;
            split.matmul(a, b, got, shape);
            one.matmul(a, b, want, shape);
            const what = `transA=${transA} transB=${transB} accumulate=${accumulate}`;
            expect(calls - before, what).toBe(splits ? 1 : 0);
            expect(firstDifference(got, want), what).toBe(-1);
          }
    });

  it("arrays outside the wasm memory, small products and skinny ones with few rows stay on this thread", () => {
    const [m, n, k] = [256, 128, 128];
    const a = randomArray(m * k, -1, 1, seed++);
    const b = randomArray(k * n, -1, 1, seed++);
    const before = calls;
    const got = new Float32Array(m * n);
    split.matmul(a, b, got, { batch: 1, m, n, k });
    const small = resident(new Float32Array(16 * 16));
    split.matmul(resident(a.subarray(0, 256)), resident(b.subarray(0, 256)), small, { batch: 1, m: 16, n: 16, k: 16 });
    // 16×688×2048 is 45 MFLOP but skinny with 16 rows (LoRA's weight gradient); 128×128×64 an attention tile.
    const skinny = resident(new Float32Array(16 * 688));
    split.matmul(resident(new Float32Array(16 * 2048)), resident(new Float32Array(2048 * 688)), skinny, {
      batch: 1,
      m: 16,
      n: 688,
      k: 2048,
    });
    const tiles = resident(new Float32Array(128 * 128));
    split.matmul(resident(new Float32Array(128 * 64)), resident(new Float32Array(64 * 128)), tiles, {
      batch: 1,
      m: 128,
      n: 128,
      k: 64,
    });
    expect(calls).toBe(before);
    expectClose(got, matmulReference(a, b, got, { batch: 1, m, n, k }), 1e-5, 1e-4);
  });

  it("a hundred and fifty short products back to back (the worker polling between them) keep the one-thread bits", () => {
    const sizes: [number, number, number][] = [
      [128, 256, 256],
      [256, 128, 256],
      [64, 512, 256],
    ];
    const inputs = sizes.map(([m, n, k]) => ({
      a: resident(randomArray(m * k, -1, 1, seed++)),
      b: resident(randomArray(k * n, -1, 1, seed++)),
      got: resident(new Float32Array(m * n)),
      want: new Float32Array(m * n),
    }));
    for (const [i, [m, n, k]] of sizes.entries())
      one.matmul(inputs[i].a, inputs[i].b, inputs[i].want, { batch: 1, m, n, k });
    const before = calls;
    for (let r = 0; r < 150; r++) {
      const i = r % sizes.length;
      const [m, n, k] = sizes[i];
      inputs[i].got.fill(Number.NaN);
      split.matmul(inputs[i].a, inputs[i].b, inputs[i].got, { batch: 1, m, n, k });
      if (r >= 147) expect(firstDifference(inputs[i].got, inputs[i].want)).toBe(-1);
    }
    expect(calls - before).toBe(150);
  });

  it("a library the workers cannot load is reported, not thrown, and products still split on the loaded one", async () => {
    const koffiPath = await koffiModulePath();
    expect(koffiPath).toMatch(/koffi/);
    expect(worker.load(koffiPath as string, "/nonexistent/libnothing.so")).toMatch(
      /worker 0 could not load .*libnothing/,
    );
    const [m, n, k] = [256, 256, 128];
    const a = resident(randomArray(m * k, -1, 1, seed++));
    const b = resident(randomArray(k * n, -1, 1, seed++));
    const got = resident(new Float32Array(m * n));
    const want = new Float32Array(m * n);
    split.matmul(a, b, got, { batch: 1, m, n, k });
    one.matmul(a, b, want, { batch: 1, m, n, k });
    expect(firstDifference(got, want)).toBe(-1);
  });
});

const onednn = unavailable === null ? await loadOneDnn() : "no BLAS";
if (typeof onednn === "string") process.stderr.write(`oneDNN worker-split tests skipped: ${onednn}\n`);

describe.skipIf(typeof onednn === "string")(
  "native: oneDNN bf16 products split between the caller and the workers",
  () => {
    afterAll(() => {
      T.disposeNativeBackend();
      T.disposeWasmBackend();
    });

    it("bit for bit the one-thread oneDNN product, all transposes, accumulating or not", async () => {
      await T.initBackend("native", { threads: 2, activate: false, bf16Gemm: "onednn" });
      const wasm = T.wasmKernels() as T.WasmKernels;
      const worker = wasm.workerBlas as T.WorkerBlas;
      const heap = wasm.wasmHeap;
      const lib = onednn as Exclude<typeof onednn, string>;
      const blas = (T.nativeGemm() as T.NativeGemm).blas;
      const f32 = (n: number) => {
        const offset = heap.alloc(n * 4, false);
        return new Float32Array(heap.buffer(), offset, n);
      };
      const u16 = (n: number) => {
        const offset = heap.alloc(n * 2, false);
        return new Uint16Array(heap.buffer(), offset, n);
      };
      const converter = {
        widen: (bits: Uint16Array, out: Float32Array, n: number) => wasm.bf16Resident("widen", bits, out, n),
        round: (x: Float32Array, out: Uint16Array, n: number) => wasm.bf16Resident("round", x, out, n),
        f32,
        u16,
        free: (a: Float32Array | Uint16Array) => heap.release(a.byteOffset, a.byteLength),
      };
      let calls = 0;
      const counted: T.WorkerBlas = {
        ...worker,
        workers: worker.workers,
        spinMicros: worker.spinMicros,
        gemmBf16: (...args) => {
          calls++;
          return worker.gemmBf16(...args);
        },
      };
      const options = { bf16Gemm: "onednn" as const, onednn: lib, converter };
      const one = new T.NativeGemm(blas, { ...options, threads: 1 });
      const split = new T.NativeGemm(blas, { ...options, threads: 2, worker: counted, onednnOnWorkers: true });
      let seed = 52000;
      for (const [m, n, k] of [
        [512, 256, 256],
        [64, 640, 208],
        [40, 1000, 210],
      ])
        for (const transA of [false, true])
          for (const transB of [false, true])
            for (const accumulate of [false, true]) {
              const shape: T.MatmulShape = { batch: 1, m, n, k, transA, transB, accumulate };
              const a = f32(m * k);
              a.set(randomArray(m * k, -1, 1, seed++));
              const bits = u16(k * n);
              bits.set(Uint16Array.from(randomArray(k * n, -1, 1, seed++), (x) => T.f32ToBf16Bits(x)));
              const initial = randomArray(m * n, -1, 1, seed++);
              const got = f32(m * n);
              got.set(initial);
              const want = f32(m * n);
              want.set(initial);
              const before = calls;
              split.matmulBf16B(a, bits, got, shape);
              one.matmulBf16B(a, bits, want, shape);
              const what = `${m}×${n}×${k} transA=${transA} transB=${transB} accumulate=${accumulate}`;
              expect(calls, what).toBeGreaterThan(before);
              expect(firstDifference(got, want), what).toBe(-1);
            }
    });
  },
);

/** Loss and every gradient of a one-layer decoder (f32 weights) on the active backend. */
function decoderStep(): Float32Array[] {
  const [B, S, D, H, F, V] = [4, 64, 256, 4, 512, 300];
  let seed = 4100;
  const param = (shape: number[], scale: number) =>
    T.Tensor.fromHost(randomArray(shape[0] * (shape[1] ?? 1), -scale, scale, seed++), shape).requireGrad();
  const embed = param([V, D], 1);
  const [wq, wk, wv, wo] = [0, 1, 2, 3].map(() => param([D, D], 0.1));
  const gate = param([F, D], 0.1);
  const up = param([F, D], 0.1);
  const down = param([D, F], 0.1);
  const norm = param([D], 1);
  const params = [embed, wq, wk, wv, wo, gate, up, down, norm];
  const ids = Int32Array.from(randomArray(B * S, 0, V, seed++), (x) => Math.floor(x));
  return T.tidy(() => {
    const heads = (x: T.Tensor) => T.permute(T.reshape(x, [B, S, H, D / H]), [0, 2, 1, 3]);
    const x = T.embedding(embed, T.Tensor.fromHost(ids, [B, S], "i32"));
    const n = T.rmsNorm(x, norm, { eps: 1e-5 });
    const att = T.attention(heads(T.linear(n, wq)), heads(T.linear(n, wk)), heads(T.linear(n, wv)), { causal: true });
    const h = T.add(x, T.linear(T.reshape(T.permute(att, [0, 2, 1, 3]), [B, S, D]), wo));
    const m = T.add(h, T.linear(T.swiglu(T.linear(h, gate), T.linear(h, up)), down));
    const logits = T.reshape(T.matmul(m, T.transpose(embed)), [B * S, V]);
    const targets = Int32Array.from(ids, (v) => (v + 1) % V);
    const loss = T.crossEntropy(logits, T.Tensor.fromHost(targets, [B * S], "i32"));
    T.backward(loss);
    return [loss.toFloat32Array(), ...params.map((p) => (p.grad as T.Tensor).toFloat32Array())];
  });
}

describe.skipIf(unavailable !== null)("native: a training step on two threads (workers) equals one thread", () => {
  afterAll(() => {
    T.disposeNativeBackend();
    T.disposeWasmBackend();
  });

  it("loss and every gradient bit for bit", async () => {
    const run = async (threads: number) => {
      T.disposeNativeBackend();
      T.disposeWasmBackend();
      await T.initBackend("native", { threads, activate: false });
      // Count the parts the worker ran (the backend's NativeGemm holds this same object).
      let parts = 0;
      let groupJobs = 0;
      const worker = T.wasmKernels()?.workerBlas;
      if (worker) {
        const sgemm = worker.sgemm;
        worker.sgemm = (...args) => {
          parts++;
          return sgemm(...args);
        };
        const attentionGroups = worker.attentionGroups;
        worker.attentionGroups = (...args) => {
          groupJobs++;
          return attentionGroups(...args);
        };
      }
      const values = T.withBackend("native", decoderStep);
      return { split: T.nativeBackendInfo()?.gemmSplit, values, parts, groupJobs };
    };
    const one = await run(1);
    const two = await run(2);
    expect(two.split).toBe("workers");
    expect(two.parts).toBeGreaterThan(10);
    // Attention forward and backward ran by kv-head groups on the worker too (wasm/attention-groups.ts).
    expect(two.groupJobs).toBe(2);
    expect(two.values.length).toBe(one.values.length);
    for (const [i, v] of one.values.entries()) expect(firstDifference(two.values[i], v), `value ${i}`).toBe(-1);
    expect(one.values[0][0]).toBeGreaterThan(0);
  });
});

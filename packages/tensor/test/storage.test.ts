// Storage semantics: backend-owned memory, views, dispose / tidy / keep, pools, live-bytes counters, async
// and sync reads, typed errors; and js/wasm parity of the generic kernels on resident wasm memory.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { randomArray } from "./helpers.js";

let seed = 9100;
const rand = (shape: number[], lo = -1, hi = 1) =>
  T.Tensor.fromHost(
    randomArray(
      shape.reduce((a, b) => a * b, 1),
      lo,
      hi,
      seed++,
    ),
    shape,
  );

beforeAll(async () => {
  await T.initBackend("wasm", { threads: 2, activate: false });
});

afterAll(() => {
  T.disposeWasmBackend();
});

describe.each(["js", "wasm"])("storage on %s", (backend) => {
  const on = <R>(fn: () => R): R => T.withBackend(backend, fn);

  it("views share storage: reshape and narrow on dim 0 write through, other slices copy", () => {
    on(() => {
      const x = rand([4, 3]);
      const v = T.reshape(x, [2, 6]);
      const rows = T.narrow(x, 0, 1, 3);
      const cols = T.narrow(x, 1, 0, 2);
      expect(v.storage).toBe(x.storage);
      expect(rows.storage).toBe(x.storage);
      expect(rows.offset).toBe(3);
      expect(cols.storage).not.toBe(x.storage);
      (x.dataSync() as Float32Array)[4] = 42;
      expect(v.dataSync()[4]).toBe(42);
      expect(rows.dataSync()[1]).toBe(42);
      expect(cols.dataSync()[2]).not.toBe(42);
    });
  });

  it("dispose frees: live bytes go down, the pool is reused, views keep storage alive", () => {
    on(() => {
      const storage = T.storageOf(backend);
      const before = storage.memory();
      const a = T.zeros([1000, 37]);
      const after = storage.memory();
      expect(after.liveBytes - before.liveBytes).toBeGreaterThanOrEqual(1000 * 37 * 4);
      expect(after.allocations).toBe(before.allocations + 1);
      const view = T.reshape(a, [37000]);
      a.dispose();
      expect(storage.memory().liveBytes).toBe(after.liveBytes); // the view still holds it
      view.dispose();
      const freed = storage.memory();
      expect(freed.liveBytes).toBe(before.liveBytes);
      expect(freed.pooledBytes).toBeGreaterThan(before.pooledBytes);
      const b = T.zeros([37000]);
      expect(storage.memory().pooledBytes).toBe(freed.pooledBytes - (after.liveBytes - before.liveBytes));
      expect(Array.from(b.dataSync().subarray(0, 5))).toEqual([0, 0, 0, 0, 0]); // pooled memory is re-zeroed
      b.dispose();
    });
  });

  it("use after dispose is a DisposedError, in reads and in ops", () => {
    on(() => {
      const a = rand([3]);
      a.dispose();
      a.dispose(); // idempotent
      expect(() => a.dataSync()).toThrow(T.DisposedError);
      expect(() => T.add(a, 1)).toThrow(T.DisposedError);
      expect(a.isDisposed).toBe(true);
    });
  });

  it("tidy frees intermediates and keeps results, kept tensors, leaf grads and what the tape needs", () => {
    on(() => {
      const storage = T.storageOf(backend);
      const w = rand([8, 8]).requireGrad();
      const x = rand([4, 8]);
      const live0 = storage.memory().liveBytes;
      let intermediate: T.Tensor | null = null;
      let kept: T.Tensor | null = null;
      const loss = T.tidy(() => {
        intermediate = T.exp(T.mul(x, 0.5));
        kept = T.keep(T.ones([5]));
        return T.sum(T.silu(T.matmul(intermediate, w)));
      });
      // The tape still reads it (through the view matmul made of it): its storage survives.
      expect((intermediate as unknown as T.Tensor).storage.released).toBe(false);
      expect((kept as unknown as T.Tensor).isDisposed).toBe(false);
      T.tidy(() => T.backward(loss));
      expect(w.grad?.isDisposed).toBe(false);
      expect(Number.isFinite(w.grad?.dataSync()[0] ?? Number.NaN)).toBe(true);
      // Without grad, nothing but the result survives.
      let tmp: T.Tensor | null = null;
      const y = T.noGrad(() =>
        T.tidy(() => {
          tmp = T.exp(x);
          return T.sum(tmp);
        }),
      );
      expect((tmp as unknown as T.Tensor).isDisposed).toBe(true);
      expect(y.isDisposed).toBe(false);
      T.dispose([loss, y, kept, w.grad]);
      w.grad = null;
      expect(storage.memory().liveBytes).toBeLessThanOrEqual(live0 + 4 * 8 * 4 * 3);
    });
  });

  it("optimizer.zeroGrad frees the leaf gradients: repeated steps in tidy do not grow live memory", () => {
    on(() => {
      const storage = T.storageOf(backend);
      const w = rand([16, 16]).requireGrad();
      const b = rand([16]).requireGrad();
      const x = rand([5, 16]);
      const opt = new T.AdamW([w, b], { lr: 1e-3 });
      const step = () =>
        T.tidy(() => {
          T.backward(T.sum(T.silu(T.add(T.matmul(x, w), b))));
          opt.step();
          opt.zeroGrad();
        });
      step();
      const live = storage.memory().liveBytes;
      const grad = w.grad;
      expect(grad).toBeNull();
      for (let i = 0; i < 5; i++) step();
      // Before zeroGrad disposed them, every step left one gradient buffer per parameter behind.
      expect(storage.memory().liveBytes).toBe(live);
    });
  });

  it("tidy disposes what it made when fn throws, and nested tidies hand survivors outward", () => {
    on(() => {
      let inner: T.Tensor | null = null;
      expect(() =>
        T.tidy(() => {
          inner = T.zeros([3]);
          throw new Error("boom");
        }),
      ).toThrow("boom");
      expect((inner as unknown as T.Tensor).isDisposed).toBe(true);
      let middle: T.Tensor | null = null;
      const out = T.tidy(() => {
        middle = T.tidy(() => T.ones([2]));
        return T.add(middle, 1);
      });
      expect((middle as unknown as T.Tensor).isDisposed).toBe(true);
      expect(Array.from(out.dataSync())).toEqual([2, 2]);
    });
  });

  it("async reads give copies on every backend: data(), array(), itemAsync(), toFloat32ArrayAsync()", async () => {
    const t = on(() => rand([2, 3]));
    const host = await t.data();
    expect(Array.from(host)).toEqual(Array.from(t.dataSync()));
    (host as Float32Array)[0] = 123;
    expect(t.dataSync()[0]).not.toBe(123);
    expect(await t.array()).toEqual(Array.from(t.dataSync()));
    const s = on(() => T.sum(t));
    expect(await s.itemAsync()).toBe(s.item());
    const h = on(() => t.to("bf16"));
    expect(Array.from(await h.toFloat32ArrayAsync())).toEqual(Array.from(h.toFloat32Array()));
  });
});

describe("wasm residency", () => {
  it("tensors made under wasm live in the kernels' memory and kernels use them in place", () => {
    const heap = T.wasmKernels()?.wasmHeap;
    if (!heap) throw new Error('the wasm backend has no heap: initBackend("wasm") did not run');
    T.withBackend("wasm", () => {
      const a = rand([33, 17]);
      const b = rand([17, 9]);
      // Inside tidy op outputs are heap blocks too; outside, the garbage collector owns them (host arrays).
      const c = T.tidy(() => T.matmul(a, b));
      for (const t of [a, b, c]) expect(heap.owns(t.dataSync())).toBe(true);
      expect(heap.owns(T.matmul(a, b).dataSync())).toBe(false);
      expect(T.matmul(a, b).backend).toBe("wasm");
      const ref = T.withBackend("js", () => T.matmul(a, b));
      expect(heap.owns(ref.dataSync())).toBe(false);
      const d = c.dataSync();
      const r = ref.dataSync();
      for (let i = 0; i < d.length; i++) expect(Math.abs(d[i] - r[i])).toBeLessThan(1e-5);
    });
  });

  it("attention scratch that grows the memory is a full-length view of the grown memory", () => {
    const kernels = T.wasmKernels();
    const heap = kernels?.wasmHeap;
    if (!kernels || !heap) throw new Error('the wasm backend has no heap: initBackend("wasm") did not run');
    // More floats than the memory holds now, so the allocation must grow it (a view taken of the buffer
    // before the growth was too short: RangeError in the native bf16 GEMM's scratch).
    const n = heap.buffer().byteLength / 4 + 1024;
    const scratch = kernels.attentionTiles.scratch(n);
    expect(scratch.length).toBe(n);
    expect(scratch.buffer.byteLength).toBeGreaterThanOrEqual(scratch.byteOffset + n * 4);
    scratch[n - 1] = 7;
    expect(scratch[n - 1]).toBe(7);
    kernels.attentionTiles.release(scratch);
  });

  it("a released block is reused by the next allocation of its size class", () => {
    T.withBackend("wasm", () => {
      const a = T.zeros([4096]);
      const ptr = a.dataSync().byteOffset;
      a.dispose();
      const b = T.zeros([4000]);
      expect(b.dataSync().byteOffset).toBe(ptr);
      b.dispose();
    });
  });
});

describe("a backend whose memory the host cannot read", () => {
  // A stand-in device: memory is opaque objects, no kernels registered.
  class Opaque {
    constructor(readonly values: T.StorageArray) {}
  }
  const device: T.StorageBackend<Opaque, Opaque> = {
    name: "opaque-test",
    hostVisible: false,
    epoch: 0,
    adoptsUploads: false,
    releaseOnGc: false,
    alloc: (dtype, size) => new Opaque(T.allocate(dtype, size)),
    upload: (host) => new Opaque(host.slice() as T.StorageArray),
    view: (native) => native,
    read: (native, _d, offset, length) =>
      Promise.resolve(native.values.slice(offset, offset + length) as T.StorageArray),
    release: () => {},
    memory: () => ({ liveBytes: 0, pooledBytes: 0, peakBytes: 0, allocations: 0 }),
  };

  it("dataSync throws DataSyncError, await data() works, a missing kernel is a MissingKernelError", async () => {
    T.registerBackend(device, {});
    try {
      const t = T.withBackend("opaque-test", () => T.tensor([1, 2, 3]));
      expect(t.backend).toBe("opaque-test");
      expect(() => t.dataSync()).toThrow(T.DataSyncError);
      expect(() => t.dataSync()).toThrow(/await t.data\(\)/);
      expect(Array.from(await t.data())).toEqual([1, 2, 3]);
      expect(() => T.withBackend("opaque-test", () => T.exp(t))).toThrow(T.MissingKernelError);
      expect(() => T.withBackend("opaque-test", () => T.exp(t))).toThrow(/"unary".*"opaque-test"/);
      // From the js backend its memory cannot be reached synchronously either.
      expect(() => T.exp(t)).toThrow(T.DataSyncError);
      // An optimizer refuses a host parameter while the device is active (its update would be lost).
      const p = new T.Tensor(Float32Array.of(1, 2), [2]).requireGrad();
      p.grad = new T.Tensor(Float32Array.of(0.5, 0.5), [2]);
      const opt = new T.SGD([p], 0.1);
      expect(() => T.withBackend("opaque-test", () => opt.step())).toThrow(/lives on backend "js"/);
    } finally {
      T.unregisterBackend("opaque-test");
    }
  });
});

// The generic kernels on wasm (the js fallback working on resident heap views) must match js exactly.
describe("js/wasm parity of the generic kernels (odd sizes)", () => {
  const shapes = [
    [7, 13],
    [3, 1, 5],
    [1, 33],
  ];
  const both = (fn: () => T.Tensor | T.Tensor[]) => {
    const js = [fn()].flat().map((t) => Array.from(t.toFloat32Array()));
    const wasm = T.withBackend("wasm", () => [fn()].flat().map((t) => Array.from(t.toFloat32Array())));
    expect(wasm).toEqual(js);
  };
  for (const shape of shapes) {
    it(`unary, binary with broadcasting, where, clamp, compare ${JSON.stringify(shape)}`, () => {
      const a = rand(shape, 0.1, 2);
      const b = rand([shape[shape.length - 1]], -2, 2);
      both(() => [
        ...[
          "exp",
          "log",
          "sqrt",
          "rsqrt",
          "tanh",
          "sigmoid",
          "silu",
          "gelu",
          "geluTanh",
          "relu",
          "softplus",
          "abs",
        ].map((op) => (T as unknown as Record<string, (x: T.Tensor) => T.Tensor>)[op](T.sub(a, 1))),
        T.add(a, b),
        T.mul(b, a),
        T.div(a, b),
        T.pow(a, 1.5),
        T.maximum(a, b),
        T.sub(3, a),
        T.where(T.compare("gt", a, 1), a, b),
        T.clamp(a, 0.5, 1.5),
        T.compare("le", a, b),
      ]);
    });
    it(`reductions, softmax, argmax, movement, gather, scatter, casts ${JSON.stringify(shape)}`, () => {
      const x = rand(shape, -3, 3);
      const last = shape.length - 1;
      const n = shape[last];
      const ids = T.tensor(
        Array.from({ length: 5 }, (_, i) => (i * 7) % shape[0]),
        [5],
        "i32",
      );
      both(() => [
        T.sum(x, last),
        T.sum(x),
        T.max(x, 0, true),
        T.min(x, last),
        T.logsumexp(x, last),
        T.softmax(x),
        T.logSoftmax(x, 0),
        T.argmax(x, last),
        T.transpose(x, 0, last),
        T.narrow(x, last, 1, n),
        T.concat([x, T.exp(x)], last),
        T.embedding(T.reshape(x, [shape[0], -1]), ids),
        T.scatterAdd(T.reshape(x, [shape[0], -1]), ids, T.ones([5, x.size / shape[0]])),
        T.gather(x, last, T.argmax(x, last, true)),
        x.to("bf16"),
        x.to("f16").to("f32"),
        x.to("i32"),
        T.arange(0, n, 0.5),
        T.full(shape, 0.3),
      ]);
    });
    it(`gradients through the generic kernels ${JSON.stringify(shape)}`, () => {
      const grads = () => {
        const x = T.Tensor.fromHost(
          randomArray(
            shape.reduce((p, q) => p * q, 1),
            -1,
            1,
            777,
          ),
          shape,
        ).requireGrad();
        const y = T.sum(T.mul(T.softmax(T.tanh(x)), T.logsumexp(T.clamp(x, -0.5, 0.5), 0, true)));
        T.backward(y);
        return [y, x.grad as T.Tensor];
      };
      both(grads);
    });
  }
});

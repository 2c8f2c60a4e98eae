// Every backend runs the same ops and must agree with the js reference.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { expectClose, randomArray } from "./helpers.js";

// Inputs from fixed seeds so every backend sees identical data.
function randomTensor(shape: number[], seed: number, lo = -1, hi = 1, grad = true): T.Tensor {
  const t = new T.Tensor(
    randomArray(
      shape.reduce((a, b) => a * b, 1),
      lo,
      hi,
      seed,
    ),
    shape,
  );
  t.requiresGrad = grad;
  return t;
}

type Case = { name: string; run: () => T.Tensor[] };

// Each case returns outputs and gradients so forward and backward are compared.
const cases: Case[] = [
  {
    name: "AdamW steps (SIMD update on wasm, 70,001 elements split across threads)",
    run: () => {
      const w = randomTensor([70001], 21);
      const opt = new T.AdamW([w], { lr: 0.01, weightDecay: 0.1 });
      for (let step = 0; step < 3; step++) {
        opt.zeroGrad();
        T.backward(T.sum(T.mul(T.square(w), randomTensor([70001], 22 + step, -1, 1, false))));
        opt.step();
      }
      const state = opt.stateDict();
      return [
        w.detach(),
        new T.Tensor(state.buffers.exp_avg[0], [70001]),
        new T.Tensor(state.buffers.exp_avg_sq[0], [70001]),
      ];
    },
  },
  {
    name: "swiglu fwd+bwd split across threads (75,000 elements)",
    run: () => {
      const g = randomTensor([300, 250], 19, -6, 6);
      const u = randomTensor([300, 250], 20);
      const y = T.swiglu(g, u);
      T.backward(T.sum(T.square(y)));
      return [y, g.grad!, u.grad!];
    },
  },
  {
    name: "swiglu fwd+bwd (odd length, vector body and scalar tail)",
    run: () => {
      const g = randomTensor([7, 37], 17, -6, 6);
      const u = randomTensor([7, 37], 18);
      const y = T.swiglu(g, u);
      T.backward(T.sum(T.square(y)));
      return [y, g.grad!, u.grad!];
    },
  },
  {
    name: "attention GQA + causal + padding fwd+bwd (GEMM-tiled on wasm)",
    run: () => {
      const q = randomTensor([2, 4, 70, 8], 11);
      const k = randomTensor([2, 2, 70, 8], 12);
      const v = randomTensor([2, 2, 70, 8], 13);
      const keyMask = Uint8Array.from({ length: 140 }, (_, i) => (i >= 70 && i < 73 ? 0 : 1));
      const y = T.attention(q, k, v, { causal: true, keyMask });
      T.backward(T.sum(T.square(y)));
      return [y, q.grad!, k.grad!, v.grad!];
    },
  },
  {
    name: "attention KV-cache decode (tq < tk), non-causal",
    run: () => {
      const q = randomTensor([1, 2, 3, 8], 14);
      const k = randomTensor([1, 2, 9, 8], 15);
      const v = randomTensor([1, 2, 9, 8], 16);
      const a = T.attention(q, k, v, { causal: true });
      const b = T.attention(q, k, v, { causal: false });
      T.backward(T.add(T.sum(T.square(a)), T.sum(b)));
      return [a, b, q.grad!, k.grad!, v.grad!];
    },
  },
  {
    name: "matmul (batched, transposes) fwd+bwd",
    run: () => {
      const a = randomTensor([3, 17, 9], 1);
      const b = randomTensor([3, 13, 9], 2);
      const y = T.matmul(a, b, { transB: true });
      T.backward(T.sum(T.square(y)));
      return [y, a.grad!, b.grad!];
    },
  },
  {
    name: "linear with a frozen bf16 weight",
    run: () => {
      const x = randomTensor([5, 33], 3);
      const w = randomTensor([21, 33], 4, -1, 1, false).to("bf16");
      const y = T.linear(x, w);
      T.backward(T.sum(T.square(y)));
      return [y, x.grad!];
    },
  },
  {
    name: "rmsNorm fwd+bwd",
    run: () => {
      const x = randomTensor([7, 24], 5, -2, 2);
      const w = randomTensor([24], 6, 0.5, 1.5);
      const y = T.rmsNorm(x, w, { eps: 1e-5 });
      T.backward(T.sum(T.square(y)));
      return [y, x.grad!, w.grad!];
    },
  },
  {
    name: "rope fwd+bwd, full rotary, shared positions, split across threads (1,048,576 elements)",
    run: () => {
      const x = randomTensor([2, 16, 256, 128], 23, -3, 3);
      const positions = Int32Array.from({ length: 256 }, (_, i) => 3 * i + 1);
      const y = T.rope(x, positions, T.ropeInvFreq(128, 10000));
      T.backward(T.sum(T.mul(y, randomTensor([2, 16, 256, 128], 24, -1, 1, false))));
      return [y, x.grad!];
    },
  },
  {
    name: "rope fwd+bwd, partial rotary 12 of 16, per-batch positions",
    run: () => {
      const x = randomTensor([3, 2, 5, 16], 25, -3, 3);
      const positions = Int32Array.from({ length: 15 }, (_, i) => (i * 37) % 101);
      const y = T.rope(x, positions, T.ropeInvFreq(12, 10000), { rotaryDim: 12 });
      T.backward(T.sum(T.mul(y, randomTensor([3, 2, 5, 16], 26, -1, 1, false))));
      return [y, x.grad!];
    },
  },
  {
    name: "ropeHeads fwd+bwd ([B, T, H, D] in, head permute fused), partial rotary, split across threads",
    run: () => {
      const x = randomTensor([2, 128, 32, 136], 30, -3, 3);
      const positions = Int32Array.from({ length: 256 }, (_, i) => (i * 7) % 300);
      const y = T.ropeHeads(x, positions, T.ropeInvFreq(128, 10000), { rotaryDim: 128 });
      T.backward(T.sum(T.mul(y, randomTensor([2, 32, 128, 136], 31, -1, 1, false))));
      return [y, x.grad!];
    },
  },
  {
    name: "rmsNorm fwd+bwd split across threads (2100×130), zero-centred, and with a frozen weight",
    run: () => {
      const x = randomTensor([2100, 130], 27, -2, 2);
      const w = randomTensor([130], 28, -0.5, 0.5);
      const y = T.rmsNorm(x, w, { eps: 1e-6, zeroCentered: true });
      const frozen = randomTensor([130], 29, 0.5, 1.5, false);
      const y2 = T.rmsNorm(x, frozen, { eps: 1e-6 });
      T.backward(T.add(T.sum(T.square(y)), T.sum(T.mul(y2, x))));
      return [y, y2, x.grad!, w.grad!];
    },
  },
  {
    name: "cross-entropy fwd+bwd",
    run: () => {
      const logits = randomTensor([9, 50], 7, -4, 4);
      const y = T.crossEntropy(logits, T.tensor([1, 2, -100, 4, 49, 0, 7, 8, 9], [9], "i32"));
      T.backward(y);
      return [y, logits.grad!];
    },
  },
];

function runOn(backend: string, index: number): Float32Array[] {
  return T.withBackend(backend, () => cases[index].run().map((t) => t.toFloat32Array()));
}

describe("backend parity: wasm vs js", () => {
  beforeAll(async () => {
    await T.initBackend("wasm", { threads: 2, activate: false });
  });
  afterAll(() => T.disposeWasmBackend());

  it("registers the wasm backend after init", () => {
    expect(T.listBackends()).toContain("wasm");
  });

  for (const [i, c] of cases.entries()) {
    it(c.name, () => {
      const jsOut = runOn("js", i);
      const wasmOut = runOn("wasm", i);
      for (const [k, ref] of jsOut.entries()) expectClose(wasmOut[k], ref, 1e-4, 1e-5);
    });
  }
});

describe("backend parity: gpujs vs js", () => {
  beforeAll(async () => {
    // In CI there is no GL context: gpu.js runs its CPU fallback; with headless-gl built
    // (see the package README) the same suite runs on WebGL via KILN_GPUJS_MODE=headlessgl.
    const mode = (process.env.KILN_GPUJS_MODE as "cpu" | "headlessgl" | undefined) ?? "cpu";
    await T.initBackend("gpujs", { gpujsMode: mode, activate: false });
  });
  afterAll(() => T.disposeGpujsBackend());

  it("reports the mode gpu.js runs in", () => {
    expect(T.gpujsMode()).toBe(process.env.KILN_GPUJS_MODE ?? "cpu");
  });

  for (const [i, c] of cases.entries()) {
    it(c.name, () => {
      const jsOut = runOn("js", i);
      const gpuOut = runOn("gpujs", i);
      for (const [k, ref] of jsOut.entries()) expectClose(gpuOut[k], ref, 1e-4, 1e-5);
    });
  }
});

describe("backend lifecycle", () => {
  it("dispose unregisters the backend (falling back to js) and initBackend starts it again", async () => {
    await T.initBackend("wasm", { threads: 1 });
    expect(T.getBackend()).toBe("wasm");
    T.disposeWasmBackend();
    expect(T.getBackend()).toBe("js");
    expect(T.hasBackend("wasm")).toBe(false);
    await T.initBackend("wasm", { threads: 1 });
    expect(T.matmul(T.ones([2, 3]), T.ones([3, 2])).toArray()).toEqual([3, 3, 3, 3]);
    T.disposeWasmBackend();
  });
});

describe("backend selection errors", () => {
  it("setBackend on an unregistered backend names it and the fix", () => {
    expect(() => T.setBackend("nope")).toThrow(/backend "nope" is not registered.*initBackend\("nope"\)/);
    return expect(T.initBackend("nope")).rejects.toThrow(T.BackendError);
  });
});

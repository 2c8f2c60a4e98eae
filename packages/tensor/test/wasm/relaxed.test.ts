// Relaxed SIMD is opt-in (js-stack spec §3): this file turns the V8 flag on for its own test process.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BackendError } from "../../src/errors.js";
import {
  type WasmKernels,
  createWasmKernels,
  enableRelaxedSimd,
  relaxedSimdSupported,
  wasmSimdSupported,
} from "../../src/wasm/index.js";
import { expectDecodeBitsOfForward } from "./decode-bits.js";
import { matmulRef, randomF32, relError, rng } from "./reference.js";

const SEED = Date.now() % 1_000_000;

describe("relaxed SIMD variant", () => {
  let kernels: WasmKernels;
  beforeAll(async () => {
    expect(wasmSimdSupported()).toBe(true);
    // Node 20 (V8 11.3) ships relaxed SIMD behind a flag; nothing turns it on at import.
    if (!relaxedSimdSupported())
      await expect(createWasmKernels({ threads: 1, relaxedSimd: true })).rejects.toThrow(BackendError);
    expect(enableRelaxedSimd()).toBe(true);
    kernels = await createWasmKernels({ threads: 2, relaxedSimd: true });
  });
  afterAll(() => kernels.dispose());

  it("is selected by 'auto' once enabled", async () => {
    const auto = await createWasmKernels({ threads: 1 });
    expect(auto.relaxedSimd).toBe(true);
    auto.dispose();
    expect(kernels.relaxedSimd).toBe(true);
  });

  it(`matches the float64 reference for odd sizes and transposes (seed ${SEED})`, () => {
    const next = rng(SEED);
    for (const [m, n, k] of [
      [1, 1, 1],
      [3, 5, 7],
      [67, 130, 290],
    ])
      for (const transA of [false, true])
        for (const transB of [false, true]) {
          const shape = { batch: 2, m, n, k, transA, transB, batchStrideA: 0 };
          const a = randomF32(m * k, next);
          const b = randomF32(2 * k * n, next);
          const out = new Float32Array(2 * m * n);
          kernels.matmul(a, b, out, shape);
          expect(relError(out, matmulRef(a, b, shape))).toBeLessThan(1e-4);
        }
  });

  it(`decode rows keep attentionForward's bits with relaxed_madd sums (seed ${SEED})`, () => {
    expectDecodeBitsOfForward(kernels, SEED);
  });
});

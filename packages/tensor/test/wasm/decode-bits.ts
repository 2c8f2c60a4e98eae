// Decode attention (attentionDecodeRagged) computes each query row's products without gemm_block but with its
// summation order (scripts/wat/attention.mjs, decodeProducts): the bits must equal attentionForward's for that
// row. Shared by the plain-SIMD tests and the relaxed-SIMD ones (the FMA variant sums with relaxed_madd).
import { expect } from "vitest";
import type { WasmKernels } from "../../src/wasm/index.js";
import { firstDifference } from "../helpers.js";
import { randomF32, rng } from "./reference.js";

/**
 * For head sizes that are not multiples of 4 or exceed one k block (256), and caches longer than one block of
 * keys, with spare capacity and GQA: every row of a ragged decode call equals attentionForward of that row alone.
 */
export function expectDecodeBitsOfForward(kernels: WasmKernels, seed: number): void {
  const next = rng(seed);
  const heads = 4;
  const kvHeads = 2;
  for (const dim of [8, 10, 64, 264])
    for (const lengths of [
      [1, 3, 300],
      [257, 64, 5],
    ]) {
      const capacities = lengths.map((n, b) => n + 4 * b);
      const keys = capacities.map((c) => randomF32(kvHeads * c * dim, next));
      const values = capacities.map((c) => randomF32(kvHeads * c * dim, next));
      const q = randomF32(lengths.length * heads * dim, next);
      const out = new Float32Array(q.length);
      const lse = new Float32Array(lengths.length * heads);
      const scale = 1 / Math.sqrt(dim);
      kernels.attentionDecodeRagged(q, keys, values, out, lse, {
        batch: lengths.length,
        heads,
        kvHeads,
        headDim: dim,
        scale,
        lengths,
        capacities,
      });
      for (const [b, n] of lengths.entries()) {
        // The same row through the fused forward: keys and values of this sequence copied contiguous.
        const prefix = (x: Float32Array) => {
          const o = new Float32Array(kvHeads * n * dim);
          for (let h = 0; h < kvHeads; h++)
            o.set(x.subarray(h * capacities[b] * dim, h * capacities[b] * dim + n * dim), h * n * dim);
          return o;
        };
        const row = q.slice(b * heads * dim, (b + 1) * heads * dim);
        const want = new Float32Array(row.length);
        const wantLse = new Float32Array(heads);
        kernels.attentionForward(row, prefix(keys[b]), prefix(values[b]), want, wantLse, {
          batch: 1,
          heads,
          kvHeads,
          tq: 1,
          tk: n,
          dim,
          causal: true,
          scale,
        });
        const what = `dim ${dim}, row ${b} of lengths ${lengths.join("/")}`;
        expect(firstDifference(out.subarray(b * heads * dim, (b + 1) * heads * dim), want), what).toBe(-1);
        expect(firstDifference(lse.subarray(b * heads, (b + 1) * heads), wantLse), what).toBe(-1);
      }
    }
}

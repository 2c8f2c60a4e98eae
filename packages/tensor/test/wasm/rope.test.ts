// The RoPE kernel (rotate-half, scripts/wat/rope.mjs) against a float64 reference: full and partial
// rotary, shared and per-batch positions, in place, the head-permuting layout, the backward as the
// inverse rotation, bad shapes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { RopeShape } from "../../src/backend.js";
import { ShapeError } from "../../src/errors.js";
import { type WasmKernels, createWasmKernels } from "../../src/wasm/index.js";
import { randomF32, rng } from "./reference.js";

const SEED = Date.now() % 1_000_000;
const next = rng(SEED);

function tables(shape: RopeShape, positions: number[]) {
  const half = shape.rotaryDim / 2;
  const cos = new Float32Array(positions.length * half);
  const sin = new Float32Array(positions.length * half);
  for (let r = 0; r < positions.length; r++)
    for (let i = 0; i < half; i++) {
      const a = positions[r] / 10000 ** ((2 * i) / shape.rotaryDim);
      cos[r * half + i] = Math.cos(a);
      sin[r * half + i] = Math.sin(a);
    }
  return { cos, sin };
}

/** Float64 rotation by sign·θ from the same f32 tables the kernel reads. */
function ropeRef(x: Float32Array, cos: Float32Array, sin: Float32Array, s: RopeShape, sign: number): Float64Array {
  const out = Float64Array.from(x);
  const half = s.rotaryDim / 2;
  for (let b = 0; b < s.batch; b++)
    for (let h = 0; h < s.heads; h++)
      for (let t = 0; t < s.seq; t++) {
        const o = ((b * s.heads + h) * s.seq + t) * s.headDim;
        const r = (s.perBatch ? b * s.seq + t : t) * half;
        for (let i = 0; i < half; i++) {
          const c = cos[r + i];
          const sn = sign * sin[r + i];
          out[o + i] = x[o + i] * c - x[o + i + half] * sn;
          out[o + i + half] = x[o + i + half] * c + x[o + i] * sn;
        }
      }
  return out;
}

/** Index of the first element whose bits differ, or -1. */
function firstMismatch(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  for (let i = 0; i < a.length; i++) if (!Object.is(a[i], b[i])) return i;
  return -1;
}

function maxAbsDiff(got: ArrayLike<number>, want: ArrayLike<number>): number {
  let worst = 0;
  for (let i = 0; i < want.length; i++) worst = Math.max(worst, Math.abs(got[i] - want[i]));
  return worst;
}

const SHAPES: [string, RopeShape][] = [
  [
    "full rotary, head dim 64, shared positions",
    { batch: 2, heads: 3, seq: 5, headDim: 64, rotaryDim: 64, perBatch: false },
  ],
  [
    "partial rotary 6 of 10 (scalar tail only), per-batch positions",
    { batch: 2, heads: 2, seq: 3, headDim: 10, rotaryDim: 6, perBatch: true },
  ],
  [
    "partial rotary 12 of 16 (vector + tail), per-batch",
    { batch: 3, heads: 1, seq: 4, headDim: 16, rotaryDim: 12, perBatch: true },
  ],
  // 2·16·256·128 = 1,048,576 elements: at the threshold where heads are split across threads.
  [
    "split across threads, head dim 128",
    { batch: 2, heads: 16, seq: 256, headDim: 128, rotaryDim: 128, perBatch: false },
  ],
];

describe.each([1, 2])("wasm rope kernel, threads=%i", (threads) => {
  let kernels: WasmKernels;
  beforeAll(async () => {
    kernels = await createWasmKernels({ threads });
  });
  afterAll(() => kernels.dispose());

  for (const [name, shape] of SHAPES) {
    it(`${name} (seed ${SEED})`, () => {
      const n = shape.batch * shape.heads * shape.seq * shape.headDim;
      const positions = Array.from({ length: shape.perBatch ? shape.batch * shape.seq : shape.seq }, () =>
        Math.floor(next() * 4096),
      );
      const { cos, sin } = tables(shape, positions);
      const x = randomF32(n, next, 3);
      const out = new Float32Array(n);
      kernels.ropeForward(x, cos, sin, out, shape);
      expect(maxAbsDiff(out, ropeRef(x, cos, sin, shape, 1))).toBeLessThan(3e-6);
      // dims past rotaryDim pass through bit-exactly
      for (let i = shape.rotaryDim; i < shape.headDim; i++) expect(out[i]).toBe(x[i]);
      const dx = new Float32Array(n);
      kernels.ropeBackward(out, cos, sin, dx, shape);
      expect(maxAbsDiff(dx, ropeRef(out, cos, sin, shape, -1))).toBeLessThan(3e-6);
      // the backward is the inverse rotation
      expect(maxAbsDiff(dx, x)).toBeLessThan(5e-6);
      // in place: out may be x
      const y = Float32Array.from(x);
      kernels.ropeForward(y, cos, sin, y, shape);
      expect(firstMismatch(y, out)).toBe(-1);
      // headsLast: the forward reads x as [B][T][H][D], the backward writes dx that way; same arithmetic
      const toBthd = (a: Float32Array) => {
        const r = new Float32Array(n);
        const { batch: B, heads: H, seq: S, headDim: D } = shape;
        for (let b = 0; b < B; b++)
          for (let h = 0; h < H; h++)
            for (let t = 0; t < S; t++)
              r.set(a.subarray(((b * H + h) * S + t) * D, ((b * H + h) * S + t + 1) * D), ((b * S + t) * H + h) * D);
        return r;
      };
      const hl = { ...shape, headsLast: true };
      const outHl = new Float32Array(n).fill(Number.NaN);
      kernels.ropeForward(toBthd(x), cos, sin, outHl, hl);
      expect(firstMismatch(outHl, out)).toBe(-1);
      const dxHl = new Float32Array(n).fill(Number.NaN);
      kernels.ropeBackward(out, cos, sin, dxHl, hl);
      expect(firstMismatch(dxHl, toBthd(dx))).toBe(-1);
    });
  }

  it("rotaryDim 0 copies (and with headsLast only permutes) the values", () => {
    const s: RopeShape = { batch: 1, heads: 2, seq: 3, headDim: 4, rotaryDim: 0, perBatch: false };
    const x = randomF32(24, next);
    const out = new Float32Array(24);
    kernels.ropeForward(x, new Float32Array(0), new Float32Array(0), out, s);
    expect(Array.from(out)).toEqual(Array.from(x));
    kernels.ropeForward(x, new Float32Array(0), new Float32Array(0), out, { ...s, headsLast: true });
    // x is [1][3][2][4] here; out [1][2][3][4]
    for (let h = 0; h < 2; h++)
      for (let t = 0; t < 3; t++)
        for (let i = 0; i < 4; i++) expect(out[(h * 3 + t) * 4 + i]).toBe(x[(t * 2 + h) * 4 + i]);
  });

  it("rejects an odd or oversized rotaryDim and short tables", () => {
    const s: RopeShape = { batch: 1, heads: 1, seq: 2, headDim: 8, rotaryDim: 8, perBatch: false };
    const x = new Float32Array(16);
    const t = new Float32Array(8);
    expect(() => kernels.ropeForward(x, t, t, x, { ...s, rotaryDim: 7 })).toThrow(ShapeError);
    expect(() => kernels.ropeForward(x, t, t, x, { ...s, rotaryDim: 10 })).toThrow(/rotaryDim must be even/);
    expect(() => kernels.ropeForward(x, t.subarray(0, 7), t, x, s)).toThrow(/cos has 7 elements, needs at least 8/);
    expect(() => kernels.ropeBackward(x, t, t, x, { ...s, perBatch: true, batch: 2 })).toThrow(/x has 16/);
    expect(() => kernels.ropeForward(x, t, t, x, { ...s, headsLast: true })).toThrow(/must not be the input array/);
  });
});

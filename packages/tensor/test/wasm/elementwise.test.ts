// The module's memory-bound kernels on resident arrays — binary (add/sub/mul/div with row and column
// broadcasts), the strided copy (permutes, slices, concat offsets, broadcasts; f32, i32 and 16-bit) and
// bf16 ↔ f32 conversion — must equal the js reference bit for bit; shapes they do not cover fall back.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as T from "../../src/index.js";
import { randomArray } from "../helpers.js";

let k: T.WasmKernels;

beforeAll(async () => {
  await T.initBackend("wasm", { threads: 1, activate: false });
  k = T.wasmKernels() as T.WasmKernels;
});

afterAll(() => {
  T.disposeWasmBackend();
});

const heap = () => k.wasmHeap;
/** A resident Float32Array of n elements holding `values` (or NaN garbage). */
function residentF32(n: number, values?: ArrayLike<number>): Float32Array {
  const ptr = heap().alloc(n * 4 + 64, false);
  const a = new Float32Array(heap().buffer(), ptr, n);
  if (values) a.set(values);
  else a.fill(Number.NaN);
  return a;
}
function residentOf<A extends Int32Array | Uint16Array>(
  ctor: new (b: ArrayBufferLike, o: number, n: number) => A,
  n: number,
): A {
  const ptr = heap().alloc(n * ctor.prototype.BYTES_PER_ELEMENT + 64, false);
  return new ctor(heap().buffer(), ptr, n);
}

const strides = (shape: number[]) => T.stridesOf(shape);
const bits = (a: Float32Array) => Array.from(new Uint32Array(a.slice().buffer));

describe("binary on resident arrays", () => {
  const js = T.referenceKernel("binary");
  const cases: [string, number[], number[], number[]][] = [
    ["same shape (odd length)", [3, 37], [3, 37], [3, 37]],
    ["row broadcast", [5, 19], [5, 19], [19]],
    ["row broadcast on the left", [6, 8], [8], [6, 8]],
    ["column broadcast", [7, 13], [7, 13], [7, 1]],
    ["scalar", [4, 9], [4, 9], []],
    ["merged leading dims", [2, 3, 4, 5], [2, 3, 4, 5], [5]],
  ];
  for (const op of ["add", "sub", "mul", "div"] as const)
    for (const [name, out, as, bs] of cases)
      it(`${op}: ${name}`, () => {
        const n = out.reduce((p, d) => p * d, 1);
        const na = as.reduce((p, d) => p * d, 1);
        const nb = bs.reduce((p, d) => p * d, 1);
        const a = residentF32(na, randomArray(na, -3, 3, 1));
        const b = residentF32(nb, randomArray(nb, 0.5, 3, 2));
        const shape = {
          shape: out,
          aStrides: broadcast(as, out),
          bStrides: broadcast(bs, out),
        };
        const got = residentF32(n);
        expect(k.binaryResident(op, a, b, got, shape.shape, shape.aStrides, shape.bStrides)).toBe(true);
        const want = new Float32Array(n);
        js(op, a, b, want, shape);
        expect(bits(got)).toEqual(bits(want));
      });

  it("in place (out = a) and a host operand (falls back: returns false)", () => {
    const a = residentF32(100, randomArray(100, -1, 1, 3));
    const b = residentF32(100, randomArray(100, -1, 1, 4));
    const want = new Float32Array(100);
    T.referenceKernel("binary")("add", a, b, want, { shape: [100], aStrides: [1], bStrides: [1] });
    expect(k.binaryResident("add", a, b, a, [100], [1], [1])).toBe(true);
    expect(bits(a)).toEqual(bits(want));
    expect(k.binaryResident("add", a, new Float32Array(100), a, [100], [1], [1])).toBe(false);
    expect(k.binaryResident("pow", a, b, a, [100], [1], [1])).toBe(false);
  });

  it("a strided walk it does not cover falls back", () => {
    const a = residentF32(24, randomArray(24, -1, 1, 5));
    const b = residentF32(24, randomArray(24, -1, 1, 6));
    // a transposed view: inner stride 4
    expect(k.binaryResident("add", a, b, residentF32(24), [4, 6], [1, 4], [6, 1])).toBe(false);
  });
});

function broadcast(from: number[], to: number[]): number[] {
  const s = strides(from);
  const out: number[] = [];
  for (let d = 0; d < to.length; d++) {
    const i = d - (to.length - from.length);
    out.push(i < 0 || from[i] === 1 ? 0 : s[i]);
  }
  return out;
}

describe("copy on resident arrays", () => {
  const js = T.referenceKernel("copy");
  const permuteCase = (shape: number[], perm: number[]) => {
    const outShape = perm.map((p) => shape[p]);
    const inStrides = strides(shape);
    return {
      shape: outShape,
      srcOffset: 0,
      srcStrides: perm.map((p) => inStrides[p]),
      dstOffset: 0,
      dstStrides: strides(outShape),
    };
  };
  const cases: [string, number, number, T.CopyShape][] = [
    ["heads permute [2,5,3,8] → [2,3,5,8]", 240, 240, permuteCase([2, 5, 3, 8], [0, 2, 1, 3])],
    ["transpose of the last two dims (strided inner)", 35, 35, permuteCase([5, 7], [1, 0])],
    ["5-d permute that merges to ≤ 4 dims", 120, 120, permuteCase([2, 3, 4, 5, 1], [0, 2, 1, 3, 4])],
    [
      "narrow with a source offset",
      60,
      24,
      { shape: [3, 2, 4], srcOffset: 4, srcStrides: [20, 4, 1], dstOffset: 0, dstStrides: [8, 4, 1] },
    ],
    [
      "concat piece at a destination offset",
      12,
      30,
      { shape: [3, 4], srcOffset: 0, srcStrides: [4, 1], dstOffset: 6, dstStrides: [10, 1] },
    ],
    [
      "broadcast (stride 0)",
      7,
      21,
      { shape: [3, 7], srcOffset: 0, srcStrides: [0, 1], dstOffset: 0, dstStrides: [7, 1] },
    ],
  ];
  for (const [name, nSrc, nDst, shape] of cases) {
    it(`f32: ${name}`, () => {
      const x = residentF32(nSrc, randomArray(nSrc, -1, 1, 7));
      const got = residentF32(nDst, new Float32Array(nDst).fill(5));
      const want = new Float32Array(nDst).fill(5);
      expect(
        k.copyResident(x, got, shape.shape, shape.srcOffset, shape.srcStrides, shape.dstOffset, shape.dstStrides),
      ).toBe(true);
      js(x, want, shape);
      expect(bits(got)).toEqual(bits(want));
    });
    it(`i32 and 16-bit: ${name}`, () => {
      for (const ctor of [Int32Array, Uint16Array] as const) {
        const x = residentOf(ctor as never, nSrc) as Int32Array | Uint16Array;
        for (let i = 0; i < nSrc; i++) x[i] = (i * 37 + 11) % 60000;
        const got = residentOf(ctor as never, nDst) as Int32Array | Uint16Array;
        got.fill(3);
        const want = new (ctor as new (n: number) => Int32Array | Uint16Array)(nDst).fill(3);
        expect(
          k.copyResident(x, got, shape.shape, shape.srcOffset, shape.srcStrides, shape.dstOffset, shape.dstStrides),
        ).toBe(true);
        js(x, want, shape);
        expect(Array.from(got)).toEqual(Array.from(want));
      }
    });
  }

  it("a walk past the end of the destination is a ShapeError, not a write", () => {
    const x = residentF32(10, randomArray(10));
    const out = residentF32(10);
    expect(() => k.copyResident(x, out, [10], 0, [1], 1, [1])).toThrow(T.ShapeError);
  });
});

describe("bf16 conversion on resident arrays", () => {
  it("widens all 65,536 bit patterns exactly", () => {
    const src = residentOf(Uint16Array as never, 65536) as Uint16Array;
    for (let i = 0; i < 65536; i++) src[i] = i;
    const got = residentF32(65536);
    expect(k.bf16Resident("widen", src, got, 65536)).toBe(true);
    const want = new Uint32Array(65536);
    for (let i = 0; i < 65536; i++) want[i] = i << 16;
    expect(Array.from(new Uint32Array(got.slice().buffer))).toEqual(Array.from(want));
  });

  it("rounds to nearest even like f32ToBf16Bits (ties, NaN, infinities, subnormals, random bits)", () => {
    const special = [
      0x3f808000, 0x3f818000, 0x3f80ffff, 0x7f7fffff, 0xff7fffff, 0x7f800000, 0xff800000, 0x7fc00001, 0xffa00000,
      0x7f800001, 0x00000001, 0x80008000, 0x00018000, 0, 0x80000000,
    ];
    const n = 100_003;
    const u = new Uint32Array(n);
    u.set(special);
    let s = 12345;
    for (let i = special.length; i < n; i++) {
      s = (Math.imul(s, 1103515245) + 12345) >>> 0;
      u[i] = (s ^ (s << 13)) >>> 0;
    }
    const src = residentF32(n);
    new Uint32Array(src.buffer, src.byteOffset, n).set(u);
    const got = residentOf(Uint16Array as never, n) as Uint16Array;
    expect(k.bf16Resident("round", src, got, n)).toBe(true);
    const f = new Float32Array(u.buffer);
    // NaNs: dtype.ts's rule on the bits themselves (a JS number need not keep a NaN's payload).
    const want = Array.from(u, (b, i) =>
      (b & 0x7fffffff) > 0x7f800000 ? ((b >>> 16) | 0x40) & 0xffff : T.f32ToBf16Bits(f[i]),
    );
    expect(Array.from(got)).toEqual(want);
  });
});

// Above RESIDENT_STREAM_PARALLEL_ELEMENTS (64 Ki) these kernels split their walk across the workers: by
// rows, by the columns of one long row, by the outermost dim of a copy (or the run of a contiguous one),
// by ranges of a conversion. Nothing is reduced, so the result must still equal js bit for bit.
describe("binary, copy and bf16 conversion split across two threads", () => {
  let k2: T.WasmKernels;
  beforeAll(async () => {
    k2 = await T.createWasmKernels({ threads: 2 });
  });
  afterAll(() => k2.dispose());
  const f32 = (n: number, values?: ArrayLike<number>) => {
    const a = new Float32Array(k2.wasmHeap.buffer(), k2.wasmHeap.alloc(n * 4 + 64, false), n);
    if (values) a.set(values);
    else a.fill(Number.NaN);
    return a;
  };
  const u16 = (n: number) => new Uint16Array(k2.wasmHeap.buffer(), k2.wasmHeap.alloc(n * 2 + 64, false), n);

  const cases: [string, number[], number[], number[]][] = [
    ["same shape, one long row of odd length", [70_001], [70_001], [70_001]],
    ["row broadcast over 512 rows", [512, 257], [512, 257], [257]],
    ["column broadcast", [300, 301], [300, 301], [300, 1]],
    ["scalar", [2, 65_537], [2, 65_537], []],
  ];
  for (const op of ["add", "mul", "div"] as const)
    for (const [name, out, as, bs] of cases)
      it(`binary ${op}: ${name}`, () => {
        const size = (s: number[]) => s.reduce((p, d) => p * d, 1);
        const a = f32(size(as), randomArray(size(as), -3, 3, 11));
        const b = f32(size(bs), randomArray(size(bs), 0.5, 3, 12));
        const aStrides = broadcast(as, out);
        const bStrides = broadcast(bs, out);
        const got = f32(size(out));
        expect(k2.binaryResident(op, a, b, got, out, aStrides, bStrides)).toBe(true);
        const want = new Float32Array(size(out));
        T.referenceKernel("binary")(op, a, b, want, { shape: out, aStrides, bStrides });
        expect(bits(got)).toEqual(bits(want));
      });

  const copies: [string, number, number, T.CopyShape][] = [
    [
      "heads permute [4,128,4,64] → [4,4,128,64]",
      131_072,
      131_072,
      {
        shape: [4, 4, 128, 64],
        srcOffset: 0,
        srcStrides: [32768, 64, 256, 1],
        dstOffset: 0,
        dstStrides: strides([4, 4, 128, 64]),
      },
    ],
    [
      "one contiguous run (odd length)",
      100_003,
      100_003,
      { shape: [100_003], srcOffset: 0, srcStrides: [1], dstOffset: 0, dstStrides: [1] },
    ],
    [
      "transpose [300, 257] (strided inner) at offsets",
      77_200,
      77_110,
      { shape: [257, 300], srcOffset: 99, srcStrides: [1, 257], dstOffset: 9, dstStrides: [300, 1] },
    ],
  ];
  for (const [name, nSrc, nDst, shape] of copies)
    it(`copy f32 and 16-bit: ${name}`, () => {
      const x = f32(nSrc, randomArray(nSrc, -1, 1, 13));
      const got = f32(nDst, new Float32Array(nDst).fill(5));
      const want = new Float32Array(nDst).fill(5);
      expect(
        k2.copyResident(x, got, shape.shape, shape.srcOffset, shape.srcStrides, shape.dstOffset, shape.dstStrides),
      ).toBe(true);
      T.referenceKernel("copy")(x, want, shape);
      expect(bits(got)).toEqual(bits(want));
      const x16 = u16(nSrc);
      for (let i = 0; i < nSrc; i++) x16[i] = (i * 37 + 11) % 60000;
      const got16 = u16(nDst).fill(3);
      const want16 = new Uint16Array(nDst).fill(3);
      expect(
        k2.copyResident(x16, got16, shape.shape, shape.srcOffset, shape.srcStrides, shape.dstOffset, shape.dstStrides),
      ).toBe(true);
      T.referenceKernel("copy")(x16, want16, shape);
      expect(Array.from(got16)).toEqual(Array.from(want16));
    });

  it("binaryScalar: f32 scalars on either side, one thread and split, equal js; other scalars fall back", () => {
    for (const n of [37, 70_001]) {
      const x = f32(n, randomArray(n, 0.5, 3, 15));
      for (const op of ["add", "sub", "mul", "div"] as const)
        for (const left of [false, true]) {
          const s = Math.fround(-1.7);
          const got = f32(n);
          expect(k2.binaryScalarResident(op, x, s, got, n, left)).toBe(true);
          const want = new Float32Array(n);
          T.referenceKernel("binaryScalar")(op, x, s, want, n, left);
          expect(bits(got), `${op} ${left ? "s∘x" : "x∘s"} n=${n}`).toEqual(bits(want));
        }
      // 0.1 is no f32: the js kernel rounds x·0.1 once from double, which f32 arithmetic need not match.
      expect(k2.binaryScalarResident("mul", x, 0.1, f32(n), n, false)).toBe(false);
      expect(k2.binaryScalarResident("pow", x, 2, f32(n), n, false)).toBe(false);
      expect(k2.binaryScalarResident("mul", new Float32Array(n), 2, f32(n), n, false)).toBe(false);
    }
  });

  it("bf16 widen and round of 100,003 elements", () => {
    const n = 100_003;
    const x = f32(n, randomArray(n, -1e3, 1e3, 14));
    const rounded = u16(n);
    expect(k2.bf16Resident("round", x, rounded, n)).toBe(true);
    expect(Array.from(rounded)).toEqual(Array.from(x, (v) => T.f32ToBf16Bits(v)));
    const widened = f32(n);
    expect(k2.bf16Resident("widen", rounded, widened, n)).toBe(true);
    expect(Array.from(new Uint32Array(widened.slice().buffer))).toEqual(Array.from(rounded, (b) => (b << 16) >>> 0));
  });
});

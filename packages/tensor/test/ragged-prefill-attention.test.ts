// raggedPrefillAttention (the batching scheduler's prefill attention): several sequences' prompt chunks
// packed along T, each chunk's rows causal over its own sequence's cache, in one call. Checked against a
// float64 reference on inputs drawn afresh each run (the seed is in every failure message), bit for bit against
// causal `attention` run per chunk over copies of its cached keys (what it computes, on views of the buffers),
// and for independence: a chunk's bits do not depend on the other sequences in the call, on where its rows sit
// in q, or on its buffer's capacity. Backends js, wasm and (where it loads) native, whose chunks of 16 rows or
// more run their products on BLAS.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import * as T from "../src/index.js";
import { randomArray } from "./helpers.js";

const seed = Math.floor(Math.random() * 2 ** 31);
const H = 6;
const Hkv = 2;
const D = 13;

interface Chunk {
  /** Rows [start, start + length) of the packed q. */
  start: number;
  length: number;
  /** Cached positions before this chunk. */
  past: number;
  capacity: number;
  keys: Float32Array;
  values: Float32Array;
}

/** Chunks of the given (new rows, past) sizes packed from row `first`, with a gap row between some, in T rows. */
function makeChunks(sizes: [number, number][], first: number, s: number): Chunk[] {
  let at = first;
  return sizes.map(([length, past], i) => {
    const capacity = past + length + 5 * (i % 3);
    const n = Hkv * capacity * D;
    const chunk = {
      start: at,
      length,
      past,
      capacity,
      keys: randomArray(n, -1, 1, s + 2 * i),
      values: randomArray(n, -1, 1, s + 2 * i + 1),
    };
    at += length + (i % 2);
    return chunk;
  });
}

function segments(chunks: Chunk[]): T.RaggedQuerySegment[] {
  return chunks.map((c) => ({
    start: c.start,
    length: c.length,
    cache: {
      keys: new T.Tensor(c.keys, [1, Hkv, c.capacity, D]),
      values: new T.Tensor(c.values, [1, Hkv, c.capacity, D]),
      length: c.past + c.length,
    },
  }));
}

/** float64: row i of a chunk sees positions [0, past + i]; rows of no chunk are 0. q and out [H][T][D]. */
function reference(q: Float32Array, chunks: Chunk[], rows: number, scale: number): Float64Array {
  const out = new Float64Array(H * rows * D);
  for (const c of chunks)
    for (let h = 0; h < H; h++) {
      const base = Math.floor(h / (H / Hkv)) * c.capacity * D;
      for (let i = 0; i < c.length; i++) {
        const qo = (h * rows + c.start + i) * D;
        const n = c.past + i + 1;
        const scores = Array.from({ length: n }, (_, j) => {
          let dot = 0;
          for (let e = 0; e < D; e++) dot += q[qo + e] * c.keys[base + j * D + e];
          return dot * scale;
        });
        const mx = Math.max(...scores);
        const p = scores.map((x) => Math.exp(x - mx));
        const sum = p.reduce((a, x) => a + x, 0);
        for (let j = 0; j < n; j++)
          for (let e = 0; e < D; e++) out[qo + e] += (p[j] / sum) * c.values[base + j * D + e];
      }
    }
  return out;
}

/** Rows [start, start + length) of an [H][rows][D] array, as [H][length][D]. */
function rowsOf(a: Float32Array, rows: number, start: number, length: number): Float32Array {
  const out = new Float32Array(H * length * D);
  for (let h = 0; h < H; h++)
    out.set(a.subarray((h * rows + start) * D, (h * rows + start + length) * D), h * length * D);
  return out;
}

// Ragged chunk lengths and pasts (first chunks of a prompt, later chunks of a long one, a single row), odd sizes.
const sizes: [number, number][] = [
  [7, 0],
  [1, 12],
  [19, 33],
  [3, 0],
  [11, 130],
];
const T_ROWS = 53;
const chunks = makeChunks(sizes, 1, seed);
const qData = randomArray(H * T_ROWS * D, -1, 1, seed + 99);
const why = `seed ${seed}`;

let nativeLoaded = false;
beforeAll(async () => {
  try {
    await T.initBackend("native", { threads: 1, activate: false });
    nativeLoaded = true;
  } catch (err) {
    if (process.env.KILN_NATIVE === "required") throw err;
    console.log(`raggedPrefillAttention suite: native NOT RUN (${(err as Error).message.split("\n")[0]})`);
  }
});
afterAll(() => {
  if (nativeLoaded) T.disposeNativeBackend();
});

/** The chunk's keys and values moved into buffers of `capacity` positions (zeros after its own). */
function recapacitated(c: Chunk, capacity: number): Chunk {
  const move = (a: Float32Array) => {
    const out = new Float32Array(Hkv * capacity * D);
    for (let g = 0; g < Hkv; g++)
      out.set(a.subarray(g * c.capacity * D, (g * c.capacity + c.past + c.length) * D), g * capacity * D);
    return out;
  };
  return { ...c, capacity, keys: move(c.keys), values: move(c.values) };
}

for (const backend of ["js", "wasm", "native"] as const) {
  describe(`raggedPrefillAttention on ${backend}`, () => {
    beforeAll(async () => {
      if (backend === "wasm") await T.initBackend(backend, { threads: 2 });
      if (backend !== "native" || nativeLoaded) T.setBackend(backend);
    });
    beforeEach((ctx) => {
      if (backend === "native" && !nativeLoaded) ctx.skip();
    });
    afterAll(() => T.setBackend("js"));
    const q = () => new T.Tensor(qData, [1, H, T_ROWS, D]);
    const run = (qt: T.Tensor, segs: T.RaggedQuerySegment[]) =>
      T.noGrad(() => T.raggedPrefillAttention(qt, segs)).toFloat32Array();

    it("matches a float64 reference: causal within each chunk, over its own cache, padding rows 0", () => {
      const out = run(q(), segments(chunks));
      const ref = reference(qData, chunks, T_ROWS, 1 / Math.sqrt(D));
      let worst = 0;
      for (let i = 0; i < ref.length; i++) worst = Math.max(worst, Math.abs(out[i] - ref[i]));
      expect(worst, why).toBeLessThan(2e-6);
      const owned = new Set(chunks.flatMap((c) => Array.from({ length: c.length }, (_, i) => c.start + i)));
      for (let r = 0; r < T_ROWS; r++)
        if (!owned.has(r))
          expect(
            rowsOf(out, T_ROWS, r, 1).every((x) => x === 0),
            `row ${r}, ${why}`,
          ).toBe(true);
    });

    it("gives each chunk the bits it gets alone, at another row offset, and in a buffer of another capacity", () => {
      const all = run(q(), segments(chunks));
      for (const [k, c] of chunks.entries()) {
        const mine = rowsOf(all, T_ROWS, c.start, c.length);
        const alone = run(new T.Tensor(rowsOf(qData, T_ROWS, c.start, c.length), [1, H, c.length, D]), [
          { ...segments([c])[0], start: 0 },
        ]);
        expect(alone, `chunk ${k}, ${why}`).toEqual(mine);
        // Three padding rows before it, and its keys in a buffer 37 positions larger.
        const shifted = new Float32Array(H * (c.length + 3) * D);
        for (let h = 0; h < H; h++)
          shifted.set(
            rowsOf(qData, T_ROWS, c.start, c.length).subarray(h * c.length * D, (h + 1) * c.length * D),
            (h * (c.length + 3) + 3) * D,
          );
        const moved = run(new T.Tensor(shifted, [1, H, c.length + 3, D]), [
          { ...segments([recapacitated(c, c.capacity + 37)])[0], start: 3 },
        ]);
        expect(rowsOf(moved, c.length + 3, 3, c.length), `chunk ${k} moved, ${why}`).toEqual(mine);
      }
    });

    it("a prompt chunk of 128 rows over 300 cached keys (the BLAS path on native) matches the reference", () => {
      const big = makeChunks([[128, 300 - 128]], 0, seed + 7);
      const qBig = randomArray(H * 128 * D, -1, 1, seed + 8);
      const out = run(new T.Tensor(qBig, [1, H, 128, D]), segments(big));
      const ref = reference(qBig, big, 128, 1 / Math.sqrt(D));
      let worst = 0;
      for (let i = 0; i < ref.length; i++) worst = Math.max(worst, Math.abs(out[i] - ref[i]));
      expect(worst, why).toBeLessThan(2e-6);
    });

    it("equals causal attention run per chunk over copies of its keys, bit for bit", () => {
      const out = run(q(), segments(chunks));
      for (const [k, c] of chunks.entries()) {
        const [seg] = segments([c]);
        const old = T.noGrad(() =>
          T.attention(
            new T.Tensor(rowsOf(qData, T_ROWS, c.start, c.length), [1, H, c.length, D]),
            T.narrow(seg.cache.keys, 2, 0, seg.cache.length),
            T.narrow(seg.cache.values, 2, 0, seg.cache.length),
            { causal: true },
          ),
        ).toFloat32Array();
        expect(rowsOf(out, T_ROWS, c.start, c.length), `chunk ${k}, ${why}`).toEqual(old);
      }
    });
  });
}

describe("raggedPrefillAttention input checks", () => {
  const segs = segments(chunks);
  const q = new T.Tensor(qData, [1, H, T_ROWS, D]);
  it("names what is wrong", () => {
    expect(() => T.raggedPrefillAttention(T.reshape(q, [H, T_ROWS, D]), segs)).toThrow(/q must be \[1, H, T, D\]/);
    expect(() => T.raggedPrefillAttention(q, [{ ...segs[0], start: T_ROWS - 2 }])).toThrow(/not a non-empty range/);
    expect(() => T.raggedPrefillAttention(q, [{ ...segs[0], length: 0 }])).toThrow(/not a non-empty range/);
    expect(() => T.raggedPrefillAttention(q, [segs[0], { ...segs[1], start: segs[0].start + 1 }])).toThrow(
      /segments 0 and 1 both claim row/,
    );
    expect(() => T.raggedPrefillAttention(q, [{ ...segs[2], cache: { ...segs[2].cache, length: 4 } }])).toThrow(
      /cache holds 4 positions/,
    );
    const tooLong = { ...segs[0], cache: { ...segs[0].cache, length: chunks[0].capacity + 1 } };
    expect(() => T.noGrad(() => T.raggedPrefillAttention(q, [tooLong]))).toThrow(/outside \[0, capacity/);
    const g = new T.Tensor(qData, [1, H, T_ROWS, D]);
    g.requiresGrad = true;
    expect(() => T.raggedPrefillAttention(g, segs)).toThrow(/inference only/);
  });
});

import { mkdtemp, readFile, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  GGUF_MAGIC,
  GgufError,
  GgufFile,
  type GgufMetadata,
  type GgufTensorInput,
  dequantizeQ8_0,
  fromFloat32,
  ggufDecode,
  ggufEncode,
  ggufValue,
  parseGguf,
  parseGgufHeader,
  quantizeQ8_0,
  serializeGguf,
  writeGgufFile,
} from "../src/index.js";
import { rng } from "./fuzz-inputs.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

function randomValues(n: number, seed: number): Float32Array {
  const r = rng(seed);
  return Float32Array.from({ length: n }, () => (r() - 0.5) * 4);
}

function sampleMetadata(): GgufMetadata {
  return new Map([
    ["general.architecture", ggufValue.string("llama")],
    ["general.name", ggufValue.string("tiny ✓")],
    ["llama.block_count", ggufValue.u32(2)],
    ["llama.rope.freq_base", ggufValue.f32(10000)],
    ["x.i8", ggufValue.i8(-5)],
    ["x.u64", ggufValue.u64(2n ** 60n)],
    ["x.i64", ggufValue.i64(-3n)],
    ["x.f64", ggufValue.f64(0.1)],
    ["x.bool", ggufValue.bool(true)],
    ["tokenizer.ggml.tokens", ggufValue.array("string", ["<unk>", "a", "▁b"])],
    ["tokenizer.ggml.scores", ggufValue.array("f32", new Float32Array([0, -1.5, -2]))],
    ["x.nested", ggufValue.array("array", [ggufValue.array("u16", [1, 2]), ggufValue.array("string", ["z"])])],
  ]);
}

function sampleTensors(): GgufTensorInput[] {
  const a = randomValues(64 * 3, 1);
  const b = randomValues(5, 2);
  return [
    { name: "a.f32", type: "F32", shape: [3, 64], data: ggufEncode(a, "F32") },
    { name: "a.f16", type: "F16", shape: [3, 64], data: ggufEncode(a, "F16") },
    { name: "a.bf16", type: "BF16", shape: [3, 64], data: ggufEncode(a, "BF16") },
    { name: "a.q8_0", type: "Q8_0", shape: [3, 64], data: () => ggufEncode(a, "Q8_0") },
    { name: "b", type: "F32", shape: [5], data: ggufEncode(b, "F32") },
  ];
}

describe("GGUF write → read", () => {
  it("round-trips metadata of every kind and tensors of every supported type, aligned", async () => {
    const bytes = await serializeGguf(sampleMetadata(), sampleTensors());
    const f = parseGguf(bytes);
    expect(f.version).toBe(3);
    expect(new DataView(bytes.buffer).getUint32(0, true)).toBe(GGUF_MAGIC);
    expect(f.dataOffset % 32).toBe(0);
    const m = f.metadata;
    expect(m.get("general.name")).toEqual({ kind: "string", value: "tiny ✓" });
    expect(m.get("x.u64")).toEqual({ kind: "u64", value: 2n ** 60n });
    expect(m.get("x.i64")).toEqual({ kind: "i64", value: -3n });
    expect(m.get("x.f64")).toEqual({ kind: "f64", value: 0.1 });
    expect(m.get("x.i8")).toEqual({ kind: "i8", value: -5 });
    expect(m.get("x.bool")).toEqual({ kind: "bool", value: true });
    expect(m.get("tokenizer.ggml.scores")).toEqual({ kind: "array", itemKind: "f32", values: [0, -1.5, -2] });
    expect(m.get("x.nested")).toEqual({
      kind: "array",
      itemKind: "array",
      values: [
        { kind: "array", itemKind: "u16", values: [1, 2] },
        { kind: "array", itemKind: "string", values: ["z"] },
      ],
    });
    expect([...m.keys()]).toEqual([...sampleMetadata().keys()]);
    const a = randomValues(64 * 3, 1);
    for (const t of f.tensors) expect(t.offset % 32).toBe(0);
    const info = (n: string) => f.tensors.find((t) => t.name === n)!;
    expect(info("a.q8_0").shape).toEqual([3, 64]);
    expect(info("a.q8_0").byteSize).toBe(3 * 2 * 34);
    expect(ggufDecode("F32", f.data.get("a.f32")!, a.length)).toEqual(a);
    expect(f.data.get("a.bf16")).toEqual(fromFloat32(a, "BF16"));
    expect(f.data.get("a.f16")).toEqual(fromFloat32(a, "F16"));
    const q = ggufDecode("Q8_0", f.data.get("a.q8_0")!, a.length);
    for (let i = 0; i < a.length; i++) expect(Math.abs(q[i] - a[i])).toBeLessThan(2 / 127 / 2 + 2e-3);
  });

  it("the lazy reader reads only the header and the tensor asked for", async () => {
    const bytes = await serializeGguf(sampleMetadata(), sampleTensors());
    const reads: [number, number][] = [];
    const f = await GgufFile.open({
      size: bytes.byteLength,
      read: async (o, l) => {
        reads.push([o, l]);
        return bytes.subarray(o, o + l);
      },
      close: async () => {},
    });
    reads.length = 0;
    const b = await f.float32("b");
    expect(b).toEqual(randomValues(5, 2));
    expect(reads).toEqual([[f.dataOffset + f.info("b").offset, 20]]);
    expect(f.get("general.architecture")).toBe("llama");
    await expect(f.float32("nope")).rejects.toThrow(/TensorNotFound/);
  });

  it("writeGgufFile streams via temp + rename and matches serializeGguf byte for byte", async () => {
    const dir = await mkdtemp(join(tmpdir(), "kiln-gguf-"));
    dirs.push(dir);
    const path = join(dir, "m.gguf");
    const tensors = sampleTensors();
    const chunked = randomValues(64, 7);
    async function* pieces() {
      const all = ggufEncode(chunked, "F32");
      yield all.subarray(0, 100);
      yield all.subarray(100);
    }
    tensors.push({ name: "chunked", type: "F32", shape: [64], data: pieces() });
    await writeGgufFile(path, sampleMetadata(), tensors);
    const inMemory = await serializeGguf(sampleMetadata(), [
      ...sampleTensors(),
      { name: "chunked", type: "F32", shape: [64], data: ggufEncode(chunked, "F32") },
    ]);
    expect(new Uint8Array(await readFile(path))).toEqual(inMemory);
    expect(await readdir(dir)).toEqual(["m.gguf"]);
    // A producer that yields the wrong size leaves no file behind.
    await expect(
      writeGgufFile(join(dir, "bad.gguf"), new Map(), [
        { name: "x", type: "F32", shape: [4], data: () => new Uint8Array(12) },
      ]),
    ).rejects.toThrow(/produced 12 bytes, expected 16/);
    expect(await readdir(dir)).toEqual(["m.gguf"]);
  });

  it("refuses what llama.cpp would refuse when writing", async () => {
    await expect(
      serializeGguf(new Map(), [{ name: "q", type: "Q8_0", shape: [2, 33], data: new Uint8Array(0) }]),
    ).rejects.toThrow(/Q8_0 packs 32 values per block, but the row length is 33/);
    await expect(
      serializeGguf(new Map(), [{ name: "x".repeat(64), type: "F32", shape: [1], data: new Uint8Array(4) }]),
    ).rejects.toThrow(/longer than 63 bytes/);
    await expect(serializeGguf(new Map([["k", ggufValue.u32(-1)]]), [])).rejects.toThrow(/not a valid u32/);
    await expect(serializeGguf(new Map([["general.alignment", ggufValue.u32(24)]]), [])).rejects.toThrow(
      /power of two/,
    );
  });
});

describe("Q8_0", () => {
  it("matches ggml's reference quantiser on hand-worked blocks", () => {
    const v = new Float32Array(32);
    v[0] = 127;
    v[1] = -63.5; // half away from zero: -64
    v[2] = 0.5; // 0.5 → 1
    v[3] = -127;
    const q = quantizeQ8_0(v);
    const dv = new DataView(q.buffer);
    expect(dv.getUint16(0, true)).toBe(0x3c00); // d = 1.0 in f16
    expect([dv.getInt8(2), dv.getInt8(3), dv.getInt8(4), dv.getInt8(5), dv.getInt8(6)]).toEqual([127, -64, 1, -127, 0]);
    expect(dequantizeQ8_0(quantizeQ8_0(new Float32Array(32)), 32)).toEqual(new Float32Array(32));
  });

  it("round trip error is within half a step (d/2) per block, plus the f16 rounding of d", () => {
    const v = randomValues(32 * 64, 9);
    const back = dequantizeQ8_0(quantizeQ8_0(v), v.length);
    for (let b = 0; b < 64; b++) {
      let amax = 0;
      for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(v[b * 32 + j]));
      const d = amax / 127;
      for (let j = 0; j < 32; j++) {
        const i = b * 32 + j;
        expect(Math.abs(back[i] - v[i])).toBeLessThanOrEqual(d / 2 + amax * 2 ** -11 + 1e-7);
      }
    }
  });

  it("decoding an unsupported type names the type and the tensor", () => {
    expect(() => ggufDecode("Q4_K", new Uint8Array(144), 256, "blk.0.ffn_up.weight")).toThrow(
      /UnsupportedTensorType.*blk\.0\.ffn_up\.weight.*Q4_K is not supported/,
    );
  });
});

describe("malformed GGUF → GgufError naming the rule", () => {
  const bytesOf = async () =>
    serializeGguf(new Map([["general.architecture", ggufValue.string("llama")]]), [
      { name: "w", type: "F32", shape: [2, 4], data: new Uint8Array(32) },
    ]);
  // Layout of that file: magic 0, version 4, tensor count 8, kv count 16, key length 24, key 32..52,
  // value type 52, string length 56, "llama" 64..69, tensor name length 69, "w" 77, n_dims 78,
  // dims 82 and 90, type 98, offset 102, data section at 128.
  const cases: [string, (b: Uint8Array, dv: DataView) => Uint8Array, RegExp][] = [
    [
      "bad magic",
      (b) => {
        b[0] = 0x47 + 1;
        return b;
      },
      /BadMagic.*not a GGUF file/,
    ],
    [
      "version 1",
      (b, dv) => {
        dv.setUint32(4, 1, true);
        return b;
      },
      /UnsupportedVersion.*version 1/,
    ],
    [
      "version 4",
      (b, dv) => {
        dv.setUint32(4, 4, true);
        return b;
      },
      /UnsupportedVersion/,
    ],
    [
      "absurd tensor count",
      (b, dv) => {
        dv.setBigUint64(8, 2n ** 62n, true);
        return b;
      },
      /AbsurdCount.*tensor count/,
    ],
    [
      "absurd kv count",
      (b, dv) => {
        dv.setBigUint64(16, 10n ** 12n, true);
        return b;
      },
      /AbsurdCount.*metadata count/,
    ],
    [
      "huge key string",
      (b, dv) => {
        dv.setBigUint64(24, 2n ** 40n, true);
        return b;
      },
      /AbsurdSize.*metadata key 0/,
    ],
    [
      "huge value string",
      (b, dv) => {
        dv.setBigUint64(56, 2n ** 63n, true);
        return b;
      },
      /AbsurdSize/,
    ],
    [
      "bad value type",
      (b, dv) => {
        dv.setUint32(52, 13, true);
        return b;
      },
      /InvalidValueType.*13/,
    ],
    [
      "too many dims",
      (b, dv) => {
        dv.setUint32(78, 5, true);
        return b;
      },
      /InvalidTensorInfo.*5 dimensions/,
    ],
    [
      "unknown tensor type",
      (b, dv) => {
        dv.setUint32(98, 4, true);
        return b;
      },
      /UnknownTensorType.*id 4/,
    ],
    [
      "dims overflow",
      (b, dv) => {
        dv.setBigUint64(82, 2n ** 60n, true);
        return b;
      },
      /AbsurdSize|InvalidOffset/,
    ],
    [
      "offset past the end",
      (b, dv) => {
        dv.setBigUint64(102, 1n << 40n, true);
        return b;
      },
      /InvalidOffset.*past the end/,
    ],
    [
      "misaligned offset",
      (b, dv) => {
        dv.setBigUint64(102, 4n, true);
        return b;
      },
      /InvalidOffset.*multiple of the alignment/,
    ],
    ["data runs past the end", (b) => b.subarray(0, b.byteLength - 1), /InvalidOffset.*runs past the end/],
    ["truncated header", (b) => b.subarray(0, 60), /Truncated/],
    ["empty file", () => new Uint8Array(0), /Truncated/],
    [
      "invalid utf-8 key",
      (b) => {
        b[32] = 0xff;
        return b;
      },
      /InvalidUtf8/,
    ],
  ];
  for (const [label, mutate, want] of cases) {
    it(label, async () => {
      const b = (await bytesOf()).slice();
      expect(new TextDecoder().decode(b.subarray(32, 52))).toBe("general.architecture");
      expect(new DataView(b.buffer).getUint32(98, true)).toBe(0);
      const input = mutate(b, new DataView(b.buffer));
      let err: unknown;
      try {
        parseGgufHeader(input);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(GgufError);
      expect((err as Error).message).toMatch(want);
      // The lazy reader agrees.
      await expect(GgufFile.open(input)).rejects.toThrow(want);
    });
  }
});

// Hand-built headers for what the mutation table above cannot reach by flipping a field of a valid
// file: absurd counts and huge strings inside arrays, nesting, names, alignment and overlaps.
describe("malformed GGUF headers built by hand → GgufError naming the rule", () => {
  class Bytes {
    private parts: number[] = [];
    u32(v: number): this {
      const b = new Uint8Array(4);
      new DataView(b.buffer).setUint32(0, v, true);
      this.parts.push(...b);
      return this;
    }
    u64(v: bigint | number): this {
      const b = new Uint8Array(8);
      new DataView(b.buffer).setBigUint64(0, BigInt(v), true);
      this.parts.push(...b);
      return this;
    }
    str(s: string): this {
      const b = new TextEncoder().encode(s);
      return this.u64(b.length).raw(b);
    }
    raw(b: ArrayLike<number>): this {
      this.parts.push(...Array.from(b));
      return this;
    }
    get length(): number {
      return this.parts.length;
    }
    done(padTo = 0): Uint8Array {
      const out = new Uint8Array(Math.max(padTo, this.parts.length));
      out.set(this.parts);
      return out;
    }
  }
  const STRING = 8;
  const ARRAY = 9;
  const U32 = 4;
  const header = (tensors: number, kvs: number) =>
    new Bytes().raw([0x47, 0x47, 0x55, 0x46]).u32(3).u64(tensors).u64(kvs);
  /** One F32 tensor info of `shape` at `offset`. */
  const tensor = (b: Bytes, name: string, shape: number[], offset: number) => {
    b.str(name).u32(shape.length);
    for (const d of shape) b.u64(d);
    return b.u32(0).u64(offset);
  };
  const cases: [string, () => Uint8Array, RegExp][] = [
    [
      "an array claiming 2^40 strings",
      () =>
        header(0, 1)
          .str("tokenizer.ggml.tokens")
          .u32(ARRAY)
          .u32(STRING)
          .u64(2n ** 40n)
          .str("a")
          .done(256),
      /AbsurdCount.*item count of "tokenizer\.ggml\.tokens"/,
    ],
    [
      "an array claiming 2^62 u32s",
      () =>
        header(0, 1)
          .str("k")
          .u32(ARRAY)
          .u32(U32)
          .u64(2n ** 62n)
          .done(64),
      /AbsurdCount/,
    ],
    [
      "a huge string inside a string array",
      () =>
        header(0, 1)
          .str("tokenizer.ggml.merges")
          .u32(ARRAY)
          .u32(STRING)
          .u64(2)
          .str("a b")
          .u64(2n ** 50n)
          .done(256),
      /AbsurdSize.*tokenizer\.ggml\.merges/,
    ],
    [
      "a string longer than the file",
      () => header(0, 1).str("general.name").u32(STRING).u64(1000).raw([0x61, 0x62]).done(),
      /AbsurdSize.*general\.name.*bytes left/,
    ],
    [
      "arrays nested five deep",
      () => {
        const b = header(0, 1).str("deep");
        b.u32(ARRAY);
        for (let i = 0; i < 5; i++) b.u32(ARRAY).u64(1);
        return b.u32(U32).u64(1).u32(7).done(256);
      },
      /InvalidValueType.*nested deeper than 4/,
    ],
    [
      "a tensor name of 64 bytes",
      () => tensor(header(1, 0), "t".repeat(64), [4], 0).done(512),
      /InvalidTensorInfo.*longer than 63 bytes/,
    ],
    [
      "general.alignment 48 (not a power of two)",
      () => header(0, 1).str("general.alignment").u32(U32).u32(48).done(64),
      /InvalidMetadata.*general\.alignment must be a u32 power of two/,
    ],
    [
      "two tensors over the same bytes",
      () => {
        const b = header(2, 0);
        tensor(b, "a", [8], 0);
        tensor(b, "b", [8], 0);
        return b.done(Math.ceil(b.length / 32) * 32 + 64);
      },
      /InvalidOffset.*overlaps tensor "a"/,
    ],
  ];
  for (const [label, build, want] of cases) {
    it(label, async () => {
      const input = build();
      let err: unknown;
      try {
        parseGgufHeader(input);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(GgufError);
      expect((err as Error).message).toMatch(want);
      await expect(GgufFile.open(input)).rejects.toThrow(want);
    });
  }
  it("the hand builder writes what the parser reads (a well-formed control file parses)", () => {
    const b = header(1, 1).str("general.architecture").u32(STRING).str("llama");
    tensor(b, "w", [2, 4], 0);
    const h = parseGgufHeader(b.done(Math.ceil(b.length / 32) * 32 + 32));
    // GGUF lists dimensions innermost first (ggml's ne); kiln's shape is row-major.
    expect(h.tensors.map((t) => [t.name, t.shape])).toEqual([["w", [4, 2]]]);
  });
});

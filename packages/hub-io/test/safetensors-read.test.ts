import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { SafetensorsError, SafetensorsFile, parseSafetensors, serializeSafetensors, toFloat32 } from "../src/index.js";
import { craft, tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);

function ruleOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SafetensorsError);
    return (e as SafetensorsError).rule;
  }
  throw new Error("expected a SafetensorsError");
}

const z16 = new Uint8Array(16);
const I32_2x2 = '{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}}';

describe("safetensors validation (each rule of the reference reader)", () => {
  it("accepts the reference's valid vectors", () => {
    const ok = parseSafetensors(craft(I32_2x2, z16));
    expect(ok.tensors.get("test")?.shape).toEqual([2, 2]);
    const scalar = parseSafetensors(
      craft('{"test":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}', new Uint8Array(4)),
    );
    expect(scalar.tensors.get("test")?.shape).toEqual([]);
    const zero = parseSafetensors(craft('{"test":{"dtype":"I32","shape":[2,0],"data_offsets":[0, 0]}}'));
    expect(zero.tensors.get("test")?.data.byteLength).toBe(0);
    // JSON whitespace before and after the object (test_whitespace_*_padded_header).
    expect(parseSafetensors(craft("{}\r \t\n")).tensors.size).toBe(0);
    expect(parseSafetensors(craft("\t\n{}\r ")).tensors.size).toBe(0);
    // Unpadded header (N not a multiple of 8) and keys in any order.
    const two = parseSafetensors(
      craft(
        '{"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]},"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}',
        new Uint8Array([1, 2, 3, 4]),
      ),
    );
    expect([...two.tensors.keys()]).toEqual(["a", "b"]);
    expect([...two.tensors.get("b")!.data]).toEqual([3, 4]);
  });

  it("HeaderTooSmall: fewer than 8 bytes", () => {
    expect(ruleOf(() => parseSafetensors(new Uint8Array(0)))).toBe("HeaderTooSmall");
    expect(ruleOf(() => parseSafetensors(new Uint8Array(7)))).toBe("HeaderTooSmall");
  });

  it("HeaderTooLarge: N > 100,000,000 or beyond 32 bits", () => {
    expect(ruleOf(() => parseSafetensors(craft(I32_2x2, z16, 0xffffff0000003cn)))).toBe("HeaderTooLarge");
    expect(ruleOf(() => parseSafetensors(craft(I32_2x2, z16, 100_000_001n)))).toBe("HeaderTooLarge");
  });

  it("InvalidHeaderLength: header runs past EOF", () => {
    expect(ruleOf(() => parseSafetensors(craft("", new Uint8Array(0), 60n)))).toBe("InvalidHeaderLength");
  });

  it("InvalidHeader: not UTF-8", () => {
    const bad = craft("x");
    bad[8] = 0xff;
    expect(ruleOf(() => parseSafetensors(bad))).toBe("InvalidHeader");
  });

  it("InvalidHeaderDeserialization: bad JSON or not an object", () => {
    expect(ruleOf(() => parseSafetensors(craft("{")))).toBe("InvalidHeaderDeserialization");
    expect(ruleOf(() => parseSafetensors(craft("[]")))).toBe("InvalidHeaderDeserialization");
    expect(ruleOf(() => parseSafetensors(craft("\ufeff{}")))).toBe("InvalidHeaderDeserialization");
  });

  it("UnknownDtype / InvalidTensorInfo / InvalidMetadata name the tensor", () => {
    const e = (() => {
      try {
        parseSafetensors(craft('{"w":{"dtype":"F12","shape":[1],"data_offsets":[0,1]}}', new Uint8Array(1)));
      } catch (err) {
        return err as SafetensorsError;
      }
    })();
    expect(e?.rule).toBe("UnknownDtype");
    expect(e?.tensor).toBe("w");
    expect(e?.message).toMatch(/tensor "w".*F12/);
    expect(ruleOf(() => parseSafetensors(craft('{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}}')))).toBe(
      "InvalidTensorInfo",
    );
    expect(ruleOf(() => parseSafetensors(craft('{"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}')))).toBe(
      "InvalidTensorInfo",
    );
    expect(ruleOf(() => parseSafetensors(craft('{"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}}')))).toBe(
      "InvalidTensorInfo",
    );
    expect(ruleOf(() => parseSafetensors(craft('{"w":[1]}')))).toBe("InvalidTensorInfo");
    expect(ruleOf(() => parseSafetensors(craft('{"__metadata__":{"a":{"nested":1}}}')))).toBe("InvalidMetadata");
    expect(ruleOf(() => parseSafetensors(craft('{"__metadata__":{"a":1}}')))).toBe("InvalidMetadata");
    expect(parseSafetensors(craft('{"__metadata__":null}')).metadata).toBeUndefined();
  });

  it("InvalidOffset: overlap, duplicate ranges (json attack), gaps, reversed ranges", () => {
    const attack = `{${Array.from({ length: 10 }, (_, i) => `"weight_${i}":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}`).join(",")}}`;
    expect(ruleOf(() => parseSafetensors(craft(attack, z16)))).toBe("InvalidOffset");
    const gap =
      '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]}}';
    expect(ruleOf(() => parseSafetensors(craft(gap, new Uint8Array(5))))).toBe("InvalidOffset");
    const first = '{"a":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}';
    expect(ruleOf(() => parseSafetensors(craft(first, new Uint8Array(3))))).toBe("InvalidOffset");
    const overlap =
      '{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}}';
    expect(() => parseSafetensors(craft(overlap, new Uint8Array(4)))).toThrow(/tensor "b".*overlaps/);
    const reversed =
      '{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[2],"data_offsets":[0,0]}}';
    expect(ruleOf(() => parseSafetensors(craft(reversed)))).toBe("TensorInvalidInfo");
    const backwards =
      '{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}';
    expect(() => parseSafetensors(craft(backwards, new Uint8Array(2)))).toThrow(/InvalidOffset.*"b".*ends before/);
  });

  it("ValidationOverflow: shapes beyond 2^53 (JSON integers that JS cannot hold exactly)", () => {
    const a = '{"test":{"dtype":"I32","shape":[2,18446744073709551614],"data_offsets":[0,16]}}';
    expect(ruleOf(() => parseSafetensors(craft(a, z16)))).toBe("ValidationOverflow");
    const b = '{"test":{"dtype":"I32","shape":[2,9223372036854775807],"data_offsets":[0,16]}}';
    expect(ruleOf(() => parseSafetensors(craft(b, z16)))).toBe("ValidationOverflow");
    const c = '{"test":{"dtype":"I32","shape":[9007199254740993],"data_offsets":[0,16]}}';
    expect(ruleOf(() => parseSafetensors(craft(c, z16)))).toBe("ValidationOverflow");
    const d = '{"test":{"dtype":"I32","shape":[4194304,4194304,4194304],"data_offsets":[0,16]}}';
    expect(ruleOf(() => parseSafetensors(craft(d, z16)))).toBe("ValidationOverflow");
    const e = '{"test":{"dtype":"I32","shape":[1e400],"data_offsets":[0,16]}}';
    expect(ruleOf(() => parseSafetensors(craft(e, z16)))).toBe("ValidationOverflow");
  });

  it("MisalignedSlice: sub-byte dtypes must fill whole bytes", () => {
    const h = '{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}';
    expect(ruleOf(() => parseSafetensors(craft(h, new Uint8Array(2))))).toBe("MisalignedSlice");
    const ok = '{"a":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}}';
    expect(parseSafetensors(craft(ok, new Uint8Array(3))).tensors.get("a")?.data.byteLength).toBe(3);
  });

  it("TensorInvalidInfo: size does not match shape × dtype", () => {
    const h = '{"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0, 4]}}';
    expect(ruleOf(() => parseSafetensors(craft(h, new Uint8Array(4))))).toBe("TensorInvalidInfo");
  });

  it("MetadataIncompleteBuffer: trailing bytes (polyglot) or truncated data", () => {
    const extra = new Uint8Array(20);
    expect(ruleOf(() => parseSafetensors(craft(I32_2x2, extra)))).toBe("MetadataIncompleteBuffer");
    expect(ruleOf(() => parseSafetensors(craft(I32_2x2, new Uint8Array(14))))).toBe("MetadataIncompleteBuffer");
  });
});

describe("SafetensorsFile (lazy reader)", () => {
  const values = Float32Array.from({ length: 1000 }, (_, i) => i * 0.5);
  const bytes = serializeSafetensors(
    {
      big: { dtype: "F32", shape: [10, 100], data: new Uint8Array(values.buffer) },
      ids: { dtype: "I64", shape: [3], data: new Uint8Array(new BigInt64Array([1n, -2n, 3n]).buffer) },
      half: { dtype: "BF16", shape: [2], data: new Uint8Array(new Uint16Array([0x3f80, 0xc000]).buffer) },
    },
    { format: "pt" },
  );

  it("reads the same tensors from a buffer, a Blob and a file path", async () => {
    const path = join(tmp.dir, "lazy.safetensors");
    writeFileSync(path, bytes);
    for (const src of [bytes, new Blob([bytes as Uint8Array<ArrayBuffer>]), path]) {
      const f = await SafetensorsFile.open(src);
      expect(f.keys()).toEqual(["ids", "big", "half"]);
      expect(f.metadata).toEqual({ format: "pt" });
      expect(f.info("big")).toMatchObject({ dtype: "F32", shape: [10, 100] });
      expect(await f.readFloat32("big")).toEqual(values);
      expect([...(await f.readFloat32("half"))]).toEqual([1, -2]);
      expect([...(await f.readFloat32("ids"))]).toEqual([1, -2, 3]);
      const chunks: number[] = [];
      for await (const c of f.chunks("big", 1024)) chunks.push(c.byteLength);
      expect(chunks).toEqual([1024, 1024, 1024, 928]);
      await expect(f.read("nope")).rejects.toThrow(/TensorNotFound.*"nope"/);
      const all = await f.readAll();
      expect([...all.keys()]).toEqual(["ids", "big", "half"]);
      expect(toFloat32(all.get("big")!)).toEqual(values);
      expect(all.get("half")!.data).toEqual(await f.read("half"));
      await f.close();
    }
  });

  it("reads only the header and the requested range from a source", async () => {
    const reads: [number, number][] = [];
    const f = await SafetensorsFile.open({
      size: bytes.byteLength,
      read: async (o, l) => {
        reads.push([o, l]);
        return bytes.slice(o, o + l);
      },
      close: async () => {},
    });
    await f.read("half");
    expect(reads.length).toBe(3);
    expect(reads[2][1]).toBe(4);
  });

  it("rejects a bad file opened from a path with the same typed error", async () => {
    const path = join(tmp.dir, "bad.safetensors");
    writeFileSync(path, craft(I32_2x2, new Uint8Array(3)));
    await expect(SafetensorsFile.open(path)).rejects.toThrow(/MetadataIncompleteBuffer/);
  });
});

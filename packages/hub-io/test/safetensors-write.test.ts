import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  DTYPES,
  type Dtype,
  SafetensorsFile,
  byteSize,
  compareCodePoints,
  parseSafetensors,
  serializeSafetensors,
  writeSafetensorsFile,
} from "../src/index.js";
import { tempDir } from "./helpers.js";

const tmp = tempDir();
afterAll(tmp.cleanup);

const vectors = JSON.parse(
  readFileSync(new URL("./fixtures/safetensors/reference-vectors.json", import.meta.url), "utf8"),
) as {
  cases: {
    test: string;
    tensors: Record<string, { dtype: Dtype; shape: number[]; f32?: number[]; hexdata?: string }>;
    metadata: Record<string, string> | null;
    hex: string;
  }[];
};

describe("safetensors writer", () => {
  for (const c of vectors.cases) {
    it(`matches the reference serializer byte for byte: ${c.test}`, () => {
      const tensors = Object.fromEntries(
        Object.entries(c.tensors).map(([name, t]) => [
          name,
          {
            dtype: t.dtype,
            shape: t.shape,
            data: t.f32
              ? new Uint8Array(Float32Array.from(t.f32).buffer)
              : new Uint8Array(Buffer.from(t.hexdata!, "hex")),
          },
        ]),
      );
      const out = serializeSafetensors(tensors, c.metadata);
      expect(Buffer.from(out).toString("hex")).toBe(c.hex);
    });
  }

  for (const file of ["voices.safetensors", "jfk-codes.safetensors"]) {
    it(`re-serializes a file written by the reference implementation byte for byte: ${file}`, () => {
      const original = new Uint8Array(readFileSync(new URL(`./fixtures/safetensors/${file}`, import.meta.url)));
      const { metadata, tensors } = parseSafetensors(original);
      const again = serializeSafetensors(tensors, metadata);
      expect(again.byteLength).toBe(original.byteLength);
      expect(Buffer.from(again).equals(original)).toBe(true);
    });
  }

  it("orders by dtype descending (reference enum) then name by code point, contiguous, 8-aligned", () => {
    const t = (dtype: Dtype, n: number) => ({ dtype, shape: [n], data: new Uint8Array(byteSize(dtype, [n])) });
    const out = serializeSafetensors({
      "b.bias": t("F16", 3),
      "a.mask": t("BOOL", 5),
      "z.weight": t("F32", 2),
      "a.weight": t("F32", 1),
      "\u{1F600}": t("U8", 1),
      "\uFFFD": t("U8", 1),
      step: t("I64", 1),
      "c.bf": t("BF16", 2),
    });
    const n = Number(new DataView(out.buffer).getBigUint64(0, true));
    expect(n % 8).toBe(0);
    const headerText = new TextDecoder().decode(out.subarray(8, 8 + n));
    expect(headerText.trimEnd().endsWith("}")).toBe(true);
    expect(/^ *$/.test(headerText.slice(headerText.trimEnd().length))).toBe(true);
    const keys = Object.keys(JSON.parse(headerText));
    // U+FFFD sorts before U+1F600 in UTF-8 byte order although its UTF-16 code unit is larger.
    expect(keys).toEqual(["step", "a.weight", "z.weight", "c.bf", "b.bias", "\uFFFD", "\u{1F600}", "a.mask"]);
    expect(headerText.startsWith('{"step":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}')).toBe(true);
    const parsed = parseSafetensors(out);
    expect([...parsed.tensors.keys()]).toEqual(keys);
    expect(compareCodePoints("\uFFFD", "\u{1F600}")).toBeLessThan(0);
  });

  it("writes __metadata__ first and escapes names like serde_json", () => {
    const out = serializeSafetensors(
      { 'we"ird\n\u0001é': { dtype: "U8", shape: [1], data: new Uint8Array([7]) } },
      { format: "pt" },
    );
    const n = Number(new DataView(out.buffer).getBigUint64(0, true));
    const text = new TextDecoder().decode(out.subarray(8, 8 + n)).trimEnd();
    expect(text).toBe(
      '{"__metadata__":{"format":"pt"},"we\\"ird\\n\\u0001é":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
    );
  });

  it("round-trips every dtype through a file, bytes unchanged", async () => {
    const tensors: Record<string, { dtype: Dtype; shape: number[]; data: Uint8Array }> = {};
    let seed = 1;
    for (const dtype of DTYPES) {
      const shape = dtype === "F4" ? [2, 4] : dtype.startsWith("F6") ? [4] : [2, 3];
      const data = new Uint8Array(byteSize(dtype, shape));
      for (let i = 0; i < data.length; i++) data[i] = (seed = (seed * 1103515245 + 12345) >>> 0) >>> 24;
      tensors[`t.${dtype.toLowerCase()}`] = { dtype, shape, data };
    }
    tensors.scalar = { dtype: "F32", shape: [], data: new Uint8Array(4) };
    tensors.empty = { dtype: "F16", shape: [0, 5], data: new Uint8Array(0) };
    const path = join(tmp.dir, "all.safetensors");
    await writeSafetensorsFile(path, tensors, { format: "pt" });
    const fileBytes = new Uint8Array(readFileSync(path));
    expect(fileBytes).toEqual(serializeSafetensors(tensors, { format: "pt" }));
    const f = await SafetensorsFile.open(path);
    for (const [name, t] of Object.entries(tensors)) {
      expect(f.info(name).dtype).toBe(t.dtype);
      expect(f.info(name).shape).toEqual(t.shape);
      expect(await f.read(name)).toEqual(t.data);
    }
    await f.close();
  });

  it("streams lazily produced and chunked tensors", async () => {
    const path = join(tmp.dir, "stream.safetensors");
    async function* chunks() {
      yield new Uint8Array([1, 2]);
      yield new Uint8Array([3, 4, 5, 6]);
    }
    await writeSafetensorsFile(path, {
      a: { dtype: "U8", shape: [6], data: chunks() },
      b: { dtype: "I16", shape: [1], data: async () => new Uint8Array([9, 0]) },
    });
    const parsed = parseSafetensors(new Uint8Array(readFileSync(path)));
    expect([...parsed.tensors.get("a")!.data]).toEqual([1, 2, 3, 4, 5, 6]);
    expect([...parsed.tensors.get("b")!.data]).toEqual([9, 0]);
  });

  it("refuses wrong sizes, unknown dtypes and short streams, leaving no file behind", async () => {
    expect(() => serializeSafetensors({ w: { dtype: "F32", shape: [2], data: new Uint8Array(4) } })).toThrow(
      /TensorInvalidInfo.*"w".*needs 8/,
    );
    expect(() => serializeSafetensors({ w: { dtype: "F7" as Dtype, shape: [1], data: new Uint8Array(1) } })).toThrow(
      /UnknownDtype/,
    );
    expect(() => serializeSafetensors({ w: { dtype: "F4", shape: [3], data: new Uint8Array(2) } })).toThrow(
      /MisalignedSlice/,
    );
    const path = join(tmp.dir, "short.safetensors");
    await expect(
      writeSafetensorsFile(path, { w: { dtype: "U8", shape: [4], data: () => new Uint8Array(3) } }),
    ).rejects.toThrow(/TensorInvalidInfo.*"w"/);
    expect(() => readFileSync(path)).toThrow();
  });
});

import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import {
  DTYPES,
  bf16BitsToFloat,
  dtypeBits,
  f16BitsToFloat,
  floatToBf16Bits,
  floatToF16Bits,
  fromFloat32,
  toFloat32,
  typedView,
} from "../src/index.js";

const fixture = JSON.parse(readFileSync(new URL("./fixtures/conversions.json", import.meta.url), "utf8"));
const b64 = (s: string) => {
  const b = Buffer.from(s, "base64");
  return new Uint8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength));
};
const f32Bits = new Uint32Array(b64(fixture.f32_bits).buffer);
const f32 = new Float32Array(f32Bits.buffer);

describe("dtypes", () => {
  it("lists the reference enum in order with bit widths", () => {
    expect(DTYPES[0]).toBe("BOOL");
    expect(DTYPES.at(-1)).toBe("U64");
    expect(DTYPES.indexOf("BF16")).toBeGreaterThan(DTYPES.indexOf("F16"));
    expect(dtypeBits("F4")).toBe(4);
    expect(dtypeBits("F6_E2M3")).toBe(6);
    expect(dtypeBits("C64")).toBe(64);
  });

  it("f32 → bf16 matches torch bit for bit (RNE, NaN → 0xFFFF as torch tensors)", () => {
    const want = new Uint16Array(b64(fixture.bf16_bits).buffer);
    const got = new Uint16Array(fromFloat32(f32, "BF16").buffer);
    let bad = 0;
    for (let i = 0; i < want.length; i++) {
      if (got[i] !== want[i] || floatToBf16Bits(f32[i]) !== want[i]) bad++;
    }
    expect(bad).toBe(0);
    expect(want.length).toBe(fixture.count);
  });

  it("f32 → f16 matches torch bit for bit (RNE, subnormals, overflow, NaN)", () => {
    const want = new Uint16Array(b64(fixture.f16_bits).buffer);
    const got = new Uint16Array(fromFloat32(f32, "F16").buffer);
    const mismatches: string[] = [];
    for (let i = 0; i < want.length; i++) {
      if (got[i] !== want[i] || floatToF16Bits(f32[i]) !== want[i]) {
        mismatches.push(`${f32Bits[i].toString(16)}: ${got[i].toString(16)} vs torch ${want[i].toString(16)}`);
      }
    }
    expect(mismatches.slice(0, 5)).toEqual([]);
  });

  it("bf16/f16 → f32 matches torch's widening", () => {
    const bf = new Uint16Array(b64(fixture.bf16_bits).buffer);
    const hf = new Uint16Array(b64(fixture.f16_bits).buffer);
    const bfWant = new Uint32Array(b64(fixture.bf16_to_f32_bits).buffer);
    const hfWant = new Uint32Array(b64(fixture.f16_to_f32_bits).buffer);
    const bfGot = new Uint32Array(toFloat32({ dtype: "BF16", data: new Uint8Array(bf.buffer) }).buffer);
    const hfGot = new Uint32Array(toFloat32({ dtype: "F16", data: new Uint8Array(hf.buffer) }).buffer);
    const norm = (x: number) => ((x & 0x7fffffff) > 0x7f800000 ? 0x7fc00000 : x); // NaN payloads aside
    let bad = 0;
    for (let i = 0; i < bf.length; i++) {
      if (norm(bfGot[i]) !== norm(bfWant[i]) || norm(hfGot[i]) !== norm(hfWant[i])) bad++;
    }
    expect(bad).toBe(0);
    expect(bf16BitsToFloat(0x3f80)).toBe(1);
    expect(f16BitsToFloat(0x3c00)).toBe(1);
    expect(f16BitsToFloat(0x0001)).toBe(2 ** -24);
  });

  it("decodes integer, bool and 8-bit float dtypes", () => {
    const i64 = new Uint8Array(new BigInt64Array([-3n, 7n]).buffer);
    expect([...toFloat32({ dtype: "I64", data: i64 })]).toEqual([-3, 7]);
    expect([...toFloat32({ dtype: "I8", data: new Uint8Array([0xff, 2]) })]).toEqual([-1, 2]);
    expect([...toFloat32({ dtype: "BOOL", data: new Uint8Array([0, 1]) })]).toEqual([0, 1]);
    // float8_e4m3fn: 0x38 = 1.0, 0x7E = 448 (max), 0x7F = NaN; e5m2: 0x3C = 1.0, 0x7C = inf.
    const e4 = toFloat32({ dtype: "F8_E4M3", data: new Uint8Array([0x38, 0x7e, 0x7f, 0x01]) });
    expect(e4[0]).toBe(1);
    expect(e4[1]).toBe(448);
    expect(e4[2]).toBeNaN();
    expect(e4[3]).toBe(2 ** -9);
    const e5 = toFloat32({ dtype: "F8_E5M2", data: new Uint8Array([0x3c, 0x7c, 0xfc]) });
    expect([...e5]).toEqual([1, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]);
    expect(toFloat32({ dtype: "F8_E4M3FNUZ", data: new Uint8Array([0x80]) })[0]).toBeNaN();
    expect(toFloat32({ dtype: "F8_E8M0", data: new Uint8Array([127]) })[0]).toBe(1);
  });

  it("F32 is zero-copy when aligned and copied when not", () => {
    const buf = new Uint8Array(12);
    new Float32Array(buf.buffer).set([1, 2, 3]);
    const v = toFloat32({ dtype: "F32", data: buf.subarray(4) });
    expect(v.buffer).toBe(buf.buffer);
    const odd = new Uint8Array(9);
    odd.set(buf.subarray(0, 8), 1);
    const c = toFloat32({ dtype: "F32", data: odd.subarray(1) });
    expect([...c]).toEqual([1, 2]);
    expect(c.buffer).not.toBe(odd.buffer);
  });

  it("typedView gives storage-typed views without conversion", () => {
    const bits = new Uint16Array([0x3f80, 0xc000]);
    const v = typedView({ dtype: "BF16", data: new Uint8Array(bits.buffer) });
    expect(v).toBeInstanceOf(Uint16Array);
    expect([...v]).toEqual([0x3f80, 0xc000]);
    expect(v.buffer).toBe(bits.buffer);
    expect(typedView({ dtype: "I64", data: new Uint8Array(new BigInt64Array([-5n]).buffer) })[0]).toBe(-5n);
    expect(() => typedView({ dtype: "C64", data: new Uint8Array(8) })).toThrow(/UnsupportedConversion/);
  });

  it("refuses conversions that have no float32 form", () => {
    expect(() => toFloat32({ dtype: "F4", data: new Uint8Array(1) })).toThrow(/UnsupportedConversion/);
  });
});

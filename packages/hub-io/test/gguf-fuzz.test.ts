// Random and mutated GGUF files: every input parses or throws GgufError, and the lazy reader never
// asks its source for bytes outside the file. Like fuzz.test.ts (safetensors): at least 3,000 inputs,
// KILN_FUZZ_SECONDS=N keeps going for N seconds.
import { describe, expect, it } from "vitest";
import {
  GgufError,
  GgufFile,
  type GgufMetadata,
  type GgufTensorInput,
  ggufDecode,
  ggufEncode,
  ggufValue,
  parseGguf,
  serializeGguf,
} from "../src/index.js";
import { rng } from "./fuzz-inputs.js";

const fuzzSeconds = Number(process.env.KILN_FUZZ_SECONDS ?? 0);
const NASTY_U64 = [0n, 1n, 3n, 5n, 31n, 2n ** 31n, 2n ** 32n, 2n ** 53n, 2n ** 63n, 2n ** 64n - 1n, 1000n];

async function validFile(r: () => number): Promise<Uint8Array> {
  const meta: GgufMetadata = new Map();
  const nKeys = Math.floor(r() * 5);
  for (let i = 0; i < nKeys; i++) {
    const pick = Math.floor(r() * 6);
    const v =
      pick === 0
        ? ggufValue.u32(Math.floor(r() * 1000))
        : pick === 1
          ? ggufValue.string("x".repeat(Math.floor(r() * 20)))
          : pick === 2
            ? ggufValue.array("string", ["a", "bc", "▁d"].slice(0, Math.floor(r() * 4)))
            : pick === 3
              ? ggufValue.array("f32", [r(), r()])
              : pick === 4
                ? ggufValue.u64(BigInt(Math.floor(r() * 1e6)))
                : ggufValue.bool(r() < 0.5);
    meta.set(`k${i}.${Math.floor(r() * 100)}`, v);
  }
  if (r() < 0.2) meta.set("general.alignment", ggufValue.u32([8, 16, 32, 64][Math.floor(r() * 4)]));
  const tensors: GgufTensorInput[] = [];
  const nTensors = Math.floor(r() * 4);
  for (let i = 0; i < nTensors; i++) {
    const type = (["F32", "F16", "BF16", "Q8_0"] as const)[Math.floor(r() * 4)];
    const rows = 1 + Math.floor(r() * 3);
    const cols = type === "Q8_0" ? 32 * (1 + Math.floor(r() * 2)) : 1 + Math.floor(r() * 6);
    const values = Float32Array.from({ length: rows * cols }, () => r() - 0.5);
    tensors.push({ name: `t${i}`, type, shape: [rows, cols], data: ggufEncode(values, type) });
  }
  return serializeGguf(meta, tensors);
}

async function fuzzInput(r: () => number): Promise<Uint8Array> {
  const kind = Math.floor(r() * 6);
  if (kind === 0) {
    const b = new Uint8Array(Math.floor(r() * 80));
    for (let i = 0; i < b.length; i++) b[i] = Math.floor(r() * 256);
    if (r() < 0.5 && b.length >= 8) b.set([0x47, 0x47, 0x55, 0x46, 3, 0, 0, 0]);
    return b;
  }
  const base = await validFile(r);
  if (kind === 1) return base;
  if (kind === 2) {
    const b = base.slice();
    for (let k = 0; k < 1 + r() * 4; k++) b[Math.floor(r() * b.length)] ^= 1 << Math.floor(r() * 8);
    return b;
  }
  if (kind === 3) {
    // Overwrite an aligned u64 or u32 in the header area with a nasty value.
    const b = base.slice();
    const dv = new DataView(b.buffer);
    const at = Math.floor(r() * Math.max(1, Math.min(b.length, 400) - 8));
    if (r() < 0.5) dv.setBigUint64(at, NASTY_U64[Math.floor(r() * NASTY_U64.length)], true);
    else dv.setUint32(at, Number(NASTY_U64[Math.floor(r() * 7)] & 0xffffffffn), true);
    return b;
  }
  if (kind === 4) return base.subarray(0, Math.floor(r() * base.length));
  const out = new Uint8Array(base.length + 1 + Math.floor(r() * 40));
  out.set(base);
  return out;
}

describe("GGUF fuzz (CI size; KILN_FUZZ_SECONDS for longer runs)", () => {
  it("every random or mutated input parses or throws GgufError, and reads stay within the input", async () => {
    const r = rng(30);
    let ok = 0;
    const rejected = new Map<string, number>();
    const t0 = performance.now();
    for (let i = 0; i < 3000 || performance.now() - t0 < fuzzSeconds * 1000; i++) {
      const input = await fuzzInput(r);
      try {
        const f = parseGguf(input);
        for (const t of f.tensors) {
          const n = t.shape.reduce((a, d) => a * d, 1);
          ggufDecode(t.type, f.data.get(t.name)!, n, t.name);
        }
        ok++;
      } catch (e) {
        if (!(e instanceof GgufError)) throw new Error(`input ${i} crashed: ${(e as Error).stack}`);
        if (e.rule !== "UnsupportedTensorType") rejected.set(e.rule, (rejected.get(e.rule) ?? 0) + 1);
      }
      if (i % 10 === 0) {
        const f = await GgufFile.open({
          size: input.byteLength,
          read: async (o, l) => {
            expect(o + l).toBeLessThanOrEqual(input.byteLength);
            return input.subarray(o, o + l);
          },
          close: async () => {},
        }).catch((e) => {
          if (!(e instanceof GgufError)) throw e;
          return undefined;
        });
        if (f) for (const t of f.tensors) await f.raw(t.name);
      }
    }
    expect(ok).toBeGreaterThan(300);
    expect(rejected.size).toBeGreaterThanOrEqual(7);
  });
});

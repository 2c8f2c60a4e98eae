import { describe, expect, it } from "vitest";
import { SafetensorsError, SafetensorsFile, parseSafetensors, toFloat32 } from "../src/index.js";
import { fuzzInput, rng } from "./fuzz-inputs.js";

// At least 3,000 inputs; KILN_FUZZ_SECONDS=N keeps going for N seconds (bench/fuzz.ts runs ≥ 100,000).
const fuzzSeconds = Number(process.env.KILN_FUZZ_SECONDS ?? 0);

describe("safetensors fuzz (CI size; KILN_FUZZ_SECONDS or bench/fuzz.ts for longer runs)", () => {
  it("every random or mutated input parses or throws SafetensorsError, and reads stay within the input", async () => {
    const r = rng(4);
    const outcomes = { ok: 0, rejected: new Map<string, number>() };
    const t0 = performance.now();
    for (let i = 0; i < 3000 || performance.now() - t0 < fuzzSeconds * 1000; i++) {
      const input = fuzzInput(r);
      try {
        const { tensors } = parseSafetensors(input);
        for (const t of tensors.values()) {
          try {
            toFloat32(t);
          } catch (e) {
            if (!(e instanceof SafetensorsError) || e.rule !== "UnsupportedConversion") throw e;
          }
        }
        outcomes.ok++;
      } catch (e) {
        if (!(e instanceof SafetensorsError)) throw new Error(`input ${i} crashed: ${(e as Error).stack}`);
        outcomes.rejected.set(e.rule, (outcomes.rejected.get(e.rule) ?? 0) + 1);
      }
      if (i % 10 === 0) {
        // The lazy reader never asks the source for more bytes than the input has.
        let requested = 0;
        const f = await SafetensorsFile.open({
          size: input.byteLength,
          read: async (o, l) => {
            requested += l;
            expect(o + l).toBeLessThanOrEqual(input.byteLength);
            return input.subarray(o, o + l);
          },
          close: async () => {},
        }).catch((e) => {
          if (!(e instanceof SafetensorsError)) throw e;
          return undefined;
        });
        if (f) for (const k of f.keys()) await f.read(k);
        expect(requested).toBeLessThanOrEqual(input.byteLength);
      }
    }
    expect(outcomes.ok).toBeGreaterThan(100);
    // Many different rules fire, so the generator reaches deep into validation.
    expect(outcomes.rejected.size).toBeGreaterThanOrEqual(9);
  });
});

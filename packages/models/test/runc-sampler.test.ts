import { readFileSync } from "node:fs";
import { join } from "node:path";
import { noGrad } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { GenerationError, RunCRng, generate, loadModel, sampleRunC } from "../src/index.js";
import { tinyDir } from "./helpers.js";

// Made by fixtures/runc-sampler/make-fixture.sh from harness.c (gcc + glibc libm).
interface Fixture {
  vocab: number;
  logits: number[];
  u32: { seed: number; values: number[] };
  cases: { temperature: number; topp: number; seed: number; tokens: number[] }[];
}
const fixture: Fixture = JSON.parse(
  readFileSync(join(import.meta.dirname, "fixtures", "runc-sampler", "expected.json"), "utf8"),
);

describe("run.c-compatible sampler", () => {
  it("RunCRng reproduces run.c's random_u32 stream", () => {
    const rng = new RunCRng(fixture.u32.seed);
    expect(fixture.u32.values.map(() => rng.nextU32())).toEqual(fixture.u32.values);
  });

  it("sampleRunC draws run.c's tokens (multinomial, top-p, greedy) from the C harness's logits", () => {
    const V = fixture.vocab;
    const rows = fixture.logits.length / V;
    for (const c of fixture.cases) {
      const rng = new RunCRng(c.seed);
      const got: number[] = [];
      for (let r = 0; r < rows; r++) {
        const row = Float32Array.from(fixture.logits.slice(r * V, (r + 1) * V));
        got.push(sampleRunC(row, c.temperature, c.topp, rng));
      }
      expect(got, `temperature ${c.temperature} topp ${c.topp} seed ${c.seed}`).toEqual(c.tokens);
    }
  });

  it('generate with sampler "runc" draws its first token as run.c would from the prefill logits', async () => {
    const model = await loadModel(tinyDir("llama"));
    const prompt = [5, 17, 42, 9, 3];
    const opts = {
      sampler: "runc" as const,
      seed: 1234,
      temperature: 0.8,
      topP: 0.9,
      maxNewTokens: 6,
      stopTokenIds: [],
    };
    const [out] = generate(model, [prompt], opts);
    expect(out.tokenIds.length).toBe(6);
    expect(generate(model, [prompt], opts)[0].tokenIds).toEqual(out.tokenIds);
    const logits = noGrad(() => model.forward([prompt], { logitsToKeep: 1 })).toFloat32Array();
    expect(sampleRunC(Float32Array.from(logits), 0.8, 0.9, new RunCRng(1234))).toBe(out.tokenIds[0]);
    expect(() => generate(model, [prompt], { ...opts, seed: 0 })).toThrow(GenerationError);
    expect(() => generate(model, [prompt], { ...opts, topK: 5 })).toThrow(GenerationError);
  });
});

import { Tensor, noGrad } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { loadModel } from "../src/index.js";
import { TINY, maxAbsDiff, readExpected, tinyDir } from "./helpers.js";

describe("logits match the PyTorch transcription (fixtures/make_fixtures.py)", () => {
  for (const name of TINY) {
    it(`${name}: padded batch of 2`, async () => {
      const model = await loadModel(tinyDir(name));
      const e = readExpected(name);
      const logits = noGrad(() => model.forward(new Tensor(e.ids, [e.B, e.T], "i32"), { attentionMask: e.mask }));
      expect(logits.shape).toEqual([e.B, e.T, e.V]);
      expect(maxAbsDiff(logits.toFloat32Array(), e.logits)).toBeLessThan(1e-4);
    });
  }

  it("bf16 storage of the matrices stays close to f32", async () => {
    const model = await loadModel(tinyDir("qwen3"), { dtype: "bf16" });
    expect(model.namedLinears()[0][1].weight.dtype).toBe("bf16");
    const e = readExpected("qwen3");
    const logits = noGrad(() => model.forward(new Tensor(e.ids, [e.B, e.T], "i32"), { attentionMask: e.mask }));
    const d = maxAbsDiff(logits.toFloat32Array(), e.logits);
    expect(d).toBeGreaterThan(0);
    expect(d).toBeLessThan(0.1);
  });
});

import { describe, expect, it } from "vitest";
import * as T from "../src/index.js";

describe("optimizer parameter errors", () => {
  const f32 = () => new T.Tensor(Float32Array.from([0.3, -1.2]), [2]);

  it("names a non-f32 parameter by its name and shape", () => {
    const weight = new T.Tensor(new Uint16Array(6), [2, 3], "bf16");
    weight.name = "model.layers.0.mlp.up_proj.weight";
    expect(() => new T.AdamW([f32(), weight])).toThrow(T.ShapeError);
    expect(() => new T.AdamW([f32(), weight])).toThrow(
      /parameter "model\.layers\.0\.mlp\.up_proj\.weight" \[2, ?3\] is bf16/,
    );
  });

  it("falls back to the position in the parameter list when the parameter is unnamed", () => {
    const weight = new T.Tensor(new Uint16Array(4), [4], "f16");
    expect(() => new T.SGD([f32(), f32(), weight], 0.1)).toThrow(/parameter #2 \[4\] is f16/);
  });
});

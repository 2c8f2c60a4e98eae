// Seeded random weights for a config (tests and benchmarks), from the counter-based RNG so
// every backend and run gets the same model.
import { Rng, Tensor, fromFloat32Array } from "@kiln/tensor";
import type { DecoderConfig } from "./config.js";
import { isMatrixParameter, parameterShapes } from "./parameter-shapes.js";

export interface RandomInitOptions {
  seed?: number;
  /** Std of the matrices' normal init (transformers initializer_range, default 0.02). */
  std?: number;
  /** Storage of the matrices. */
  dtype?: "f32" | "bf16";
}

export function randomTensors(config: DecoderConfig, options: RandomInitOptions = {}): Map<string, Tensor> {
  const rng = new Rng(options.seed ?? 0);
  const std = options.std ?? 0.02;
  const out = new Map<string, Tensor>();
  for (const [name, shape] of parameterShapes(config)) {
    const n = shape.reduce((a, b) => a * b, 1);
    let values: Float32Array;
    // Qwen3_5PreTrainedModel._init_weights: dt_bias 1, A_log = log U(0, 16) (here U(1, 16) keeps the decay
    // rate ≥ 1), the gated output norm 1 (it is not zero-centred).
    if (name.endsWith(".dt_bias") || name.endsWith("linear_attn.norm.weight")) values = new Float32Array(n).fill(1);
    else if (name.endsWith(".A_log")) values = rng.uniform(n).map((u) => Math.log(1 + 15 * u));
    else if (name.endsWith("norm.weight")) values = new Float32Array(n).fill(config.zeroCenteredNorm ? 0 : 1);
    else if (name.endsWith(".bias")) values = new Float32Array(n);
    else values = rng.normal(n).map((v) => v * std);
    const dtype = isMatrixParameter(name, shape) ? (options.dtype ?? "f32") : "f32";
    out.set(name, Tensor.fromHost(dtype === "f32" ? values : fromFloat32Array(values, dtype), shape, dtype));
  }
  return out;
}

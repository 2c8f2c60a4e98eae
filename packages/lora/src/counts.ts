import type { Model } from "@kiln/models";
import { bytesPerElement } from "@kiln/tensor";
import type { LoraAdapter } from "./lora-adapter.js";

export interface ParameterReport {
  trainable: number;
  total: number;
  /** trainable / total, in percent (as PEFT print_trainable_parameters). */
  trainablePercent: number;
  /** Bytes of the adapters' A and B (f32) plus their AdamW state (2 × f32). */
  adapterBytes: number;
  adapterBytesWithOptimizer: number;
  baseBytes: number;
}

export function parameterReport(model: Model, adapters: LoraAdapter[]): ParameterReport {
  let base = 0;
  let baseBytes = 0;
  for (const [, t] of model.namedParameters()) {
    base += t.size;
    baseBytes += t.size * bytesPerElement(t.dtype);
  }
  const trainable = adapters.reduce((acc, a) => acc + a.parameterCount, 0);
  const total = base + trainable;
  return {
    trainable,
    total,
    trainablePercent: (100 * trainable) / total,
    adapterBytes: trainable * 4,
    adapterBytesWithOptimizer: trainable * 12,
    baseBytes,
  };
}

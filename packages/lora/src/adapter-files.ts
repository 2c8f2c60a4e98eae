// PEFT adapter directories through @kiln/hub-io: adapter_config.json +
// adapter_model.safetensors with keys base_model.model.<module>.lora_{A,B}.weight.
import {
  type LoraAdapterConfig,
  type LoraLayer as PeftLoraLayer,
  type PeftAdapter,
  type TensorData,
  buildPeftAdapterFiles,
  loraScaling,
  parsePeftAdapter,
  readPeftAdapter,
  toFloat32,
  writePeftAdapter,
} from "@kiln/hub-io";
import type { Model } from "@kiln/models";
import { Tensor } from "@kiln/tensor";
import { LoraError } from "./errors.js";
import { type LoraAdapter, adapterFromLayers } from "./lora-adapter.js";
import { LoraLayer } from "./lora-layer.js";

function toTensorData(t: Tensor, scale = 1): TensorData {
  const values = Float32Array.from(t.toFloat32Array(), (v) => v * scale);
  return { dtype: "F32", shape: [...t.shape], data: new Uint8Array(values.buffer) };
}

/** The adapter as PEFT's in-memory structure; a setScale multiplier is baked into B so files reproduce the scaled adapter. */
export function toPeftAdapter(adapter: LoraAdapter): { config: LoraAdapterConfig; layers: Map<string, PeftLoraLayer> } {
  const layers = new Map<string, PeftLoraLayer>();
  for (const [module, l] of adapter.layers)
    layers.set(module, { A: toTensorData(l.A), B: toTensorData(l.B, l.scaleMultiplier) });
  return { config: { ...adapter.config, inference_mode: true }, layers };
}

/** adapter_config.json and adapter_model.safetensors contents. */
export function adapterFiles(adapter: LoraAdapter): Map<string, Uint8Array | string> {
  return buildPeftAdapterFiles(toPeftAdapter(adapter));
}

/** Write a PEFT adapter directory (atomic per file) that PeftModel.from_pretrained loads. */
export async function saveAdapter(adapter: LoraAdapter, dir: string): Promise<void> {
  await writePeftAdapter(dir, toPeftAdapter(adapter));
}

export interface LoadAdapterOptions {
  name?: string;
  /** Make A and B trainable (continue training). Default false. */
  trainable?: boolean;
}

/** Attach an adapter from a PEFT directory, its files, or a parsed PeftAdapter. */
export async function loadAdapter(
  model: Model,
  source: string | PeftAdapter | { config: string; weights: Uint8Array },
  options: LoadAdapterOptions = {},
): Promise<LoraAdapter> {
  const peft =
    typeof source === "string"
      ? await readPeftAdapter(source)
      : "layers" in source
        ? source
        : parsePeftAdapter(source.config, source.weights);
  if (peft.config.bias !== "none")
    throw new LoraError(`loadAdapter: bias "${peft.config.bias}" is not supported (only "none")`);
  const name = options.name ?? "default";
  const layers = new Map<string, LoraLayer>();
  for (const [module, l] of peft.layers) {
    const A = new Tensor(toFloat32(l.A), l.A.shape);
    const B = new Tensor(toFloat32(l.B), l.B.shape);
    if (options.trainable) {
      A.requireGrad();
      B.requireGrad();
    }
    layers.set(
      module,
      new LoraLayer(name, module, A, B, loraScaling(peft.config, module), peft.config.lora_dropout, 0),
    );
  }
  const adapter = adapterFromLayers(model, name, peft.config, layers);
  if (!options.trainable) adapter.train(false);
  return adapter;
}

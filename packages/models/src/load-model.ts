// loadModel: a Hugging Face model directory (or in-memory files) → CausalLM.
import { ggufToHfFiles } from "@kiln/hub-io";
import type { Tensor } from "@kiln/tensor";
import { CausalLM } from "./causal-lm.js";
import { type DecoderConfig, parseDecoderConfig } from "./config.js";
import { ModelConfigError } from "./errors.js";
import { type ModelSource, ggufConfigFiles, isGgufPath, modelFiles, readJsonFile } from "./model-files.js";
import { type LoadWeightsOptions, loadWeights } from "./load-weights.js";
import { type RandomInitOptions, randomTensors } from "./random-init.js";

export type Model = CausalLM;

export interface LoadModelOptions extends LoadWeightsOptions {
  /** Make f32 parameters require grad (full fine-tuning). Default false: frozen, as LoRA wants. */
  trainable?: boolean;
}

export async function loadConfig(source: ModelSource): Promise<DecoderConfig> {
  if (isGgufPath(source)) return parseDecoderConfig((await ggufConfigFiles(source)).config);
  const files = modelFiles(source);
  const raw = await readJsonFile(files, "config.json");
  if (raw === null) throw new ModelConfigError(`${files.label}: no config.json`);
  return parseDecoderConfig(raw);
}

/**
 * Load config.json + safetensors weights (single or sharded), or a `.gguf` file (llama.cpp's format:
 * Llama/Qwen2/Qwen3 with F32, F16, BF16 or Q8_0 tensors, dequantised to `options.dtype`; other tensor
 * types are a GgufError naming the type). A GGUF base trains LoRA like a Hugging Face one.
 */
export async function loadModel(source: ModelSource, options: LoadModelOptions = {}): Promise<Model> {
  if (isGgufPath(source)) return loadModel(await ggufToHfFiles(source, { dtype: options.dtype }), options);
  const files = modelFiles(source);
  const config = await loadConfig(source);
  const tensors = await loadWeights(files, config, options);
  const model = CausalLM.fromTensors(config, tensors);
  if (options.trainable) model.requireGrad(true);
  return model;
}

/** A randomly initialised model for a config object (tests, benchmarks). */
export function createModel(config: Record<string, unknown> | DecoderConfig, options: RandomInitOptions = {}): Model {
  const c =
    "architecture" in config && "raw" in config
      ? (config as DecoderConfig)
      : parseDecoderConfig(config as Record<string, unknown>);
  const tensors: Map<string, Tensor> = randomTensors(c, options);
  return CausalLM.fromTensors(c, tensors);
}

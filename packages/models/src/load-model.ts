// loadModel: a Hugging Face model directory (or in-memory files) → CausalLM.
import { type TensorData, planGgufToHf } from "@kiln/hub-io";
import type { Tensor } from "@kiln/tensor";
import { CausalLM } from "./causal-lm.js";
import { type DecoderConfig, parseDecoderConfig } from "./config.js";
import { ModelConfigError } from "./errors.js";
import { type ModelSource, ggufConfigFiles, isGgufPath, modelFiles, readJsonFile } from "./model-files.js";
import { type LoadWeightsOptions, type TensorReader, loadWeights, loadWeightsFrom } from "./load-weights.js";
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
 * Llama/Qwen2/Qwen3/Qwen3.5 (`qwen35`) with F32, F16, BF16 or Q8_0 tensors, dequantised to
 * `options.dtype`; other tensor types are a GgufError naming the tensor and the type). A GGUF base
 * trains LoRA like a Hugging Face one.
 */
export async function loadModel(source: ModelSource, options: LoadModelOptions = {}): Promise<Model> {
  if (isGgufPath(source)) return loadGgufModel(source, options);
  const files = modelFiles(source);
  const config = await loadConfig(source);
  const tensors = await loadWeights(files, config, options);
  const model = CausalLM.fromTensors(config, tensors);
  if (options.trainable) model.requireGrad(true);
  return model;
}

/**
 * A GGUF straight into tensors, one at a time: each is read from the file, dequantised to the load
 * dtype and becomes the model's tensor, so the whole model is never held twice (no Hugging Face
 * copy in memory first).
 */
async function loadGgufModel(path: string, options: LoadModelOptions): Promise<Model> {
  const plan = await planGgufToHf(path, { dtype: options.dtype });
  const config = parseDecoderConfig(plan.config);
  const reader: TensorReader = {
    names: () => [...plan.tensors.keys()],
    info: (n) => {
      const t = plan.tensors.get(n) as { dtype: string; shape: readonly number[] };
      return { dtype: t.dtype, shape: [...t.shape] };
    },
    read: async (n): Promise<TensorData> => {
      const t = plan.tensors.get(n) as { dtype: string; shape: readonly number[]; data: unknown };
      const data =
        typeof t.data === "function" ? await (t.data as () => Promise<Uint8Array>)() : (t.data as Uint8Array);
      return { dtype: t.dtype as TensorData["dtype"], shape: [...t.shape], data };
    },
    close: () => plan.file.close(),
    ownsReads: true,
  };
  const tensors = await loadWeightsFrom(new Map(reader.names().map((n) => [n, reader])), path, config, options);
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

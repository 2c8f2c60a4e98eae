// PEFT adapter directories through @kiln/hub-io: adapter_config.json +
// adapter_model.safetensors with keys base_model.model.<module>.lora_{A,B}.weight.
import {
  type LoraAdapterConfig,
  type LoraLayer as PeftLoraLayer,
  type PeftAdapter,
  type TensorData,
  PEFT_PREFIX,
  buildPeftAdapterFiles,
  effectiveModulesToSave,
  loraScaling,
  matchesModulesToSave,
  parsePeftAdapter,
  readPeftAdapter,
  toFloat32,
  writePeftAdapter,
} from "@kiln/hub-io";
import type { Model } from "@kiln/models";
import { Tensor } from "@kiln/tensor";
import { LoraError } from "./errors.js";
import { type LoraAdapter, type ParameterReplacement, adapterFromLayers } from "./lora-adapter.js";
import { LoraLayer } from "./lora-layer.js";

function toTensorData(t: Tensor, scale = 1): TensorData {
  const values = Float32Array.from(t.toFloat32Array(), (v) => v * scale);
  return { dtype: "F32", shape: [...t.shape], data: new Uint8Array(values.buffer) };
}

/** The adapter as PEFT's in-memory structure; a setScale multiplier is baked into B so files reproduce the scaled adapter. */
export function toPeftAdapter(adapter: LoraAdapter): {
  config: LoraAdapterConfig;
  layers: Map<string, PeftLoraLayer>;
  other: Map<string, TensorData>;
} {
  const layers = new Map<string, PeftLoraLayer>();
  for (const [module, l] of adapter.layers)
    layers.set(module, { A: toTensorData(l.A), B: toTensorData(l.B, l.scaleMultiplier) });
  // modules_to_save copies and saved biases go back under their PEFT keys, so a saved adapter is whole.
  const other = new Map(adapter.replacements.map((r) => [`${PEFT_PREFIX}${r.key}`, toTensorData(r.saved)] as const));
  return { config: { ...adapter.config, inference_mode: true }, layers, other };
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
  const name = options.name ?? "default";
  const replacements = replacementsOf(model, peft, name);
  if (replacements.length > 0 && options.trainable)
    throw new LoraError(
      `loadAdapter: adapter "${name}" replaces ${replacements.map((r) => r.key).join(", ")} (modules_to_save or bias); training those copies further is not supported`,
    );
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
  const adapter = adapterFromLayers(model, name, peft.config, layers, replacements);
  if (!options.trainable) adapter.train(false);
  return adapter;
}

/**
 * The base tensors an adapter replaces, as PEFT applies them: every saved copy of a modules_to_save
 * module (`base_model.model.<module>.<param>`, PEFT's key with the adapter name removed) and, with
 * bias "all" / "lora_only", every saved bias (what PEFT saved is what it loads back: with "lora_only"
 * current PEFT saves no bias at all, and then the base keeps its own). hub-io has already refused any other saved tensor.
 * A tied embedding / lm_head is replaced for both only when the config asks PEFT to keep them tied
 * (`ensure_weight_tying`); otherwise PEFT's result depends on what happens after the merge, and the
 * adapter is refused by name.
 */
function replacementsOf(model: Model, peft: PeftAdapter, name: string): ParameterReplacement[] {
  const params = model.stateDict();
  const tied = model.config.tieWordEmbeddings;
  const embedKey = `${model.config.weightPrefix}embed_tokens.weight`;
  const out: ParameterReplacement[] = [];
  const seen = new Map<string, Tensor>();
  for (const [fullKey, data] of peft.other) {
    // PEFT ≥ 0.7 wraps a LoRA layer's own Linear as `base_layer`, so bias "all" saves its bias under that name.
    let key = fullKey.slice(PEFT_PREFIX.length).replace(/\.base_layer\.bias$/, ".bias");
    const module = key.slice(0, key.lastIndexOf("."));
    const copy = matchesModulesToSave(module, effectiveModulesToSave(peft.config));
    const why = copy
      ? `modules_to_save ${JSON.stringify(effectiveModulesToSave(peft.config))}`
      : `bias "${peft.config.bias}"`;
    if (tied && (key === embedKey || key === "lm_head.weight")) {
      if (peft.config.ensure_weight_tying !== true)
        throw new LoraError(
          `loadAdapter: adapter "${name}" saves "${key}" (${why}) but the model ties lm_head to embed_tokens (tie_word_embeddings); PEFT replaces only one side unless ensure_weight_tying is true, so kiln refuses rather than guess`,
        );
      key = embedKey;
    }
    if (copy && peft.layers.has(module))
      throw new LoraError(`loadAdapter: adapter "${name}" has both LoRA weights and a saved copy of "${module}"`);
    const original = params.get(key);
    if (!original)
      throw new LoraError(
        `loadAdapter: adapter "${name}" saves "${fullKey}" (${why}) but the model has no parameter "${key}"`,
      );
    if (original.shape.length !== data.shape.length || original.shape.some((d, i) => d !== data.shape[i]))
      throw new LoraError(
        `loadAdapter: adapter "${name}" saves "${fullKey}" as [${data.shape}] (${why}) but the model's "${key}" is [${original.shape}]${key === embedKey ? " (was the vocabulary resized? kiln does not resize embeddings)" : ""}`,
      );
    // Swapping the base tensor for itself checks, before anything changes, that the model can replace it.
    try {
      model.replaceParameter(key, original);
    } catch (e) {
      throw new LoraError(`loadAdapter: adapter "${name}" saves "${fullKey}" (${why}): ${(e as Error).message}`);
    }
    const saved = new Tensor(toFloat32(data), data.shape);
    const twin = seen.get(key);
    if (twin) {
      const [a, b] = [twin.toFloat32Array(), saved.toFloat32Array()];
      if (a.some((v, i) => v !== b[i]))
        throw new LoraError(
          `loadAdapter: adapter "${name}" saves different embed_tokens and lm_head copies for a tied model`,
        );
      continue;
    }
    seen.set(key, saved);
    out.push({ key, saved, original });
  }
  return out;
}

// Exact weighted combination Σᵢ wᵢ·sᵢ·BᵢAᵢ by concatenation (PEFT add_weighted_adapter
// "cat"): A' = rows(wᵢ sᵢ Aᵢ), B' = cols(Bᵢ), rank Σ rᵢ, alpha = rank so the new s = 1.
// Unlike PEFT's "linear" combination it has no cross terms.
import { loraConfig } from "@kiln/hub-io";
import type { Model } from "@kiln/models";
import { Tensor } from "@kiln/tensor";
import { LoraError } from "./errors.js";
import { type LoraAdapter, adapterFromLayers } from "./lora-adapter.js";
import { LoraLayer } from "./lora-layer.js";

export function combineAdapters(
  model: Model,
  sources: { adapter: LoraAdapter; weight: number }[],
  name: string,
): LoraAdapter {
  if (sources.length === 0) throw new LoraError("combineAdapters: no source adapters");
  const modules = [...sources[0].adapter.layers.keys()];
  for (const { adapter } of sources) {
    if (adapter.replacements.length > 0)
      throw new LoraError(
        `combineAdapters: adapter "${adapter.name}" replaces ${adapter.replacements.map((r) => r.key).join(", ")} (modules_to_save); a weighted combination of replaced tensors is not a LoRA delta`,
      );
    const own = [...adapter.layers.keys()];
    if (own.length !== modules.length || own.some((m) => !sources[0].adapter.layers.has(m))) {
      throw new LoraError(
        `combineAdapters: adapter "${adapter.name}" targets different modules than "${sources[0].adapter.name}"`,
      );
    }
  }
  const layers = new Map<string, LoraLayer>();
  let rank = 0;
  for (const module of modules) {
    const parts = sources.map(({ adapter, weight }) => ({ layer: adapter.layers.get(module)!, weight }));
    const r = parts.reduce((acc, p) => acc + p.layer.rank, 0);
    rank = r;
    const inF = parts[0].layer.A.shape[1];
    const outF = parts[0].layer.B.shape[0];
    const A = new Float32Array(r * inF);
    const B = new Float32Array(outF * r);
    let row = 0;
    for (const { layer, weight } of parts) {
      const k = weight * layer.effectiveScaling;
      const a = layer.A.dataSync() as Float32Array;
      const b = layer.B.dataSync() as Float32Array;
      for (let i = 0; i < layer.rank * inF; i++) A[row * inF + i] = k * a[i];
      for (let o = 0; o < outF; o++) for (let j = 0; j < layer.rank; j++) B[o * r + row + j] = b[o * layer.rank + j];
      row += layer.rank;
    }
    layers.set(
      module,
      new LoraLayer(
        name,
        module,
        new Tensor(A, [r, inF]).requireGrad(),
        new Tensor(B, [outF, r]).requireGrad(),
        1,
        0,
        0,
      ),
    );
  }
  const first = sources[0].adapter.config;
  const config = loraConfig({
    ...first,
    r: rank,
    lora_alpha: rank,
    use_rslora: false,
    lora_dropout: 0,
    rank_pattern: {},
    alpha_pattern: {},
  });
  return adapterFromLayers(model, name, config, layers);
}

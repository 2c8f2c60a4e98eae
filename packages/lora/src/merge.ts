// Merging: W ← W + k·s·(B @ A), computed in f32 (PEFT get_delta_weight / merge), written
// as f32 or bf16. The report shows how much of the delta a bf16 merge would lose: the
// seeds measured a real quality drop from merging in bf16, so it must be visible.
import { Tensor, bf16BitsToF32, f32ToBf16Bits, matmul, noGrad } from "@kiln/tensor";
import { LoraError } from "./errors.js";
import type { LoraAdapter } from "./lora-adapter.js";
import type { LoraLayer } from "./lora-layer.js";

/** ΔW = scale · s · B @ A as f32 [out, in] (scale on top of any setScale multiplier). */
export function deltaWeight(layer: LoraLayer, scale = 1): Float32Array {
  const ba = noGrad(() => matmul(layer.B.detach(), layer.A.detach()));
  const k = scale * layer.effectiveScaling;
  const out = ba.dataSync() as Float32Array;
  for (let i = 0; i < out.length; i++) out[i] *= k;
  return out;
}

export interface MergeOptions {
  /** Extra multiplier of the delta (ARP's training-free s = 0.85). Default 1 (plus any setScale). */
  scale?: number;
  /** Storage of the merged weights. Default f32 (the seeds' fp32 merge). */
  dtype?: "f32" | "bf16";
  /** Keep the pre-merge weights so `unmergeAdapter` restores them bit-exactly. Default true. */
  keepOriginal?: boolean;
}

export interface ModuleMergeStats {
  module: string;
  /** ‖ΔW‖_F of the intended delta. */
  deltaNorm: number;
  /** ‖(bf16(W+ΔW) − bf16(W)) − ΔW‖ / ‖ΔW‖: the share of the delta lost when the merge is stored in bf16. */
  bf16DeltaLoss: number;
}

export interface MergeReport {
  adapter: string;
  dtype: "f32" | "bf16";
  scale: number;
  modules: ModuleMergeStats[];
  /** Mean and max of bf16DeltaLoss over modules. */
  meanBf16DeltaLoss: number;
  maxBf16DeltaLoss: number;
  /** Present when keepOriginal: what unmergeAdapter needs. */
  original?: Map<string, Tensor>;
}

/** v rounded to bf16 and back (no allocation: this runs twice per weight of every merged module). */
function bf16Round(v: number): number {
  return bf16BitsToF32(f32ToBf16Bits(v));
}

/** Merge `adapter` into its base weights and detach it from the model. */
export function mergeAdapter(adapter: LoraAdapter, options: MergeOptions = {}): MergeReport {
  const scale = options.scale ?? 1;
  const dtype = options.dtype ?? "f32";
  const keep = options.keepOriginal ?? true;
  const modules: ModuleMergeStats[] = [];
  const original = new Map<string, Tensor>();
  for (const [module, layer] of adapter.layers) {
    const lin = adapter.linear(module);
    const w = lin.weight.toFloat32Array();
    const delta = deltaWeight(layer, scale);
    if (delta.length !== w.length)
      throw new LoraError(`merge: module "${module}" delta has ${delta.length} elements, weight ${w.length}`);
    const merged = new Float32Array(w.length);
    let deltaSq = 0;
    let lossSq = 0;
    for (let i = 0; i < w.length; i++) {
      const m = Math.fround(w[i] + delta[i]);
      if (!Number.isFinite(m))
        throw new LoraError(`merge: module "${module}" produced a non-finite weight at ${i} (safe_merge)`);
      merged[i] = m;
      const effective = bf16Round(m) - bf16Round(w[i]);
      deltaSq += delta[i] * delta[i];
      lossSq += (effective - delta[i]) ** 2;
    }
    const deltaNorm = Math.sqrt(deltaSq);
    modules.push({ module, deltaNorm, bf16DeltaLoss: deltaNorm === 0 ? 0 : Math.sqrt(lossSq) / deltaNorm });
    if (keep) original.set(module, lin.weight);
    const mergedTensor = new Tensor(merged, lin.weight.shape);
    lin.weight = dtype === "f32" ? mergedTensor : mergedTensor.to("bf16");
  }
  // modules_to_save copies stay in the model, as in PEFT's merge_and_unload.
  adapter.detach({ keepReplacements: true });
  const losses = modules.map((m) => m.bf16DeltaLoss);
  return {
    adapter: adapter.name,
    dtype,
    scale,
    modules,
    meanBf16DeltaLoss: losses.reduce((a, b) => a + b, 0) / Math.max(1, losses.length),
    maxBf16DeltaLoss: Math.max(0, ...losses),
    original: keep ? original : undefined,
  };
}

/**
 * Undo a merge: with the report's saved originals the base comes back bit-exactly;
 * without them ΔW is subtracted in f32 (PEFT unmerge; exact only up to rounding).
 * The adapter is re-attached either way.
 */
export function unmergeAdapter(adapter: LoraAdapter, report: MergeReport): void {
  for (const [module, layer] of adapter.layers) {
    const lin = adapter.linear(module);
    const saved = report.original?.get(module);
    if (saved) lin.weight = saved;
    else {
      const w = lin.weight.toFloat32Array();
      const delta = deltaWeight(layer, report.scale);
      for (let i = 0; i < w.length; i++) w[i] -= delta[i];
      lin.weight = new Tensor(w, lin.weight.shape);
    }
  }
  adapter.reattach();
}

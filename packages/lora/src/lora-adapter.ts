// A named LoRA adapter spread over many Linear layers of one model: attach, enable /
// disable (adapter-off = DPO's reference policy), train / eval, runtime delta scaling.
import { type LoraAdapterConfig, loraConfig } from "@kiln/hub-io";
import type { Linear, Model } from "@kiln/models";
import { Rng, Tensor } from "@kiln/tensor";
import { LoraError } from "./errors.js";
import { LoraLayer } from "./lora-layer.js";
import { type TargetModules, resolveTargets, shortTargetNames } from "./targets.js";

export interface LoraOptions {
  /** Adapter name (several may live on one model). Default "default". */
  name?: string;
  r: number;
  alpha: number;
  dropout?: number;
  targetModules: TargetModules;
  /** Scale by alpha/√r instead of alpha/r. */
  useRslora?: boolean;
  /** PEFT init_lora_weights: true (kaiming-uniform A, zero B), "gaussian" (A ~ N(0, 1/r²)), false (both random). */
  init?: boolean | "gaussian";
  seed?: number;
  /** Per-module overrides by regex / suffix, as PEFT's rank_pattern / alpha_pattern. */
  rankPattern?: Record<string, number>;
  alphaPattern?: Record<string, number>;
  baseModelNameOrPath?: string | null;
}

/**
 * A base-model tensor the adapter replaces while it is enabled: a PEFT modules_to_save copy (e.g. a
 * trained embed_tokens or lm_head) or a saved bias (bias "all" / "lora_only").
 */
export interface ParameterReplacement {
  /** State-dict key in the model ("model.embed_tokens.weight"). */
  key: string;
  /** The adapter's tensor. */
  saved: Tensor;
  /** The base's tensor, put back when the adapter is disabled or detached. */
  original: Tensor;
}

/** Which adapter replaces which parameter of a model: two adapters may not replace the same one. */
const replacedBy = new WeakMap<Model, Map<string, string>>();

export class LoraAdapter {
  private isEnabled = true;

  constructor(
    readonly name: string,
    readonly config: LoraAdapterConfig,
    /** HF module path → its LoRA branch. */
    readonly layers: Map<string, LoraLayer>,
    private readonly linears: Map<string, Linear>,
    /** Base tensors this adapter replaces while enabled (PEFT modules_to_save); applied on construction. */
    readonly replacements: readonly ParameterReplacement[] = [],
    private readonly model?: Model,
  ) {
    if (replacements.length > 0 && !model) throw new LoraError("LoraAdapter: replacements need the model");
    this.claimReplacements();
    this.applyReplacements(true);
  }

  private claimReplacements(): void {
    if (!this.model || this.replacements.length === 0) return;
    const owners = replacedBy.get(this.model) ?? new Map<string, string>();
    for (const r of this.replacements) {
      const other = owners.get(r.key);
      if (other !== undefined && other !== this.name)
        throw new LoraError(
          `adapter "${this.name}" replaces "${r.key}" (modules_to_save), which adapter "${other}" already replaces; only one modules_to_save copy of a module can be active`,
        );
    }
    for (const r of this.replacements) owners.set(r.key, this.name);
    replacedBy.set(this.model, owners);
  }

  private applyReplacements(saved: boolean): void {
    for (const r of this.replacements) this.model?.replaceParameter(r.key, saved ? r.saved : r.original);
  }

  get enabled(): boolean {
    return this.isEnabled;
  }

  /** Trainable tensors (A and B of every layer), in module order. */
  parameters(): Tensor[] {
    return [...this.layers.values()].flatMap((l) => [l.A, l.B]);
  }

  namedParameters(): [string, Tensor][] {
    return [...this.layers].flatMap(([m, l]) => [
      [`${m}.lora_A.${this.name}.weight`, l.A] as [string, Tensor],
      [`${m}.lora_B.${this.name}.weight`, l.B] as [string, Tensor],
    ]);
  }

  enable(): void {
    this.isEnabled = true;
    for (const l of this.layers.values()) l.enabled = true;
    this.applyReplacements(true);
  }

  /** Adapter off: no LoRA branch, and the base's own tensors where modules_to_save replaced them (as PEFT's disable_adapter). */
  disable(): void {
    this.isEnabled = false;
    for (const l of this.layers.values()) l.enabled = false;
    this.applyReplacements(false);
  }

  /** Run `fn` with this adapter off (e.g. reference log-probs for DPO), restoring after. */
  withDisabled<T>(fn: () => T): T {
    const was = this.isEnabled;
    this.disable();
    try {
      return fn();
    } finally {
      if (was) this.enable();
    }
  }

  /** Dropout on (training) or off (evaluation). */
  train(flag = true): void {
    for (const l of this.layers.values()) l.training = flag;
  }

  /** Training-free delta scaling: the adapter contributes k · s · BA (PEFT set_scale/scale_layer). */
  setScale(k: number): void {
    if (!Number.isFinite(k)) throw new LoraError(`setScale: scale must be finite, got ${k}`);
    for (const l of this.layers.values()) l.scaleMultiplier = k;
  }

  get scale(): number {
    const first = this.layers.values().next().value;
    return first ? first.scaleMultiplier : 1;
  }

  /** The Linear a module name refers to. */
  linear(module: string): Linear {
    const l = this.linears.get(module);
    if (!l) throw new LoraError(`adapter "${this.name}" has no module "${module}"`);
    return l;
  }

  /**
   * Remove this adapter's branches from the model (its tensors stay usable) and put back the base
   * tensors it replaced. `keepReplacements` leaves the replaced tensors in the model: what a merge
   * does (PEFT merge_and_unload keeps the modules_to_save copy).
   */
  detach(options: { keepReplacements?: boolean } = {}): void {
    for (const [module, layer] of this.layers) {
      const lin = this.linears.get(module)!;
      lin.adapters = lin.adapters.filter((a) => a !== layer);
    }
    if (options.keepReplacements) this.applyReplacements(true);
    else if (this.isEnabled) this.applyReplacements(false);
    const owners = this.model ? replacedBy.get(this.model) : undefined;
    for (const r of this.replacements) if (owners?.get(r.key) === this.name) owners.delete(r.key);
  }

  /** Put the branches back after a detach (unmerge); replaced tensors are claimed again and applied when enabled. */
  reattach(): void {
    this.claimReplacements();
    for (const [module, layer] of this.layers) {
      const lin = this.linear(module);
      if (!lin.adapters.includes(layer)) lin.adapters.push(layer);
    }
    if (this.isEnabled) this.applyReplacements(true);
  }

  /** Parameter count of A and B over all layers. */
  get parameterCount(): number {
    let n = 0;
    for (const l of this.layers.values()) n += l.A.size + l.B.size;
    return n;
  }
}

function patternValue(patterns: Record<string, number> | undefined, module: string): number | undefined {
  for (const [k, v] of Object.entries(patterns ?? {})) if (new RegExp(`^(.*\\.)?(${k})$`).test(module)) return v;
  return undefined;
}

/** Attach a fresh adapter to `model` (PEFT get_peft_model / add_adapter). */
export function attachLora(model: Model, options: LoraOptions): LoraAdapter {
  const name = options.name ?? "default";
  if (!(Number.isInteger(options.r) && options.r > 0))
    throw new LoraError(`attachLora: r must be a positive integer, got ${options.r}`);
  if (!(options.alpha > 0)) throw new LoraError(`attachLora: lora_alpha must be > 0, got ${options.alpha}`);
  const p = options.dropout ?? 0;
  if (!(p >= 0 && p < 1)) throw new LoraError(`attachLora: dropout must be in [0, 1), got ${p}`);
  const all = model.namedLinears();
  for (const [module, lin] of all) {
    if (lin.adapters.some((a) => a.name === name))
      throw new LoraError(`attachLora: adapter "${name}" already exists on ${module}`);
  }
  const picked = resolveTargets(all, options.targetModules);
  const seed = options.seed ?? 0;
  const rng = new Rng(seed);
  const init = options.init ?? true;
  const layers = new Map<string, LoraLayer>();
  const linears = new Map<string, Linear>();
  let moduleIndex = 0;
  for (const [module, lin] of picked) {
    const r = patternValue(options.rankPattern, module) ?? options.r;
    const alpha = patternValue(options.alphaPattern, module) ?? options.alpha;
    const scaling = options.useRslora ? alpha / Math.sqrt(r) : alpha / r;
    const fanIn = lin.inFeatures;
    let a: Float32Array;
    if (init === "gaussian") a = rng.normal(r * fanIn).map((v) => v / r);
    else {
      // kaiming_uniform_(a=√5) on [r, in]: bound = √(1/3)·√(3/fan_in) = 1/√fan_in.
      const bound = 1 / Math.sqrt(fanIn);
      a = rng.uniform(r * fanIn).map((u) => (2 * u - 1) * bound);
    }
    const b =
      init === false ? rng.normal(lin.outFeatures * r).map((v) => v * 0.02) : new Float32Array(lin.outFeatures * r);
    const layer = new LoraLayer(
      name,
      module,
      Tensor.fromHost(a, [r, fanIn]).requireGrad(),
      Tensor.fromHost(b, [lin.outFeatures, r]).requireGrad(),
      scaling,
      p,
      seed * 1_000_003 + moduleIndex++,
    );
    lin.adapters.push(layer);
    layers.set(module, layer);
    linears.set(module, lin);
  }
  const targetNames =
    typeof options.targetModules === "string"
      ? options.targetModules
      : options.targetModules instanceof RegExp
        ? options.targetModules.source
        : shortTargetNames([...layers.keys()]);
  const config = loraConfig({
    task_type: "CAUSAL_LM",
    base_model_name_or_path: options.baseModelNameOrPath ?? null,
    r: options.r,
    lora_alpha: options.alpha,
    lora_dropout: p,
    target_modules: Array.isArray(targetNames) ? (targetNames as string[]) : (targetNames as string),
    use_rslora: options.useRslora ?? false,
    init_lora_weights: init,
    rank_pattern: options.rankPattern ?? {},
    alpha_pattern: options.alphaPattern ?? {},
  });
  return new LoraAdapter(name, config, layers, linears);
}

/** Wrap already-built layers (loading, combining) as an adapter attached to `model`. */
export function adapterFromLayers(
  model: Model,
  name: string,
  config: LoraAdapterConfig,
  layers: Map<string, LoraLayer>,
  replacements: readonly ParameterReplacement[] = [],
): LoraAdapter {
  const byName = new Map(model.namedLinears());
  const linears = new Map<string, Linear>();
  for (const [module, layer] of layers) {
    const lin = byName.get(module);
    if (!lin) throw new LoraError(`adapter "${name}": the model has no linear layer "${module}"`);
    if (layer.A.shape[1] !== lin.inFeatures || layer.B.shape[0] !== lin.outFeatures) {
      throw new LoraError(
        `adapter "${name}" module "${module}": lora_B·lora_A is [${layer.B.shape[0]}, ${layer.A.shape[1]}] but the weight is [${lin.outFeatures}, ${lin.inFeatures}]`,
      );
    }
    if (lin.adapters.some((a) => a.name === name)) throw new LoraError(`adapter "${name}" already exists on ${module}`);
    lin.adapters.push(layer);
    linears.set(module, lin);
  }
  try {
    return new LoraAdapter(name, config, layers, linears, replacements, model);
  } catch (e) {
    for (const [module, layer] of layers) {
      const lin = linears.get(module);
      if (lin) lin.adapters = lin.adapters.filter((a) => a !== layer);
    }
    throw e;
  }
}

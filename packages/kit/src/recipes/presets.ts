// Recipe configurations: one default per recipe, the seed systems' cards (as issue-stated
// hyperparameters), and presets as overrides of it: `seed` (none) and `tiny` (the same stage structure
// sized for a CPU and the embedded tiny model, in minutes); the repro tables' sizes (repro/config.ts)
// are overrides of the same defaults. Every field is settable from the CLI (--set path=value) and a config file (--config FILE);
// the effective configuration is written to the run's config.json.
import type { ScheduleKind } from "../trainer/trainer.js";
import type { FailureMode } from "./diagnose.js";
import { readFileSync } from "node:fs";
import { RecipeError, UsageError } from "../errors.js";

export interface LoraSettings {
  r: number;
  alpha: number;
  dropout?: number;
  targetModules?: string | string[];
  useRslora?: boolean;
}

export interface StageTrainSettings {
  lr: number;
  /** Per-device micro-batch. */
  microBatchSize: number;
  gradAccum: number;
  maxLength: number;
  epochs: number;
  /** Overrides epochs when set (null: run the epochs). */
  maxSteps: number | null;
  schedule: ScheduleKind;
  warmupRatio: number;
  weightDecay: number;
  maxGradNorm: number;
  checkpointEvery: number;
  /** Evaluate (SFT: the held-out loss) every N steps; 0 = only at the end of the stage. */
  evalEvery: number;
  /**
   * Rows sent through the output head at a time: no more than `headChunkRows × V` logits exist
   * in a step (null: about 4 Mi logits per chunk).
   */
  headChunkRows: number | null;
  /** Recompute each decoder layer's activations in the backward instead of keeping them. */
  checkpointLayers: boolean;
}

/** Storage of the frozen base weights under the adapter: bf16 halves the base's memory. */
export type BaseDtype = "f32" | "bf16";

/** The forward settings of a stage as the objectives take them. */
export function stageForward(s: StageTrainSettings & { gradientCheckpointing?: boolean }) {
  if (s.headChunkRows !== null && !(Number.isInteger(s.headChunkRows) && s.headChunkRows >= 1))
    throw new RecipeError(`headChunkRows must be a positive integer or null, got ${s.headChunkRows}`);
  return {
    maxLength: s.maxLength,
    headChunkRows: s.headChunkRows ?? undefined,
    checkpointLayers: s.checkpointLayers || s.gradientCheckpointing === true,
  };
}

export function checkBaseDtype(dtype: string): BaseDtype {
  if (dtype !== "f32" && dtype !== "bf16") throw new RecipeError(`baseDtype must be "f32" or "bf16", got "${dtype}"`);
  return dtype;
}

export interface DpoStageSettings extends StageTrainSettings {
  beta: number;
}

export interface RolloutSettings {
  temperature: number;
  maxTokens: number;
  maxTurns: number;
}

export interface TurnPairSettings {
  modes: FailureMode[];
  studentEpisodes: number;
  pairsPerMode: number;
  variantsPerTurn: number;
}

export interface ArpConfig {
  recipe: "arp";
  seed: number;
  lora: LoraSettings;
  /** The success-only SFT corpus. */
  data: { capPerGame: number; holdoutFraction: number; sourceEpisodes: number };
  /** `gradientCheckpointing` is the seed card's name for `checkpointLayers` on this stage (either turns it on). */
  sft: StageTrainSettings & { gradientCheckpointing: boolean };
  /**
   * A2: SFT on the `weakestGames` games the base plays worst (mean score over `probeEpisodes` greedy
   * episodes per game on training instances), up to `capPerGame` of their successful episodes.
   */
  targetedSft: StageTrainSettings & { weakestGames: number; probeEpisodes: number; capPerGame: number };
  /**
   * B1: turn-local DPO on these failure modes. With a game corruption (Wordle) the pairs are synthetic:
   * up to `pairsPerMode` per mode, `variantsPerTurn` corruptions of each good turn; otherwise the
   * failures of `studentEpisodes` episodes of the current policy.
   */
  turnDpo1: DpoStageSettings & TurnPairSettings;
  /** B2: the same on the other modes, from the B1 policy. */
  turnDpo2: DpoStageSettings & TurnPairSettings;
  /** C: branch DPO from the current (B2) policy: fork at a turn, K continuations, pair by downstream score. */
  branchDpo: DpoStageSettings & { k: number; forks: number; minMargin: number };
  /** Training-free delta scale s of the final merge. */
  scale: number;
  mergeDtype: "f32" | "bf16";
  /** How the base model is loaded for training (default f32). */
  baseDtype: BaseDtype;
  rollout: RolloutSettings;
  /** Held-out evaluation instances (seeds disjoint from training's), greedy. */
  eval: { episodes: number; baseSeed: number };
  maxChars: number;
}

const SEED_LORA: LoraSettings = { r: 16, alpha: 32, dropout: 0.05, targetModules: "all-linear", useRslora: false };

/** Shared by the seed ARP stages: cosine, warmup 0.03, one epoch. */
const SEED_SCHEDULE = {
  schedule: "cosine" as const,
  warmupRatio: 0.03,
  epochs: 1,
  maxSteps: null,
  weightDecay: 0,
  maxGradNorm: 1,
  evalEvery: 0,
  headChunkRows: null,
  checkpointLayers: false,
};

const SEED_DPO = {
  ...SEED_SCHEDULE,
  lr: 5e-6,
  beta: 0.1,
  microBatchSize: 1,
  gradAccum: 16,
  maxLength: 1024,
  checkpointEvery: 50,
};

/** ARP's default: the seed cards' configuration (seeds 002/003). Every other ARP preset is overrides of it. */
const ARP_DEFAULT: ArpConfig = {
  recipe: "arp",
  seed: 42,
  lora: { ...SEED_LORA },
  data: { capPerGame: 700, holdoutFraction: 0.05, sourceEpisodes: 700 },
  sft: {
    ...SEED_SCHEDULE,
    lr: 2e-4,
    microBatchSize: 8,
    gradAccum: 4,
    maxLength: 2048,
    gradientCheckpointing: true,
    checkpointEvery: 50,
  },
  targetedSft: {
    ...SEED_SCHEDULE,
    lr: 2e-4,
    microBatchSize: 8,
    gradAccum: 4,
    maxLength: 2048,
    checkpointEvery: 50,
    weakestGames: 3,
    probeEpisodes: 20,
    capPerGame: 700,
  },
  // ~3.8k synthetic pairs over B1 and B2: four modes × 950.
  turnDpo1: { ...SEED_DPO, modes: ["repeat", "length"], studentEpisodes: 200, pairsPerMode: 950, variantsPerTurn: 2 },
  turnDpo2: {
    ...SEED_DPO,
    modes: ["invalid", "duplicate_field"],
    studentEpisodes: 200,
    pairsPerMode: 950,
    variantsPerTurn: 2,
  },
  branchDpo: { ...SEED_DPO, beta: 0.2, k: 4, forks: 100, minMargin: 0.05 },
  scale: 0.85,
  mergeDtype: "f32",
  baseDtype: "f32",
  rollout: { temperature: 1, maxTokens: 256, maxTurns: 8 },
  eval: { episodes: 100, baseSeed: 100_000 },
  maxChars: 400,
};

/** The tiny preset's DPO stages: the same structure, sized for a CPU and the embedded tiny model. */
const TINY_DPO: ConfigOverrides<DpoStageSettings> = {
  warmupRatio: 0.1,
  epochs: 2,
  lr: 2e-3,
  microBatchSize: 2,
  gradAccum: 1,
  maxLength: 512,
  checkpointEvery: 4,
};

const ARP_PRESETS: Record<string, Preset<ArpConfig>> = {
  seed: { about: "the seed cards' configuration (seeds 002/003)", overrides: {} },
  tiny: {
    about: "the seed's stages sized for a CPU and the embedded tiny model (minutes)",
    overrides: {
      lora: { r: 8, alpha: 16 },
      data: { capPerGame: 16, holdoutFraction: 0.1, sourceEpisodes: 12 },
      sft: { ...TINY_DPO, lr: 5e-3, gradAccum: 2, gradientCheckpointing: false },
      targetedSft: { ...TINY_DPO, lr: 5e-3, epochs: 1, weakestGames: 2, probeEpisodes: 1, capPerGame: 8 },
      turnDpo1: { ...TINY_DPO, studentEpisodes: 3, pairsPerMode: 8, variantsPerTurn: 1 },
      turnDpo2: { ...TINY_DPO, studentEpisodes: 3, pairsPerMode: 8, variantsPerTurn: 1 },
      branchDpo: { ...TINY_DPO, k: 3, forks: 2 },
      rollout: { maxTokens: 32, maxTurns: 3 },
      eval: { episodes: 4 },
      maxChars: 120,
    },
  },
};

export function arpSeedConfig(): ArpConfig {
  return presetConfig("arp", "seed");
}

export function arpTinyConfig(): ArpConfig {
  return presetConfig("arp", "tiny");
}

export interface OpdConfig {
  recipe: "opd";
  seed: number;
  /** Fresh LoRA per round on the merged previous round. */
  lora: LoraSettings;
  /** How the base model is loaded for training (default f32). */
  baseDtype: BaseDtype;
  rounds: number;
  episodesPerRound: number;
  /** Seeded wall-state starts per archetype and round (questworld). */
  wallStarts: boolean;
  /**
   * Train on one packed sample per episode (packEpisodeTurns: every turn's tokens scored in one pass
   * over the episode) instead of one sample per turn. The per-token loss is the same; steps hold
   * micro-batches of episodes instead of turns.
   */
  packTurns: boolean;
  train: StageTrainSettings;
  objective: {
    clamp: number;
    earlyTurnWeight: number;
    earlyTurns: number;
    objective: "ppo" | "importance_sampling" | "cispo";
    clipLow: number;
    clipHigh: number;
    /**
     * "sampled": the seed's per-token advantage on the sampled token. "reverse_kl" / "forward_kl":
     * fit the teacher's top-`teacherTopK` distribution at every position (GKD λ = 1, docs/NUMERICS.md §3.3).
     */
    divergence: "sampled" | "reverse_kl" | "forward_kl";
    teacherTopK: number;
  };
  /** Merge scale of each round's adapter. */
  scale: number;
  rollout: RolloutSettings;
  /** Core-3 seeds of the evaluation (≥ 3 for an SE). */
  eval: { seeds: number[] };
}

/** OPD's default: the seed card's configuration (seed 000). */
const OPD_DEFAULT: OpdConfig = {
  recipe: "opd",
  seed: 42,
  lora: { r: 64, alpha: 64, dropout: 0, targetModules: "all-linear", useRslora: false },
  baseDtype: "f32",
  rounds: 2,
  episodesPerRound: 64,
  wallStarts: true,
  packTurns: false,
  train: {
    lr: 1e-4,
    microBatchSize: 4,
    gradAccum: 4,
    maxLength: 4096,
    epochs: 1,
    maxSteps: null,
    schedule: "constant",
    warmupRatio: 0,
    weightDecay: 0,
    maxGradNorm: 1,
    checkpointEvery: 50,
    evalEvery: 0,
    headChunkRows: null,
    checkpointLayers: false,
  },
  objective: {
    clamp: 3,
    earlyTurnWeight: 1.5,
    earlyTurns: 1,
    objective: "ppo",
    clipLow: 0.2,
    clipHigh: 0.2,
    divergence: "sampled",
    teacherTopK: 20,
  },
  scale: 1,
  rollout: { temperature: 1, maxTokens: 256, maxTurns: 30 },
  eval: { seeds: [1, 2, 3] },
};

const OPD_PRESETS: Record<string, Preset<OpdConfig>> = {
  seed: { about: "the seed card's configuration (seed 000)", overrides: {} },
  tiny: {
    about: "the seed's rounds sized for a CPU and the embedded tiny model (minutes)",
    overrides: {
      lora: { r: 8, alpha: 8 },
      episodesPerRound: 2,
      train: { lr: 1e-3, microBatchSize: 2, gradAccum: 2, maxLength: 1024, checkpointEvery: 4 },
      rollout: { maxTokens: 24, maxTurns: 3 },
    },
  },
};

export function opdSeedConfig(): OpdConfig {
  return presetConfig("opd", "seed");
}

export function opdTinyConfig(): OpdConfig {
  return presetConfig("opd", "tiny");
}

export interface OelConfig {
  recipe: "oel";
  seed: number;
  lora: LoraSettings;
  /** How the base model is loaded for training (default f32). */
  baseDtype: BaseDtype;
  tasks: number;
  train: StageTrainSettings;
  divergence: "forward_kl" | "reverse_kl" | "jsd";
  scale: number;
  rollout: RolloutSettings;
  /** Evaluation: greedy (temperature 0), `trials` trials of the same task (same secret). */
  eval: { trials: number; temperature: number };
}

/** OEL's default: the seed card's configuration (seed 004). */
const OEL_DEFAULT: OelConfig = {
  recipe: "oel",
  seed: 42,
  lora: { r: 16, alpha: 32, dropout: 0, targetModules: "all-linear", useRslora: false },
  baseDtype: "f32",
  tasks: 20,
  train: {
    // The top of the authors' LoRA range (kiln's earlier 5e-4 was 10× their upper bound); kiln trains
    // the same LoRA update in f32 where the seed trains bf16, and Adam's step does not scale with the
    // gradient, so the lr carries over unchanged.
    lr: 5e-5,
    microBatchSize: 4,
    gradAccum: 1,
    maxLength: 4096,
    epochs: 1,
    maxSteps: null,
    schedule: "cosine",
    warmupRatio: 0.03,
    weightDecay: 0,
    maxGradNorm: 1,
    checkpointEvery: 50,
    evalEvery: 0,
    headChunkRows: null,
    checkpointLayers: false,
  },
  divergence: "forward_kl",
  scale: 1,
  rollout: { temperature: 1, maxTokens: 256, maxTurns: 10 },
  eval: { trials: 3, temperature: 0 },
};

const OEL_PRESETS: Record<string, Preset<OelConfig>> = {
  seed: { about: "the seed card's configuration (seed 004)", overrides: {} },
  tiny: {
    about: "the seed's stages sized for a CPU and the embedded tiny model (minutes)",
    overrides: {
      lora: { r: 8, alpha: 16 },
      tasks: 3,
      train: { lr: 2e-3, microBatchSize: 2, maxLength: 1024, epochs: 2, checkpointEvery: 4 },
      rollout: { maxTokens: 24, maxTurns: 3 },
      eval: { trials: 2 },
    },
  },
};

export function oelSeedConfig(): OelConfig {
  return presetConfig("oel", "seed");
}

export function oelTinyConfig(): OelConfig {
  return presetConfig("oel", "tiny");
}

/** Kiln's reason for a default value the seed card does not give, or gives differently. */
const NOT_STATED = "kiln's default: the seed card does not state it";
const F32_BASE =
  "kiln: the frozen base in f32 (the seeds load bf16); kiln's kernels compute in f32, --set baseDtype=bf16 stores it in bf16";
const RUN_SEED = "kiln: the run's seed (--seed)";
const IO_ONLY = "kiln: checkpoint / evaluation cadence and memory layout, no effect on the numbers";

/**
 * Where each recipe's default values come from: its seed card, except the fields listed (path patterns:
 * `*` within a part, a section covers its fields; first match wins) with kiln's reason; `cardNotes`
 * annotate values that are the card's (checked first). The cards are
 * as kiln's issue tracker states them: ARP seeds 002/003, OPD seed 000, OEL seed 004.
 */
export const DEFAULT_SOURCES: Record<
  "arp" | "opd" | "oel",
  { card: string; notFromCard: [string, string][]; cardNotes?: [string, string][] }
> = {
  arp: {
    card: "seeds 002/003",
    notFromCard: [
      ["seed", RUN_SEED],
      ["baseDtype", F32_BASE],
      ["data.sourceEpisodes", NOT_STATED],
      ["turnDpo*.studentEpisodes", NOT_STATED],
      ["branchDpo.k", NOT_STATED],
      ["branchDpo.forks", NOT_STATED],
      ["branchDpo.minMargin", "kiln: pairs must differ in downstream score (the seed card states no margin)"],
      ["targetedSft.*", "kiln's default: seed 002 names the stage (SFT on the weak games), not its sizes"],
      ["turnDpo*.pairsPerMode", "kiln: the seed's ~3.8k synthetic pairs split evenly over the four failure modes"],
      ["turnDpo*.variantsPerTurn", NOT_STATED],
      ["*.weightDecay", "kiln's default: the seed card does not state it (transformers' default 0)"],
      ["*.maxGradNorm", "kiln's default: the seed card does not state it (transformers' default 1)"],
      ["*.checkpointEvery", IO_ONLY],
      ["*.evalEvery", IO_ONLY],
      ["*.headChunkRows", IO_ONLY],
      ["*.checkpointLayers", IO_ONLY],
      ["rollout", NOT_STATED],
      ["eval.episodes", NOT_STATED],
    ],
  },
  opd: {
    card: "seed 000",
    notFromCard: [
      ["seed", RUN_SEED],
      ["baseDtype", F32_BASE],
      ["rounds", NOT_STATED],
      ["episodesPerRound", NOT_STATED],
      ["packTurns", "kiln: one sample per turn as the seed; packing an episode into one sample is kiln's option"],
      ["train.lr", NOT_STATED],
      ["train.microBatchSize", NOT_STATED],
      ["train.gradAccum", NOT_STATED],
      ["train.schedule", NOT_STATED],
      ["train.checkpointEvery", IO_ONLY],
      ["train.evalEvery", IO_ONLY],
      ["train.headChunkRows", IO_ONLY],
      ["train.checkpointLayers", IO_ONLY],
      [
        "objective.teacherTopK",
        "kiln: the teacher's top-k of the reverse/forward-KL variants (the seed's objective is sampled-token)",
      ],
      ["rollout", NOT_STATED],
    ],
  },
  oel: {
    card: "seed 004",
    cardNotes: [
      [
        "train.lr",
        "the top of the authors' LoRA range (Adam's step does not scale with the gradient, so it carries over to kiln's f32 LoRA)",
      ],
    ],
    notFromCard: [
      ["seed", RUN_SEED],
      ["baseDtype", F32_BASE],
      ["tasks", NOT_STATED],
      ["lora", NOT_STATED],
      ["train", NOT_STATED],
      ["rollout", NOT_STATED],
    ],
  },
};

export type RecipeConfig = ArpConfig | OpdConfig | OelConfig;
export type RecipeName = RecipeConfig["recipe"];
/** The configuration type of recipe R. */
export type RecipeConfigOf<R extends RecipeName> = Extract<RecipeConfig, { recipe: R }>;

/**
 * What a preset changes in its recipe's default, as a partial copy of the configuration: sections
 * merge field by field, values and arrays replace the default's whole.
 */
export type ConfigOverrides<T> = T extends readonly unknown[]
  ? T
  : T extends object
    ? { [K in keyof T]?: ConfigOverrides<T[K]> }
    : T;

/** A named configuration: its recipe's default with `overrides` merged on. */
export interface Preset<C> {
  /** What the preset is for, in a line. */
  about: string;
  overrides: ConfigOverrides<C>;
  /** Why particular overrides (path patterns as in DEFAULT_SOURCES) take their value; the others: `about`. */
  why?: [string, string][];
}

const isSection = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === "object" && !Array.isArray(v);

function mergeOverrides(target: Record<string, unknown>, overrides: Record<string, unknown>, prefix: string): void {
  for (const [key, value] of Object.entries(overrides)) {
    if (value === undefined) continue;
    const path = prefix ? `${prefix}.${key}` : key;
    if (!(key in target)) throw new RecipeError(`override "${path}": the configuration has no such field`);
    if (isSection(target[key]) !== isSection(value))
      throw new RecipeError(
        `override "${path}": ${isSection(value) ? "a section for a value" : "a value for a section"}`,
      );
    if (isSection(value)) mergeOverrides(target[key] as Record<string, unknown>, value, path);
    else target[key] = structuredClone(value);
  }
}

/**
 * A fresh configuration: `defaults` (never modified) with each of `overrides` merged on in order. An
 * override naming a field the configuration lacks is a RecipeError, so a misspelt one cannot be ignored.
 */
export function resolveConfig<C extends object>(defaults: C, ...overrides: readonly NoInfer<ConfigOverrides<C>>[]): C {
  const config = structuredClone(defaults);
  for (const o of overrides) mergeOverrides(config as Record<string, unknown>, o as Record<string, unknown>, "");
  return config;
}

/** Each recipe's default configuration (the seed cards') and its presets. */
export const RECIPE_PRESETS: {
  [R in RecipeName]: {
    defaults: RecipeConfigOf<R>;
    presets: Record<string, Preset<RecipeConfigOf<R>>>;
  };
} = {
  arp: { defaults: ARP_DEFAULT, presets: ARP_PRESETS },
  opd: { defaults: OPD_DEFAULT, presets: OPD_PRESETS },
  oel: { defaults: OEL_DEFAULT, presets: OEL_PRESETS },
};

/** The recipe's default with further overrides merged on (the repro tables' sizes are built this way). */
export function recipeConfig<R extends RecipeName>(
  recipe: R,
  ...overrides: readonly NoInfer<ConfigOverrides<RecipeConfigOf<R>>>[]
): RecipeConfigOf<R> {
  return resolveConfig(RECIPE_PRESETS[recipe].defaults as RecipeConfigOf<R>, ...overrides);
}

export function presetConfig<R extends RecipeName>(recipe: R, preset: string): RecipeConfigOf<R> {
  const { presets } = RECIPE_PRESETS[recipe];
  const found = Object.hasOwn(presets, preset) ? presets[preset] : undefined;
  if (!found) throw new RecipeError(`unknown preset "${preset}" for ${recipe} (${Object.keys(presets).join(" | ")})`);
  return recipeConfig(recipe, found.overrides);
}

/** Set `path` ("sft.lr", "turnDpo1.modes") in a config to `raw` parsed as the existing value's type. */
export function setConfigValue(config: object, path: string, raw: string): void {
  const keys = path.split(".");
  let node = config as Record<string, unknown>;
  for (const k of keys.slice(0, -1)) {
    const next = node[k];
    if (next === null || typeof next !== "object" || Array.isArray(next))
      throw new RecipeError(`config has no section "${path.slice(0, path.indexOf(k) + k.length)}"`);
    node = next as Record<string, unknown>;
  }
  const last = keys[keys.length - 1];
  if (!(last in node)) throw new RecipeError(`config has no field "${path}"`);
  const current = node[last];
  if (current === null) {
    // An optional number left unset (e.g. maxSteps): a number, or "null" to unset it again.
    if (raw === "null") node[last] = null;
    else {
      const n = Number(raw);
      if (raw.trim() === "" || !Number.isFinite(n))
        throw new RecipeError(`${path} needs a number or null, got "${raw}"`);
      node[last] = n;
    }
  } else if (typeof current === "number") {
    const n = Number(raw);
    if (raw.trim() === "" || !Number.isFinite(n)) throw new RecipeError(`${path} needs a number, got "${raw}"`);
    node[last] = n;
  } else if (typeof current === "boolean") {
    if (raw !== "true" && raw !== "false") throw new RecipeError(`${path} needs true or false, got "${raw}"`);
    node[last] = raw === "true";
  } else if (Array.isArray(current)) {
    const parts = raw.split(",").filter((x) => x !== "");
    node[last] = typeof current[0] === "number" ? parts.map(Number) : parts;
  } else node[last] = raw;
}

/** Overlay a config file's values (nested JSON) onto a preset, with the same type checks as --set. */
export function applyConfigObject(config: object, overlay: Record<string, unknown>, prefix = ""): void {
  for (const [k, v] of Object.entries(overlay)) {
    const path = prefix ? `${prefix}.${k}` : k;
    if (v !== null && typeof v === "object" && !Array.isArray(v))
      applyConfigObject(config, v as Record<string, unknown>, path);
    else setConfigValue(config, path, Array.isArray(v) ? v.join(",") : String(v));
  }
}

/**
 * What a user layered over a preset, in order: `--config FILE` (a JSON overlay), then each `--set path=value`.
 * The first field that cannot be applied is a UsageError naming the flag it came from.
 */
export function overlayUserConfig(
  config: object,
  file: string | undefined,
  assignments: readonly (readonly [string, string])[],
): void {
  if (file) {
    let overlay: unknown;
    try {
      overlay = JSON.parse(readFileSync(file, "utf8"));
    } catch (e) {
      throw new UsageError(`--config ${file}: ${(e as Error).message}`);
    }
    try {
      applyConfigObject(config, overlay as Record<string, unknown>);
    } catch (e) {
      throw new UsageError(`--config ${file}: ${(e as Error).message}`);
    }
  }
  for (const [path, value] of assignments)
    try {
      setConfigValue(config, path, value);
    } catch (e) {
      throw new UsageError(`--set ${path}=${value}: ${(e as Error).message}`);
    }
}

// Recipe configurations: `seed` (the seed systems' cards, as issue-stated hyperparameters) and
// `tiny` (the same stage structure sized for a CPU and the embedded tiny model, in minutes).
// Every field is settable from the CLI (--set path=value) and a config file (--config FILE);
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

export interface ArpConfig {
  recipe: "arp";
  seed: number;
  lora: LoraSettings;
  /** The success-only SFT corpus. */
  data: { capPerGame: number; holdoutFraction: number; sourceEpisodes: number };
  /** `gradientCheckpointing` is the seed card's name for `checkpointLayers` on this stage (either turns it on). */
  sft: StageTrainSettings & { gradientCheckpointing: boolean };
  /** B1: turn-local DPO on these failure modes. */
  turnDpo1: DpoStageSettings & { modes: FailureMode[]; studentEpisodes: number };
  /** B2: the same on the other modes, from the B1 policy. */
  turnDpo2: DpoStageSettings & { modes: FailureMode[]; studentEpisodes: number };
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

export function arpSeedConfig(): ArpConfig {
  return {
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
    turnDpo1: { ...SEED_DPO, modes: ["repeat", "length"], studentEpisodes: 200 },
    turnDpo2: { ...SEED_DPO, modes: ["invalid", "duplicate_field"], studentEpisodes: 200 },
    branchDpo: { ...SEED_DPO, beta: 0.2, k: 4, forks: 100, minMargin: 0 },
    scale: 0.85,
    mergeDtype: "f32",
    baseDtype: "f32",
    rollout: { temperature: 1, maxTokens: 256, maxTurns: 8 },
    eval: { episodes: 100, baseSeed: 100_000 },
    maxChars: 400,
  };
}

export function arpTinyConfig(): ArpConfig {
  const dpo = {
    schedule: "cosine" as const,
    warmupRatio: 0.1,
    epochs: 2,
    maxSteps: null,
    weightDecay: 0,
    maxGradNorm: 1,
    evalEvery: 0,
    lr: 2e-3,
    beta: 0.1,
    microBatchSize: 2,
    gradAccum: 1,
    maxLength: 512,
    checkpointEvery: 4,
    headChunkRows: null,
    checkpointLayers: false,
  };
  return {
    recipe: "arp",
    seed: 42,
    lora: { r: 8, alpha: 16, dropout: 0.05, targetModules: "all-linear", useRslora: false },
    data: { capPerGame: 16, holdoutFraction: 0.1, sourceEpisodes: 12 },
    sft: {
      ...dpo,
      lr: 5e-3,
      epochs: 2,
      microBatchSize: 2,
      gradAccum: 2,
      gradientCheckpointing: false,
    },
    turnDpo1: { ...dpo, modes: ["repeat", "length"], studentEpisodes: 3 },
    turnDpo2: { ...dpo, modes: ["invalid", "duplicate_field"], studentEpisodes: 3 },
    branchDpo: { ...dpo, beta: 0.2, k: 3, forks: 2, minMargin: 0 },
    scale: 0.85,
    mergeDtype: "f32",
    baseDtype: "f32",
    rollout: { temperature: 1, maxTokens: 32, maxTurns: 3 },
    eval: { episodes: 4, baseSeed: 100_000 },
    maxChars: 120,
  };
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

export function opdSeedConfig(): OpdConfig {
  return {
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
}

export function opdTinyConfig(): OpdConfig {
  const c = opdSeedConfig();
  return {
    ...c,
    lora: { r: 8, alpha: 8, dropout: 0, targetModules: "all-linear", useRslora: false },
    episodesPerRound: 2,
    train: { ...c.train, lr: 1e-3, microBatchSize: 2, gradAccum: 2, maxLength: 1024, checkpointEvery: 4 },
    rollout: { temperature: 1, maxTokens: 24, maxTurns: 3 },
    eval: { seeds: [1, 2, 3] },
  };
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

export function oelSeedConfig(): OelConfig {
  return {
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
}

export function oelTinyConfig(): OelConfig {
  const c = oelSeedConfig();
  return {
    ...c,
    lora: { r: 8, alpha: 16, dropout: 0, targetModules: "all-linear", useRslora: false },
    tasks: 3,
    train: { ...c.train, lr: 2e-3, microBatchSize: 2, maxLength: 1024, epochs: 2, checkpointEvery: 4 },
    rollout: { temperature: 1, maxTokens: 24, maxTurns: 3 },
    eval: { trials: 2, temperature: 0 },
  };
}

/**
 * Fields of each seed preset that the seed cards (as kiln's issue tracker states them) do not give:
 * kiln's own defaults, listed so `--preset seed --print-config` does not pass them off as the seed's.
 */
export const UNSTATED_SEED_FIELDS: Record<"arp" | "opd" | "oel", string[]> = {
  arp: [
    "data.sourceEpisodes",
    "turnDpo*.studentEpisodes",
    "branchDpo.k",
    "branchDpo.forks",
    "weightDecay (transformers default 0)",
    "maxGradNorm (transformers default 1)",
    "rollout.*",
    "eval.episodes",
  ],
  opd: [
    "rounds",
    "episodesPerRound",
    "train.lr",
    "train.microBatchSize",
    "train.gradAccum",
    "train.schedule",
    "rollout.*",
  ],
  oel: ["tasks", "lora.*", "train.* (but lr)", "rollout.*"],
};

export type RecipeConfig = ArpConfig | OpdConfig | OelConfig;

export function presetConfig(recipe: "arp" | "opd" | "oel", preset: string): RecipeConfig {
  const table = {
    arp: { seed: arpSeedConfig, tiny: arpTinyConfig },
    opd: { seed: opdSeedConfig, tiny: opdTinyConfig },
    oel: { seed: oelSeedConfig, tiny: oelTinyConfig },
  }[recipe];
  const make = (table as Record<string, () => RecipeConfig>)[preset];
  if (!make) throw new RecipeError(`unknown preset "${preset}" for ${recipe} (seed | tiny)`);
  return make();
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

// `kiln agent-model --set key=value`: the model's size, its training rows and the corpus's sizes, so that every build the kit
// README reports (other sizes, drills, generated instances) is one command. Unknown keys and values out
// of range are refused before anything is built.
import { UsageError } from "../errors.js";
import { AGENT_MODEL_MAX_POSITIONS, type AgentModelSize } from "./build.js";
import { AGENT_CLEM_GAMES } from "./clem-players.js";
import { SYNTHETIC_CLEM_GAMES } from "./clem-synthetic.js";
import { AGENT_MODEL_CORPUS } from "./extras.js";

export interface AgentModelSettings {
  size: Partial<AgentModelSize>;
  corpus: Partial<typeof AGENT_MODEL_CORPUS>;
  /** The documents `buildAgentModel` makes itself (guess-number episodes, training stories). */
  build: { guessNumberEpisodes?: number; stories?: number };
  /** Training rows (`train.maxLength` tokens per packed row, `train.batchSize` rows per step; default 768 × 5). */
  train: { maxLength?: number; batchSize?: number };
}

const BUILD_KEYS = ["guessNumberEpisodes", "stories"] as const;
const TRAIN_KEYS = ["maxLength", "batchSize"] as const;

type Kind = "count" | "positive" | "share";

const SIZE_KEYS: readonly (keyof AgentModelSize)[] = ["hiddenSize", "layers", "heads", "kvHeads", "vocabSize"];
const CORPUS_KEYS: Readonly<Record<string, Kind>> = {
  questworldEpisodes: "count",
  questworldTurnRate: "share",
  spellingDrills: "count",
  copyDrills: "count",
  tau2Episodes: "count",
  tau2TurnRate: "share",
  wordleConstraintRate: "share",
};

/** Every key `--set` accepts, for help and error messages. */
export function agentModelSettingKeys(): string[] {
  return [
    ...SIZE_KEYS.map((k) => `size.${k}`),
    ...TRAIN_KEYS.map((k) => `train.${k}`),
    ...BUILD_KEYS.map((k) => `corpus.${k}`),
    ...Object.keys(CORPUS_KEYS).map((k) => `corpus.${k}`),
    ...Object.entries(PER_GAME_KEYS).flatMap(([name, t]) => t.games.map((g) => `corpus.${name}.${g}`)),
  ];
}

function parseValue(key: string, raw: string, kind: Kind): number {
  const v = Number(raw);
  const ok =
    raw.trim() !== "" &&
    Number.isFinite(v) &&
    (kind === "share" ? v >= 0 && v <= 1 : Number.isInteger(v) && (kind === "count" ? v >= 0 : v >= 1));
  if (!ok) {
    const wanted = kind === "share" ? "a number from 0 to 1" : kind === "count" ? "an integer ≥ 0" : "an integer ≥ 1";
    throw new UsageError(`--set ${key} must be ${wanted}, got "${raw}"`);
  }
  return v;
}

/** Per-game corpus keys (`corpus.<name>.<game>`): the games each takes and the kind of its values. */
const PER_GAME_KEYS = {
  clemEpisodes: { games: AGENT_CLEM_GAMES as readonly string[], kind: "count" },
  clemGenerated: { games: SYNTHETIC_CLEM_GAMES as readonly string[], kind: "share" },
} as const;

/** `[key, value]` pairs (from `setAssignments`) → size and corpus overrides, checked. */
export function agentModelSettings(assignments: readonly (readonly [string, string])[]): AgentModelSettings {
  const size: Partial<AgentModelSize> = {};
  const corpus: Partial<typeof AGENT_MODEL_CORPUS> = {};
  const build: AgentModelSettings["build"] = {};
  const train: AgentModelSettings["train"] = {};
  const perGame: Partial<Record<keyof typeof PER_GAME_KEYS, Record<string, number>>> = {};
  for (const [key, raw] of assignments) {
    const [head, name, game, ...rest] = key.split(".");
    const table =
      head === "corpus" && rest.length === 0 ? PER_GAME_KEYS[name as keyof typeof PER_GAME_KEYS] : undefined;
    if (head === "size" && game === undefined && (SIZE_KEYS as readonly string[]).includes(name)) {
      size[name as keyof AgentModelSize] = parseValue(key, raw, "positive");
    } else if (head === "train" && game === undefined && (TRAIN_KEYS as readonly string[]).includes(name)) {
      const v = parseValue(key, raw, "positive");
      if (name === "maxLength" && (v < 2 || v > AGENT_MODEL_MAX_POSITIONS))
        throw new UsageError(
          `--set train.maxLength must be from 2 to ${AGENT_MODEL_MAX_POSITIONS} (the model's max_position_embeddings), got "${raw}"`,
        );
      train[name as (typeof TRAIN_KEYS)[number]] = v;
    } else if (head === "corpus" && game === undefined && (BUILD_KEYS as readonly string[]).includes(name)) {
      build[name as (typeof BUILD_KEYS)[number]] = parseValue(key, raw, "count");
    } else if (head === "corpus" && game === undefined && name in CORPUS_KEYS) {
      (corpus as Record<string, number>)[name] = parseValue(key, raw, CORPUS_KEYS[name]);
    } else if (table && game !== undefined && table.games.includes(game)) {
      const field = name as keyof typeof PER_GAME_KEYS;
      perGame[field] ??= { ...AGENT_MODEL_CORPUS[field] };
      perGame[field][game] = parseValue(key, raw, table.kind);
    } else {
      throw new UsageError(`--set: unknown key "${key}"; the keys are ${agentModelSettingKeys().join(", ")}`);
    }
  }
  return { size, corpus: { ...corpus, ...perGame }, build, train };
}

/** The size's constraints (heads divide the width, kv heads divide the heads), as a usage error. */
export function checkAgentModelSize(size: AgentModelSize): void {
  if (size.hiddenSize % size.heads !== 0)
    throw new UsageError(`size.hiddenSize (${size.hiddenSize}) must be a multiple of size.heads (${size.heads})`);
  if (size.heads % size.kvHeads !== 0)
    throw new UsageError(`size.heads (${size.heads}) must be a multiple of size.kvHeads (${size.kvHeads})`);
  if ((size.hiddenSize / size.heads) % 2 !== 0)
    throw new UsageError(
      `size.hiddenSize / size.heads (${size.hiddenSize / size.heads}) must be even: rotary embeddings rotate pairs`,
    );
}

/** `--copy-warmup` against `--steps` and the corpus it trains on, as a usage error. */
export function checkCopyWarmup(copyWarmup: number, steps: number, corpus: AgentModelSettings["corpus"]): void {
  if (copyWarmup >= steps)
    throw new UsageError(
      `--copy-warmup (${copyWarmup}) must be below --steps (${steps}); --copy-warmup 0 trains on the whole corpus from the first step`,
    );
  if (copyWarmup > 0 && corpus.copyDrills === 0)
    throw new UsageError(`--copy-warmup ${copyWarmup} trains on the copy drills, but corpus.copyDrills=0 leaves none`);
}

// Every field of a recipe (or repro) configuration checked before a run directory exists: a value the
// trainer or a stage would refuse later (`--set sft.lr=-1`) is refused while nothing has been written,
// naming its path. The rules go by field name, so the same rule holds in every stage and recipe.
import { RecipeError } from "../errors.js";

type Rule = (v: unknown) => string | undefined;

const isNumber = (v: unknown): v is number => typeof v === "number";
const positiveInteger: Rule = (v) =>
  isNumber(v) && Number.isInteger(v) && v >= 1 ? undefined : "must be a positive integer";
const nonNegativeInteger: Rule = (v) =>
  isNumber(v) && Number.isInteger(v) && v >= 0 ? undefined : "must be an integer ≥ 0";
const nonNegative: Rule = (v) => (isNumber(v) && v >= 0 && Number.isFinite(v) ? undefined : "must be a number ≥ 0");
const positive: Rule = (v) => (isNumber(v) && v > 0 && Number.isFinite(v) ? undefined : "must be a number > 0");
const fraction: Rule = (v) => (isNumber(v) && v >= 0 && v <= 1 ? undefined : "must be in [0, 1]");
const orNull =
  (rule: Rule): Rule =>
  (v) =>
    v === null ? undefined : rule(v) && `${rule(v)} or null`;

/** Rules by the field's own name (the last part of its path). */
const RULES: Record<string, Rule> = {
  seed: (v) => (isNumber(v) && Number.isInteger(v) ? undefined : "must be an integer"),
  lr: nonNegative,
  beta: positive,
  epochs: positive,
  warmupRatio: fraction,
  weightDecay: nonNegative,
  maxGradNorm: positive,
  dropout: (v) => (isNumber(v) && v >= 0 && v < 1 ? undefined : "must be in [0, 1)"),
  holdoutFraction: (v) => (isNumber(v) && v >= 0 && v < 1 ? undefined : "must be in [0, 1)"),
  r: positiveInteger,
  alpha: positive,
  microBatchSize: positiveInteger,
  gradAccum: positiveInteger,
  maxLength: positiveInteger,
  maxSteps: orNull(positiveInteger),
  headChunkRows: orNull(positiveInteger),
  checkpointEvery: nonNegativeInteger,
  evalEvery: nonNegativeInteger,
  maxTokens: positiveInteger,
  maxTurns: positiveInteger,
  maxChars: positiveInteger,
  temperature: nonNegative,
  episodes: positiveInteger,
  episodesPerRound: positiveInteger,
  rounds: positiveInteger,
  tasks: positiveInteger,
  trials: positiveInteger,
  k: positiveInteger,
  forks: nonNegativeInteger,
  studentEpisodes: nonNegativeInteger,
  sourceEpisodes: positiveInteger,
  capPerGame: positiveInteger,
  weakestGames: nonNegativeInteger,
  probeEpisodes: positiveInteger,
  pairsPerMode: nonNegativeInteger,
  variantsPerTurn: positiveInteger,
  teacherTopK: positiveInteger,
  earlyTurns: nonNegativeInteger,
  earlyTurnWeight: nonNegative,
  clamp: positive,
  clipLow: nonNegative,
  clipHigh: nonNegative,
  minMargin: nonNegative,
  instancesPerGame: nonNegativeInteger,
  staticInstances: nonNegativeInteger,
  scale: (v) => (isNumber(v) && Number.isFinite(v) ? undefined : "must be a finite number"),
};

/** Every problem in `config`, one line each ("sft.lr must be a number ≥ 0, got -1"). */
export function configProblems(config: unknown, prefix = ""): string[] {
  const problems: string[] = [];
  if (config === null || typeof config !== "object") return problems;
  for (const [key, value] of Object.entries(config)) {
    const path = prefix ? `${prefix}.${key}` : key;
    if (Array.isArray(value)) {
      const rule = RULES[key];
      value.forEach((item, i) => {
        if (isNumber(item) && !Number.isFinite(item)) problems.push(`${path}[${i}] must be finite, got ${item}`);
        else if (rule && isNumber(item) && rule(item)) problems.push(`${path}[${i}] ${rule(item)}, got ${item}`);
      });
    } else if (value !== null && typeof value === "object") problems.push(...configProblems(value, path));
    else {
      const rule = RULES[key];
      const problem = rule?.(value) ?? (isNumber(value) && !Number.isFinite(value) ? "must be finite" : undefined);
      if (problem) problems.push(`${path} ${problem}, got ${isNumber(value) ? String(value) : JSON.stringify(value)}`);
    }
  }
  return problems;
}

/** Throw one RecipeError listing every problem, so a user fixes them in one go. */
export function checkRecipeConfig(config: object): void {
  const problems = configProblems(config);
  if (problems.length > 0) throw new RecipeError(`invalid configuration: ${problems.join("; ")}`);
}

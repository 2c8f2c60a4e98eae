// Core-3 (questworld.md, Purpose and Archetypes): quest stages reached, summed over the
// three archetype agents (10 stages each, 30 max), averaged over seeds with a standard
// error, plus a per-stage "wall" report: how many agents passed each stage.

import { type GenerateParams, type Policy, meanSe } from "@kiln/rollout";
import { ARCHETYPES, type ArchetypeId, isArchetype } from "./archetypes.js";
import { type QuestStages, QUESTWORLD_VERSION, QuestworldEnvironment } from "./environment.js";
import { type PolicyFactory, runQuestworldEpisode } from "./episode.js";
import { QuestworldConfigError } from "./errors.js";
import { QUESTS, type QuestId, QUEST_INFO, STAGES_PER_AGENT } from "./quests.js";
import { DEFAULT_LIMITS, type EpisodeStatus, type Limits, type QuestworldState } from "./state.js";

export interface Core3Options {
  /** A policy shared by every episode, or a factory called once per episode. */
  policy: Policy | PolicyFactory;
  seeds: number[];
  /** Default: woodsman, herbalist, angler. */
  archetypes?: ArchetypeId[];
  /** Cap on assistant turns per episode (default: the tool-call budget). */
  maxTurns?: number;
  /** Budget overrides (default DEFAULT_LIMITS). */
  limits?: Partial<Limits>;
  /** Seeded starts: a state per (archetype, seed), or undefined for the archetype's own start. */
  start?: (archetype: ArchetypeId, seed: number) => QuestworldState | undefined;
  params?: GenerateParams;
  /** Episodes run at once (useful for HTTP policies; default 1). Results do not depend on it. */
  concurrency?: number;
  onProgress?: (progress: Core3Progress) => void;
}

export interface AgentScore {
  seed: number;
  archetype: ArchetypeId;
  stages: QuestStages;
  total: number;
  status: EpisodeStatus | "max_turns";
  turns: number;
  toolCalls: number;
  ticks: number;
  malformed: number;
  errors: number;
}

export interface Core3Progress {
  done: number;
  total: number;
  episode: AgentScore;
}

export interface MeanSE {
  mean: number;
  /** Standard error of the mean (sample SD / √n); null with fewer than 2 seeds. */
  se: number | null;
}

export interface WallRow {
  quest: QuestId;
  stage: number;
  /** 1-based position in the chain (1..10). */
  index: number;
  label: string;
  passed: number;
  of: number;
  /** Agents that reached the stage before this one but not this one. */
  stoppedHere: number;
}

export interface Core3Result {
  envVersion: string;
  policyId: string;
  seeds: number[];
  archetypes: ArchetypeId[];
  limits: Limits;
  /** 10 × number of archetypes (30 for Core-3 proper). */
  maxPerSeed: number;
  episodes: AgentScore[];
  perSeed: { seed: number; total: number; byArchetype: Partial<Record<ArchetypeId, number>> }[];
  /** Core-3 over seeds. */
  score: MeanSE & { min: number; max: number };
  byArchetype: Partial<Record<ArchetypeId, { total: MeanSE; perQuest: Record<QuestId, number> }>>;
  wall: WallRow[];
  /** The stage most agents stopped at (ties: the earliest); null when every agent finished. */
  wallStage: WallRow | null;
}

/**
 * Mean and standard error by rollout's `meanSe` (docs/NUMERICS.md §9). Core-3 tables print no SE below two
 * agents, so the SE is null there (rollout's is 0 for one value).
 */
export function meanSE(xs: number[]): MeanSE {
  const { n, mean, se } = meanSe(xs);
  return { mean, se: n < 2 ? null : se };
}

function isFactory(p: Policy | PolicyFactory): p is PolicyFactory {
  return typeof p === "function";
}

function checkOptions(o: Core3Options, archetypes: ArchetypeId[]): void {
  if (!Array.isArray(o.seeds) || o.seeds.length === 0)
    throw new QuestworldConfigError("seeds: must be a non-empty array");
  for (const s of o.seeds) {
    if (!Number.isSafeInteger(s)) throw new QuestworldConfigError(`seeds: ${s} must be a safe integer`);
  }
  if (new Set(o.seeds).size !== o.seeds.length) throw new QuestworldConfigError("seeds: must not repeat");
  if (archetypes.length === 0) throw new QuestworldConfigError("archetypes: must not be empty");
  for (const a of archetypes) {
    if (!isArchetype(a))
      throw new QuestworldConfigError(`archetypes: ${JSON.stringify(a)} is not woodsman, herbalist or angler`);
  }
  const c = o.concurrency ?? 1;
  if (!Number.isSafeInteger(c) || c < 1)
    throw new QuestworldConfigError(`concurrency ${c}: must be a positive integer`);
}

/** Play every (seed, archetype) episode with `policy` and score Core-3. */
export async function evaluateCore3(options: Core3Options): Promise<Core3Result> {
  const archetypes = options.archetypes ?? [...ARCHETYPES];
  checkOptions(options, archetypes);
  const limits: Limits = { ...DEFAULT_LIMITS, ...options.limits };
  const jobs: { seed: number; archetype: ArchetypeId }[] = [];
  for (const seed of options.seeds) for (const archetype of archetypes) jobs.push({ seed, archetype });
  const episodes: AgentScore[] = new Array(jobs.length);
  let policyId = isFactory(options.policy) ? "" : options.policy.id;
  let next = 0;
  let done = 0;

  const worker = async () => {
    while (next < jobs.length) {
      const i = next++;
      const { seed, archetype } = jobs[i];
      const env = new QuestworldEnvironment({ archetype, limits });
      const policy = isFactory(options.policy) ? options.policy({ env, archetype, seed }) : options.policy;
      if (!policyId) policyId = policy.id;
      const ep = await runQuestworldEpisode({
        env,
        policy,
        seed,
        archetype,
        state: options.start?.(archetype, seed),
        maxTurns: options.maxTurns,
        params: options.params,
      });
      episodes[i] = {
        seed,
        archetype,
        stages: ep.stages,
        total: ep.total,
        status: ep.status,
        turns: ep.turns,
        toolCalls: ep.counters.toolCalls,
        ticks: ep.counters.ticks,
        malformed: ep.counters.malformed,
        errors: ep.counters.errors,
      };
      done++;
      options.onProgress?.({ done, total: jobs.length, episode: episodes[i] });
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency ?? 1, jobs.length) }, worker));
  return scoreCore3(episodes, { policyId, seeds: options.seeds, archetypes, limits });
}

/** Aggregate finished episodes (one per seed × archetype) into Core-3. */
export function scoreCore3(
  episodes: AgentScore[],
  meta: { policyId: string; seeds: number[]; archetypes: ArchetypeId[]; limits: Limits },
): Core3Result {
  const perSeed = meta.seeds.map((seed) => {
    const byArchetype: Partial<Record<ArchetypeId, number>> = {};
    let total = 0;
    for (const e of episodes) {
      if (e.seed !== seed) continue;
      byArchetype[e.archetype] = e.total;
      total += e.total;
    }
    return { seed, total, byArchetype };
  });
  const totals = perSeed.map((p) => p.total);
  const score = { ...meanSE(totals), min: Math.min(...totals), max: Math.max(...totals) };

  const byArchetype: Core3Result["byArchetype"] = {};
  for (const a of meta.archetypes) {
    const mine = episodes.filter((e) => e.archetype === a);
    const perQuest = {} as Record<QuestId, number>;
    for (const q of QUESTS) perQuest[q] = meanSE(mine.map((e) => e.stages[q])).mean;
    byArchetype[a] = { total: meanSE(mine.map((e) => e.total)), perQuest };
  }

  const wall: WallRow[] = [];
  let index = 0;
  let prevPassed = episodes.length;
  for (const q of QUESTS) {
    QUEST_INFO[q].stages.forEach((label, k) => {
      const stage = k + 1;
      const passed = episodes.filter((e) => e.stages[q] >= stage).length;
      wall.push({
        quest: q,
        stage,
        index: ++index,
        label,
        passed,
        of: episodes.length,
        stoppedHere: prevPassed - passed,
      });
      prevPassed = passed;
    });
  }
  let wallStage: WallRow | null = null;
  for (const row of wall)
    if (row.stoppedHere > 0 && (!wallStage || row.stoppedHere > wallStage.stoppedHere)) wallStage = row;

  return {
    envVersion: QUESTWORLD_VERSION,
    policyId: meta.policyId,
    seeds: [...meta.seeds],
    archetypes: [...meta.archetypes],
    limits: { ...meta.limits },
    maxPerSeed: STAGES_PER_AGENT * meta.archetypes.length,
    episodes,
    perSeed,
    score,
    byArchetype,
    wall,
    wallStage,
  };
}

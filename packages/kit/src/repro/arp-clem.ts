// ARP judged as its seed cards judge it: clemscore (clembench's clemeval, kiln's exact port) over held-out
// instances of every game the embedded agent model plays, and statscore (the same formula over the static
// benchmarks kiln ships: BBH, EQ-Bench). Each phase's policy plays every selected episode greedily through
// ClemGameEnvironment, many at once, through the in-process policy: batched by its scheduler
// (docs/ARCHITECTURE.md §Continuous batching) or, with `batching: false`, one plain generate per reply.
// The episodes' Aborted / Main Score become clemeval's score rows, so the table is clemTable's. Δ vs base:
// clemscoreDelta (docs/NUMERICS.md §9.1). A phase whose weights are bit-identical to an evaluated one's
// (a stage that trained nothing) reuses that evaluation (PhaseEvalMemo): greedy decoding is deterministic.
import { createHash } from "node:crypto";
import { clembench } from "@kiln/benchmarks";
import { LocalPolicy, type Model } from "@kiln/models";
import { type Policy, type Trajectory, runEpisodes } from "@kiln/rollout";
import { EVAL_MAX_TURNS } from "../agent-model/clem-eval.js";
import { AGENT_CLEM_GAMES, type AgentClemGame, clemEnvironment, clemViewPolicy } from "../agent-model/clem-players.js";
import { isHeldOutInstance } from "../agent-model/clem-split.js";
import { ROLLOUT_CONCURRENCY } from "../recipes/recipe-run.js";
import type { ChatCodec } from "../trainer/chat-batches.js";
import { ReproError } from "./errors.js";

/** The games of the clemscore: those the embedded agent model plays (its corpus's, agent-model/clem-players.ts). */
export const ARP_EVAL_GAMES: readonly string[] = AGENT_CLEM_GAMES;

/** The static benchmarks of the statscore that kiln ships data for (ifeval, cladder, mmlu_pro are not ported). */
export const ARP_STATIC_GAMES = ["bbh", "eqbench"] as const;

/** The seed's published clemscore per phase, printed beside kiln's. */
export const ARP_SEED_CLEMSCORE: Readonly<Record<string, number>> = {
  base: 13.05,
  sft: 43.85,
  "targeted-sft": 46.83,
  "turn-dpo-1": 45.52,
  "turn-dpo-2": 48.52,
  "branch-dpo": 50.43,
  final: 48.7,
};
export const ARP_SEED_SOURCE = "ARP seed cards 002/003 (published clemscore per phase)";

/** Which held-out instances are evaluated, and how a reply is generated. */
export interface ArpClemConfig {
  /** Interactive games (the clemscore); empty: no clemscore column. */
  games: string[];
  /** Held-out instances played per game (spread over the game's held-out list; 0 = all of them). */
  instancesPerGame: number;
  /** Static benchmarks (the statscore); empty: none. */
  staticGames: string[];
  /** Held-out instances per static benchmark (spread over its held-out list). */
  staticInstances: number;
  /** Tokens per reply (greedy). */
  maxTokens: number;
  /** A cap on each game's own turn limit (clemTurnLimit); an episode cut off counts as aborted. */
  maxTurns: number;
  /**
   * Per game, a lower cap than maxTurns (e.g. imagegame: a model that never says DONE plays its 40 turns, each
   * re-reading a longer conversation: most of a phase's evaluation time); an episode cut off counts as aborted.
   */
  turnCaps?: Record<string, number>;
  /**
   * Replies through the in-process policy's batching scheduler (true, the default) or one plain generate at
   * a time (false): every reply the repro's ARP generates (these evaluations, and runArp's probe, rollouts and
   * training-game evaluation). Either plays the same greedy episodes; they differ in cost (config.ts says which
   * is cheaper).
   */
  batching?: boolean;
}

/** The turn cap of `game` under `config`: its own cap when it has one below maxTurns, else maxTurns. */
export function clemTurnCap(config: Pick<ArpClemConfig, "maxTurns" | "turnCaps">, game: string): number {
  const own = config.turnCaps?.[game];
  return own === undefined ? config.maxTurns : Math.min(own, config.maxTurns);
}

/** A game's environment over its held-out instances (what the suite plays by default). */
export type ClemEnvFactory = (game: string) => clembench.ClemGameEnvironment;

/**
 * The agent model's games as its corpus plays them (role 0, the corpus's scripted partners); any other game,
 * e.g. a static benchmark, alone on its held-out instances.
 */
export const heldOutClemEnv: ClemEnvFactory = (game) =>
  (AGENT_CLEM_GAMES as readonly string[]).includes(game)
    ? clemEnvironment(game as AgentClemGame, isHeldOutInstance)
    : new clembench.ClemGameEnvironment({ game, pick: isHeldOutInstance });

/** A game's turn limit: above what the game allows, so the game ends it (the agent model's, else 2: single-turn). */
export function clemTurnLimit(game: string, cap?: number): number {
  const own = EVAL_MAX_TURNS[game as AgentClemGame] ?? 2;
  return cap === undefined ? own : Math.min(own, cap);
}

/**
 * At most `slots` generations at once over every policy it wraps: the games run side by side (each its own
 * episode pool, environment and player view) while the in-process policy batches up to `slots` replies.
 */
export function generationGate(slots: number): (inner: Policy) => Policy {
  let free = slots;
  const waiting: (() => void)[] = [];
  const acquire = (): Promise<void> => {
    if (free > 0) {
      free--;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      waiting.push(resolve);
    });
  };
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };
  return (inner) => ({
    id: inner.id,
    async generate(messages, tools, params) {
      await acquire();
      try {
        return await inner.generate(messages, tools, params);
      } finally {
        release();
      }
    },
  });
}

/** `count` indices spread evenly over 0..n−1 (every experiment gets its share); all of them when count ≥ n or 0. */
export function spreadIndices(n: number, count: number): number[] {
  if (count <= 0 || count >= n) return Array.from({ length: n }, (_, i) => i);
  return Array.from({ length: count }, (_, j) => Math.floor((j * n) / count));
}

/** One evaluated episode as clemeval sees it. */
export interface ClemEpisode {
  game: string;
  experiment: string;
  /** clemcore's episode directory name (instance_NNNNN of the instance's game_id). */
  episode: string;
  /** Position in the game's held-out list (the pairing key across phases, with the game). */
  index: number;
  played: 0 | 1;
  /** Main Score as the game logged it (NaN: none, e.g. aborted). */
  quality: number;
  /**
   * Why the game gave no scores, counted as aborted: the reply called a tool (the games declare none, so the
   * game never sees it: the episode ends as clembench ends one on a malformed reply), or the turn limit.
   */
  stopped?: string;
  /** A policy or environment error (counted as aborted, and listed as an errored episode). */
  error?: string;
}

interface SuiteEpisode {
  game: string;
  index: number;
  experiment: string;
  gameId: number | string;
}

/** The episodes of a suite: per game, `count` of its held-out instances. */
export function clemSuiteEpisodes(games: readonly string[], count: number, makeEnv: ClemEnvFactory): SuiteEpisode[] {
  const out: SuiteEpisode[] = [];
  for (const game of games) {
    const env = makeEnv(game);
    const def = clembench.getGame(game);
    const all = clembench.listEpisodes(def.name, clembench.loadGameInstances(def.name));
    const heldout = all.filter((_, i) => isHeldOutInstance(i));
    if (heldout.length !== env.instances)
      throw new ReproError(
        `clemscore: ${game}'s environment holds ${env.instances} instances, the held-out list ${heldout.length}`,
      );
    for (const index of spreadIndices(heldout.length, count))
      out.push({
        game,
        index,
        experiment: heldout[index].experiment.name,
        gameId: heldout[index].instance.game_id,
      });
  }
  return out;
}

/** A trajectory's clemeval view: Played and the raw Main Score, or aborted with the reason it has none. */
function clemEpisode(e: SuiteEpisode, t: Trajectory): ClemEpisode {
  const base = {
    game: e.game,
    experiment: e.experiment,
    episode: `instance_${String(e.gameId).padStart(5, "0")}`,
    index: e.index,
  };
  const last = t.turns[t.turns.length - 1];
  const scores = (last?.info?.scores ?? undefined) as Record<string, number> | undefined;
  if (t.outcome.status === "done" && scores && "aborted" in scores)
    return {
      ...base,
      played: scores.aborted === 1 ? 0 : 1,
      quality: typeof scores.main_score_raw === "number" ? scores.main_score_raw : Number.NaN,
    };
  if (t.outcome.status === "error" || t.outcome.status === "done") {
    const e = t.outcome.error;
    const why = e ? `${e.kind} error at turn ${e.turn}: ${e.message}` : "the game ended without scores";
    return { ...base, played: 0, quality: Number.NaN, error: why };
  }
  return { ...base, played: 0, quality: Number.NaN, stopped: `${t.outcome.status} after ${t.turns.length} turns` };
}

/**
 * Play the suite's episodes with `policy` (greedy): every game at once, each from the player's view its
 * corpus was written in (clemViewPolicy), at most `concurrency` replies generated at once over all games.
 * Returned in the suite's order.
 */
export async function playClemSuite(options: {
  policy: Policy;
  episodes: readonly SuiteEpisode[];
  maxTokens: number;
  /** A cap on every game's own turn limit (clemTurnLimit). */
  maxTurns?: number;
  /** Per game, a lower cap (clemTurnCap). */
  turnCaps?: Record<string, number>;
  makeEnv?: ClemEnvFactory;
  concurrency?: number;
}): Promise<ClemEpisode[]> {
  const makeEnv = options.makeEnv ?? heldOutClemEnv;
  const gate = generationGate(options.concurrency ?? ROLLOUT_CONCURRENCY);
  const games = [...new Set(options.episodes.map((e) => e.game))];
  const played = new Map<string, ClemEpisode>();
  await Promise.all(
    games.map(async (game) => {
      const mine = options.episodes.filter((e) => e.game === game);
      const r = await runEpisodes({
        makeEnv: () => makeEnv(game),
        policy: gate(clemViewPolicy(options.policy, game)),
        // the seed picks the instance: reset() plays held-out instance (seed mod their number)
        episodes: mine.map((e) => ({ id: `${game}/${e.index}`, seed: e.index })),
        params: { temperature: 0, maxTokens: options.maxTokens },
        // One malformed reply ends the episode: a tool call never reaches the game master, which would abort.
        limits: {
          maxTurns: clemTurnLimit(
            game,
            options.maxTurns === undefined
              ? options.turnCaps?.[game]
              : clemTurnCap({ maxTurns: options.maxTurns, turnCaps: options.turnCaps }, game),
          ),
          maxConsecutiveMalformed: 1,
        },
        concurrency: options.concurrency ?? ROLLOUT_CONCURRENCY,
      });
      mine.forEach((e, i) => {
        played.set(`${game}/${e.index}`, clemEpisode(e, r.trajectories[i]));
      });
    }),
  );
  return options.episodes.map((e) => played.get(`${e.game}/${e.index}`) as ClemEpisode);
}

/** clemeval's long rows of the episodes (Aborted and Main Score), under `model`, with Played added. */
export function clemRows(model: string, episodes: readonly ClemEpisode[]): clembench.ScoreRow[] {
  const rows: clembench.ScoreRow[] = episodes.flatMap((e) => [
    { game: e.game, model, experiment: e.experiment, episode: e.episode, metric: "Aborted", value: 1 - e.played },
    { game: e.game, model, experiment: e.experiment, episode: e.episode, metric: "Main Score", value: e.quality },
  ]);
  return clembench.addPlayedRows(rows);
}

/** One phase's clemscore and statscore: the played episodes and clemeval's rows of them. */
export interface ClemPhase {
  phase: string;
  episodes: ClemEpisode[];
  staticEpisodes: ClemEpisode[];
  /** clemTable's row of the interactive games (undefined when none were played). */
  clem?: clembench.ModelRow;
  /** The same over the static benchmarks (statscore). */
  stat?: clembench.ModelRow;
  rows: clembench.ScoreRow[];
  staticRows: clembench.ScoreRow[];
}

/** The selected episodes of a configuration (the same for every phase, so they pair). */
export function arpClemEpisodes(config: ArpClemConfig, makeEnv: ClemEnvFactory = heldOutClemEnv) {
  for (const [game, cap] of Object.entries(config.turnCaps ?? {})) {
    if (!config.games.includes(game) && !config.staticGames.includes(game))
      throw new ReproError(
        `arpClem.turnCaps.${game}: not a game of the evaluation (${[...config.games, ...config.staticGames].join(", ")})`,
      );
    if (!Number.isInteger(cap) || cap < 1)
      throw new ReproError(`arpClem.turnCaps.${game} must be a positive integer, got ${cap}`);
  }
  return {
    interactive: clemSuiteEpisodes(config.games, config.instancesPerGame, makeEnv),
    static: clemSuiteEpisodes(config.staticGames, config.staticInstances, makeEnv),
  };
}

/** Evaluate one phase: the model as it is now, greedy, on the suite's episodes. */
export async function clemPhaseEval(options: {
  phase: string;
  policy: Policy;
  config: ArpClemConfig;
  episodes: ReturnType<typeof arpClemEpisodes>;
  makeEnv?: ClemEnvFactory;
}): Promise<ClemPhase> {
  const { config } = options;
  const played = await playClemSuite({
    policy: options.policy,
    episodes: [...options.episodes.interactive, ...options.episodes.static],
    maxTokens: config.maxTokens,
    maxTurns: config.maxTurns,
    turnCaps: config.turnCaps,
    makeEnv: options.makeEnv,
  });
  const episodes = played.slice(0, options.episodes.interactive.length);
  const staticEpisodes = played.slice(options.episodes.interactive.length);
  const rows = clemRows(options.phase, episodes);
  const staticRows = clemRows(options.phase, staticEpisodes);
  return {
    phase: options.phase,
    episodes,
    staticEpisodes,
    clem: episodes.length ? clembench.clemTable(rows).rows[0] : undefined,
    stat: staticEpisodes.length ? clembench.clemTable(staticRows).rows[0] : undefined,
    rows,
    staticRows,
  };
}

/**
 * A fresh greedy in-process policy over `model` (its weights as they are when it generates): batched by the
 * scheduler unless `batching` is false (one plain generate per reply).
 */
export function clemPolicy(id: string, model: Model, codec: ChatCodec, batching = true): LocalPolicy {
  return new LocalPolicy({
    id,
    model,
    tokenizer: codec.tokenizer,
    chatTemplate: codec.template,
    ...(batching ? {} : { batching: false as const }),
  });
}

/**
 * A fingerprint of the weights `model` generates with (every parameter's name, dtype, shape and bits), or
 * undefined while any linear has an enabled adapter (its output is not in the parameters).
 */
export function weightsDigest(model: Model): string | undefined {
  for (const [, lin] of model.namedLinears()) if (lin.adapters.some((a) => a.enabled)) return undefined;
  const hash = createHash("sha256");
  for (const [name, t] of model.namedParameters()) {
    hash.update(`${name}\u0000${t.dtype}\u0000${t.shape.join(",")}\u0000`);
    const v = t.toFloat32Array();
    hash.update(new Uint8Array(v.buffer, v.byteOffset, v.byteLength));
  }
  return hash.digest("hex");
}

/**
 * Phase evaluations by the weights they ran on. A phase whose weights are bit-identical to an evaluated one's
 * (a stage with no data merges a zero delta) gets that evaluation under its own name: the episodes are greedy
 * and deterministic, so playing them again would give the same trajectories at the evaluation's full cost.
 */
export class PhaseEvalMemo<T> {
  private readonly byDigest = new Map<string, { phase: string; value: T }>();
  /** Phases that reused another's evaluation: phase → the phase whose evaluation it is. */
  readonly reused: Record<string, string> = {};

  async get(phase: string, model: Model, evaluate: () => Promise<T>, rename: (value: T) => T): Promise<T> {
    const digest = weightsDigest(model);
    const hit = digest === undefined ? undefined : this.byDigest.get(digest);
    if (hit) {
      this.reused[phase] = hit.phase;
      return rename(hit.value);
    }
    const value = await evaluate();
    if (digest !== undefined) this.byDigest.set(digest, { phase, value });
    return value;
  }
}

/** The same evaluation under another phase's name (clemeval's rows carry the phase as the model). */
export function renameClemPhase(c: ClemPhase, phase: string): ClemPhase {
  const rows = clemRows(phase, c.episodes);
  const staticRows = clemRows(phase, c.staticEpisodes);
  return {
    ...c,
    phase,
    clem: c.episodes.length ? clembench.clemTable(rows).rows[0] : undefined,
    stat: c.staticEpisodes.length ? clembench.clemTable(staticRows).rows[0] : undefined,
    rows,
    staticRows,
  };
}

/** Paired Δ of a phase's clemscore (or statscore) against the base's. */
export function clemPhaseDelta(
  phase: ClemPhase,
  base: ClemPhase,
  which: "clem" | "stat" = "clem",
): clembench.ClemscoreDelta | undefined {
  const key = which === "clem" ? "rows" : "staticRows";
  if (phase[key].length === 0 || base[key].length === 0) return undefined;
  // the same model name in both would merge them: rename the base's rows
  const before = base[key].map((r) => ({ ...r, model: "\u0000base" }));
  return clembench.clemscoreDelta([...phase[key], ...before], phase.phase, "\u0000base");
}

/** Episodes of a phase that have no game scores (counted as aborted), for the repro's error list. */
export function clemErrors(phase: ClemPhase): { id: string; reason: string }[] {
  return [...phase.episodes, ...phase.staticEpisodes]
    .filter((e) => e.error !== undefined)
    .map((e) => ({ id: `${e.game}/${e.experiment}/${e.episode}`, reason: e.error as string }));
}

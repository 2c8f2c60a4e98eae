import type { Policy } from "@kiln/rollout";
import {
  addPlayedRows,
  type ClemTable,
  clemTable,
  formatRawCsv,
  formatResultsCsv,
  formatResultsMarkdown,
  formatStatsMarkdown,
  loadScores,
} from "./clemeval.js";
import { resolveDataDir } from "./data-dir.js";
import { type EpisodeResult, playEpisode } from "./episode.js";
import { RunnerOptionsError } from "./errors.js";
import type { GameDefinition } from "./game.js";
import { type EpisodeSpec, type InstanceFilter, listEpisodes } from "./instances.js";
import { type PlayerBackend, PolicyBackend } from "./player.js";
import { getGame, loadGameInstances } from "./registry.js";
import { writeEpisode, writeResultFile } from "./results-writer.js";
import { join } from "node:path";

export interface ProgressEvent {
  done: number;
  total: number;
  game: string;
  result: EpisodeResult;
}

export interface RunOptions {
  /** Game names (see GAMES) or definitions. */
  games: (string | GameDefinition)[];
  /** One policy/backend for every role, or one per LLM role in the game's call order. */
  players: (Policy | PlayerBackend)[];
  /** Results root; episodes go to `<resultsDir>/<modelDir>/<game>/<experiment>/instance_NNNNN/`. */
  resultsDir?: string;
  /** Directory name for this player setup; default: the model names joined with "--". */
  modelDir?: string;
  dataDir?: string;
  filter?: InstanceFilter;
  /** Episodes played at once (default 1). */
  concurrency?: number;
  /** clembench runs use temperature 0 (default). */
  temperature?: number;
  maxTokens?: number;
  enableThinking?: boolean;
  onProgress?: (e: ProgressEvent) => void;
}

export interface RunSummary {
  results: EpisodeResult[];
  /** clemscore table over the episodes of this run */
  table: ClemTable;
}

function isBackend(p: Policy | PlayerBackend): p is PlayerBackend {
  return typeof (p as PlayerBackend).respond === "function";
}

/** Run episodes with at most `limit` in flight, keeping result order. */
async function pool<T, R>(items: T[], limit: number, fn: (x: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i], i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return out;
}

/**
 * Play the selected games and instances with the given players, write clemcore's results layout and the
 * clemscore tables (results.csv, results.md, stats.md, raw.csv) over every model in `resultsDir`.
 */
export async function runBenchmark(opts: RunOptions): Promise<RunSummary> {
  if (opts.players.length === 0) throw new RunnerOptionsError("runBenchmark: at least one player is required");
  if (opts.concurrency !== undefined && (!Number.isInteger(opts.concurrency) || opts.concurrency < 1))
    throw new RunnerOptionsError(`runBenchmark: concurrency must be a positive integer, got ${opts.concurrency}`);
  const dataDir = resolveDataDir(opts.dataDir);
  const backends = opts.players.map((p) =>
    isBackend(p)
      ? p
      : new PolicyBackend(p, {
          temperature: opts.temperature ?? 0,
          maxTokens: opts.maxTokens,
          enableThinking: opts.enableThinking,
        }),
  );
  const modelDir = opts.modelDir ?? [...new Set(backends.map((b) => b.modelName))].join("--");
  const jobs: { def: GameDefinition; spec: EpisodeSpec }[] = [];
  for (const g of opts.games) {
    const def = typeof g === "string" ? getGame(g) : g;
    if (backends.length !== 1 && backends.length !== def.players)
      throw new RunnerOptionsError(
        `${def.name} has ${def.players} LLM role(s) (${def.roles.join(", ")}); got ${backends.length} players`,
      );
    def.startRun?.();
    for (const spec of listEpisodes(def.name, loadGameInstances(def.name, dataDir), opts.filter))
      jobs.push({ def, spec });
  }
  let done = 0;
  const results = await pool(jobs, opts.concurrency ?? 1, async ({ def, spec }) => {
    const result = await playEpisode(def, spec, backends, { dataDir });
    if (opts.resultsDir) writeEpisode(opts.resultsDir, modelDir, spec, result);
    done++;
    opts.onProgress?.({ done, total: jobs.length, game: def.name, result });
    return result;
  });
  // the table of this run; with a results directory, clemcore's evaluation over everything in it is written too
  const table = clemTable(addPlayedRows(rowsFromResults(results, modelDir)));
  if (opts.resultsDir) evaluateResults(opts.resultsDir);
  return { results, table };
}

function rowsFromResults(results: EpisodeResult[], model: string) {
  return results.flatMap((r) =>
    r.scores
      ? Object.entries(r.scores["episode scores"]).map(([metric, value]) => ({
          game: r.game,
          model,
          experiment: r.experiment,
          episode: `instance_${String(r.gameId).padStart(5, "0")}`,
          metric,
          value,
        }))
      : [],
  );
}

/** Write raw.csv, results.csv (with std columns), results.md and stats.md (n and standard errors). */
export function writeEvaluation(dir: string, rows: ReturnType<typeof addPlayedRows>, table: ClemTable): void {
  writeResultFile(join(dir, "raw.csv"), formatRawCsv(rows));
  writeResultFile(join(dir, "results.csv"), formatResultsCsv(table, true));
  writeResultFile(join(dir, "results.md"), formatResultsMarkdown(table));
  writeResultFile(join(dir, "stats.md"), formatStatsMarkdown(table));
}

/** clemcore's `perform_evaluation`: aggregate every scores.json under `resultsDir` and write the tables there. */
export function evaluateResults(resultsDir: string): ClemTable {
  const rows = addPlayedRows(loadScores(resultsDir));
  const table = clemTable(rows);
  writeEvaluation(resultsDir, rows, table);
  return table;
}

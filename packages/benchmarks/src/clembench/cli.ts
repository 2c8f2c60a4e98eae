// `kiln eval clem` until the kit CLI exists: play games against OpenAI-compatible servers and score them.
import { HttpPolicy, type Policy, ProgressBar } from "@kiln/rollout";
import { RunnerOptionsError } from "./errors.js";
import { episodeOutcome } from "./episode.js";
import { addPlayedRows, clemAndStatScore, formatResultsMarkdown, formatStatsMarkdown, loadScores } from "./clemeval.js";
import { GAMES } from "./registry.js";
import { evaluateResults, runBenchmark } from "./runner.js";

export const CLI_USAGE = `Usage:
  clem run --model NAME [--model NAME2] --base-url URL [options]   play games, write results and clemscore
  clem score RESULTS_DIR                                           aggregate scores.json files (clemeval)

run options:
  --games a,b,...        games to play (default: all implemented: ${Object.keys(GAMES).join(", ")})
  --experiments a,b      only these experiments        --ids 0,3,7     only these game_ids
  --limit N              at most N instances per experiment
  --base-url URL         OpenAI-compatible server (several: comma-separated replicas)
  --api-key KEY          (default: $OPENAI_API_KEY)
  --model NAME           model for every role; give it twice for a pairing (one per role)
  --temperature T        default 0                      --max-tokens N   default 5000 (Playschool setting)
  --enable-thinking B    true|false (default false)     --concurrency N  episodes at once (default 4)
  --results DIR          default ./results               --data-dir DIR   clembench data (default: shipped)
  --no-progress          no progress bar`;

interface Io {
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  /** Policy factory (tests inject one); default: HttpPolicy. */
  makePolicy?: (opts: { model: string; baseUrls: string[]; apiKey?: string }) => Policy;
}

function parseArgs(argv: string[]): { positional: string[]; flags: Map<string, string[]> } {
  const positional: string[] = [];
  const flags = new Map<string, string[]>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) {
      positional.push(a);
      continue;
    }
    const eq = a.indexOf("=");
    const key = eq > 0 ? a.slice(2, eq) : a.slice(2);
    let value: string;
    if (eq > 0) value = a.slice(eq + 1);
    else if (key.startsWith("no-")) value = "true";
    else {
      value = argv[i + 1];
      if (value === undefined) throw new RunnerOptionsError(`option --${key} needs a value`);
      i++;
    }
    flags.set(key, [...(flags.get(key) ?? []), value]);
  }
  return { positional, flags };
}

function num(flags: Map<string, string[]>, key: string, dflt: number, integer = true): number {
  const v = flags.get(key)?.at(-1);
  if (v === undefined) return dflt;
  const n = Number(v);
  if (!Number.isFinite(n) || (integer && !Number.isInteger(n)))
    throw new RunnerOptionsError(`--${key} must be ${integer ? "an integer" : "a number"}, got "${v}"`);
  return n;
}

function list(flags: Map<string, string[]>, key: string): string[] | undefined {
  const v = flags.get(key);
  return v ? v.flatMap((x) => x.split(",")).filter((x) => x.length > 0) : undefined;
}

/** Run the CLI; returns the exit code. */
export async function runClemCli(argv: string[], io: Io = defaultIo()): Promise<number> {
  try {
    const { positional, flags } = parseArgs(argv);
    const cmd = positional[0];
    if (!cmd || cmd === "help" || flags.has("help")) {
      io.stdout(`${CLI_USAGE}\n`);
      return cmd ? 0 : 1;
    }
    if (cmd === "score") {
      const dir = positional[1];
      if (!dir) throw new RunnerOptionsError("clem score: give the results directory");
      const table = evaluateResults(dir);
      io.stdout(formatResultsMarkdown(table));
      const { clem, stat } = clemAndStatScore(addPlayedRows(loadScores(dir)));
      if (stat.rows.length > 0 && clem.rows.length > 0) {
        io.stdout("\nclemscore (interactive games) / statscore (static benchmarks):\n");
        for (const r of clem.rows) {
          const st = stat.rows.find((x) => x.model === r.model);
          io.stdout(
            `${r.model}: clemscore ${r.clemscore.toFixed(2)} / statscore ${st ? st.clemscore.toFixed(2) : "-"}\n`,
          );
        }
      }
      return 0;
    }
    if (cmd !== "run") throw new RunnerOptionsError(`unknown command "${cmd}" (run | score)`);
    const models = flags.get("model");
    if (!models || models.length === 0 || models.length > 2)
      throw new RunnerOptionsError("clem run: give --model once (all roles) or twice (one per role)");
    const baseUrls = list(flags, "base-url");
    if (!baseUrls && !io.makePolicy) throw new RunnerOptionsError("clem run: --base-url is required");
    const apiKey = flags.get("api-key")?.at(-1) ?? process.env.OPENAI_API_KEY;
    const make =
      io.makePolicy ??
      ((o: { model: string; baseUrls: string[]; apiKey?: string }) =>
        // games need text only: no vLLM-specific token-id request field
        new HttpPolicy({ ...o, id: o.model, returnTokenIds: false }));
    const players = models.map((model) => make({ model, baseUrls: baseUrls ?? [], apiKey }));
    const thinking = flags.get("enable-thinking")?.at(-1) ?? "false";
    if (thinking !== "true" && thinking !== "false")
      throw new RunnerOptionsError(`--enable-thinking must be true or false, got "${thinking}"`);
    const games = list(flags, "games") ?? Object.keys(GAMES);
    const ids = list(flags, "ids")?.map((x) => {
      const n = Number(x);
      if (!Number.isInteger(n)) throw new RunnerOptionsError(`--ids must be integers, got "${x}"`);
      return n;
    });
    const resultsDir = flags.get("results")?.at(-1) ?? "results";
    const progress = flags.has("no-progress") ? null : undefined;
    let bar: ProgressBar | null = null;
    const summary = await runBenchmark({
      games,
      players,
      resultsDir,
      dataDir: flags.get("data-dir")?.at(-1),
      filter: {
        experiments: list(flags, "experiments"),
        gameIds: ids,
        limitPerExperiment: flags.has("limit") ? num(flags, "limit", 0) : undefined,
      },
      concurrency: num(flags, "concurrency", 4),
      temperature: num(flags, "temperature", 0, false),
      maxTokens: num(flags, "max-tokens", 5000),
      enableThinking: thinking === "true",
      onProgress: (e) => {
        if (!bar && progress !== null) bar = new ProgressBar({ total: e.total, label: "clembench" });
        bar?.tick(1, { [episodeOutcome(e.result.scores) ?? "unscored"]: 1 });
      },
    });
    (bar as ProgressBar | null)?.finish();
    io.stdout(formatStatsMarkdown(summary.table));
    io.stdout(`\nresults: ${resultsDir}\n`);
    return 0;
  } catch (e) {
    if (e instanceof RunnerOptionsError) {
      io.stderr(`${e.message}\n\n${CLI_USAGE}\n`);
      return 2;
    }
    throw e;
  }
}

function defaultIo(): Io {
  return { stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) };
}

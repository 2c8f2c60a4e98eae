// `kiln eval questworld | tau2 | clem run | clem score`. Against a server, the generation limit is fitted
// to what the server admits (its /v1/models max_model_len), and an episode that errored is counted and
// shown beside the scores: when any did, the command exits 1 naming the first error — an evaluation
// whose requests failed never looks like a result.
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { clembench, questworld, tau2 } from "@kiln/benchmarks";
import { HttpPolicy, type Policy, ProgressBar, TrajectoryWriter } from "@kiln/rollout";
import { acquireDirLock, withDirLocks } from "../dir-lock.js";
import { resolvePolicy } from "../policies.js";
import { UsageError, defineCommand } from "./args.js";
import { MODEL_BACKENDS, useBackend } from "./model-commands.js";

/** What a server says about a model in /v1/models (vLLM and kiln serve give max_model_len). */
export interface ServedModel {
  id: string;
  maxModelLen?: number;
}

/**
 * The entry of `model` in `${baseUrl}/models`. Throws when the server answers but does not serve that
 * name (every request would fail); undefined when the server has no /v1/models. Without a name, the one
 * model the server serves (as an OpenAI client must name one, and guessing among several would score the
 * wrong model).
 */
export async function servedModel(
  baseUrl: string,
  model: string | undefined,
  apiKey?: string,
): Promise<ServedModel | undefined> {
  // With or without a trailing /v1, as HttpPolicy takes it.
  const url = `${baseUrl.replace(/\/+$/, "").replace(/\/v1$/, "")}/v1/models`;
  let res: Response;
  try {
    res = await fetch(url, {
      headers: apiKey ? { authorization: `Bearer ${apiKey}` } : {},
      signal: AbortSignal.timeout(10_000),
    });
  } catch (e) {
    throw new Error(`cannot reach ${url}: ${(e as Error).message}`);
  }
  if (res.status === 404) return undefined;
  if (!res.ok) throw new Error(`${url} answered HTTP ${res.status}`);
  const body = (await res.json()) as { data?: { id?: unknown; max_model_len?: unknown }[] };
  const entries = Array.isArray(body.data) ? body.data : [];
  if (model === undefined) {
    if (entries.length !== 1 || typeof entries[0].id !== "string")
      throw new UsageError(
        `the server at ${baseUrl} serves ${entries.length} models (${
          entries.map((e) => String(e.id)).join(", ") || "none"
        }); pass --model with one of those`,
      );
    model = entries[0].id;
  }
  const entry = entries.find((e) => e.id === model);
  if (!entry)
    throw new UsageError(
      `the server at ${baseUrl} does not serve a model named "${model}" (it serves: ${
        entries.map((e) => String(e.id)).join(", ") || "none"
      }); pass --model with one of those`,
    );
  return {
    id: model,
    ...(typeof entry.max_model_len === "number" ? { maxModelLen: entry.max_model_len } : {}),
  };
}

/**
 * A protocol's max_tokens capped to half the server's context (the other half is the prompt's): the
 * prompt + max_tokens of every request must fit max_model_len or the server refuses it.
 */
export function fitMaxTokens(
  wanted: number,
  served: ServedModel | undefined,
  say: (line: string) => void,
  where: string,
): number {
  if (served?.maxModelLen === undefined) return wanted;
  const cap = Math.max(1, Math.floor(served.maxModelLen / 2));
  if (wanted <= cap) return wanted;
  say(
    `max_tokens ${wanted} → ${cap}: ${where} serves "${served.id}" with max_model_len ${served.maxModelLen}; half is left for the prompt`,
  );
  return cap;
}

/** Exit status and message of an evaluation whose episodes may have errored. */
function errorsVerdict(errored: number, total: number, first: string | undefined): number {
  if (errored === 0) return 0;
  console.error(
    `kiln eval: ${errored} of ${total} episodes errored (first: ${first ?? "unknown"}); the scores above count only the others`,
  );
  return 1;
}

export const evalQuestworldCommand = defineCommand({
  name: "eval questworld",
  summary: "Core-3 questworld scores (three archetypes × seeds) of a policy; writes core3.json and core3.md",
  options: {
    policy: {
      type: "string",
      default: "expert",
      placeholder: "expert|random|DIR|URL",
      description: "a built-in player, a model directory or an OpenAI-compatible server",
    },
    seeds: { type: "integers", default: "1,2,3", description: "seeds (≥ 3 for a standard error)" },
    out: { type: "string", default: "runs/eval-questworld", placeholder: "DIR", description: "where the reports go" },
    model: {
      type: "string",
      placeholder: "NAME",
      description: "the model name at a server URL (default: the one it serves)",
    },
    adapter: { type: "string", placeholder: "DIR", description: "a PEFT adapter on a model directory" },
    "chat-template": { type: "string", placeholder: "chatml|FILE", description: "for a model directory without one" },
    "max-tokens": { type: "integer", default: 256, min: 1, description: "max_tokens per reply" },
    backend: { type: "string", choices: MODEL_BACKENDS, default: "wasm", description: "tensor backend (model dir)" },
    "no-progress": { type: "boolean", description: "no progress bar" },
  },
  examples: [
    "kiln eval questworld --policy expert --seeds 1,2,3",
    "kiln eval questworld --policy http://127.0.0.1:8000/v1 --model m",
  ],
  run: async ({ values }) => {
    const spec = values.policy;
    let maxTokens = values["max-tokens"];
    let model = values.model;
    if (/^https?:\/\//.test(spec)) {
      const served = await servedModel(spec.split(",")[0], values.model);
      maxTokens = fitMaxTokens(maxTokens, served, (l) => console.error(`kiln eval questworld: ${l}`), spec);
      model = values.model ?? served?.id;
    } else if (spec !== "expert" && spec !== "random") await useBackend(values.backend);
    const policy =
      spec === "expert" || spec === "random"
        ? spec
        : await resolvePolicy(spec, {
            model,
            adapter: values.adapter,
            maxTokens,
            chatTemplate: values["chat-template"],
          });
    const lock = acquireDirLock(values.out, "kiln eval questworld");
    mkdirSync(values.out, { recursive: true });
    const bar = new ProgressBar({
      total: values.seeds.length * 3,
      label: "questworld",
      stream: values["no-progress"] ? null : undefined,
    });
    const r = await questworld
      .runQuestworldEval({
        policy,
        seeds: values.seeds,
        outDir: values.out,
        params: { maxTokens }, // per request, so --max-tokens also bounds a server's replies
        onProgress: () => bar.tick(1),
      })
      .finally(() => lock.release());
    bar.finish();
    console.log(r.markdown);
    console.log(`results: ${r.files.join(", ")}`);
    return 0;
  },
});

export const evalTau2Command = defineCommand({
  name: "eval tau2",
  summary:
    "tau2-bench retail: pass^k of an agent (an OpenAI-compatible server, or the oracle) with a simulated customer",
  options: {
    agent: { type: "string", choices: ["oracle"], description: "the oracle agent (replays the tasks' actions)" },
    "agent-url": { type: "string", placeholder: "URL", description: "the agent's OpenAI-compatible server" },
    "agent-model": { type: "string", placeholder: "NAME", description: "the agent's model name there" },
    user: { type: "string", choices: ["scripted"], description: "the scripted customer (default)" },
    "user-url": { type: "string", placeholder: "URL", description: "a customer model's server" },
    "user-model": { type: "string", placeholder: "NAME", description: "the customer model's name there" },
    "judge-url": { type: "string", placeholder: "URL", description: "an NL-assertion judge's server" },
    "judge-model": { type: "string", placeholder: "NAME", description: "the judge's model name" },
    split: { type: "string", choices: ["test", "train", "base"], default: "test", description: "task split" },
    "task-version": { type: "string", choices: ["v1.0", "v0.2.0"], default: "v1.0", description: "task set version" },
    tasks: { type: "strings", placeholder: "ID,ID…", description: "only these task ids (default: the whole split)" },
    trials: { type: "integer", default: 3, min: 1, description: "trials per task (k of pass^k)" },
    concurrency: { type: "integer", default: 4, min: 1, description: "episodes at once" },
    "max-steps": { type: "integer", default: 200, min: 1, description: "steps per episode" },
    "max-errors": { type: "integer", default: 10, min: 1, description: "tool errors per episode" },
    out: { type: "string", default: "runs/tau2", placeholder: "DIR", description: "where results go" },
    "no-progress": { type: "boolean", description: "no progress line" },
  },
  examples: [
    "kiln eval tau2 --agent oracle --tasks 5,9 --trials 1",
    "kiln eval tau2 --agent-url http://127.0.0.1:8000/v1 --agent-model m --trials 3",
  ],
  run: async ({ values: v }) => {
    const endpoint = (who: "agent" | "user" | "judge") => {
      const url = v[`${who}-url`];
      const model = v[`${who}-model`];
      if (url === undefined && model === undefined) return undefined;
      if (url === undefined || model === undefined) throw new UsageError(`--${who}-url and --${who}-model go together`);
      return { url, model };
    };
    const agentHttp = endpoint("agent");
    const userHttp = endpoint("user");
    const judge = endpoint("judge");
    if (agentHttp && v.agent) throw new UsageError("give --agent oracle or --agent-url/--agent-model, not both");
    if (!agentHttp && !v.agent)
      throw new UsageError("no agent: give --agent oracle or --agent-url URL --agent-model NAME");
    if (userHttp && v.user) throw new UsageError("give --user scripted or --user-url/--user-model, not both");
    const http = (e: { url: string; model: string }, id: string): Policy =>
      new HttpPolicy({ baseUrls: e.url, model: e.model, id });
    for (const e of [agentHttp, userHttp, judge]) if (e) await servedModel(e.url, e.model);
    const agent = agentHttp ? http(agentHttp, `http:${agentHttp.model}`) : tau2.oracleAgent;
    const user = userHttp ? http(userHttp, `user:${userHttp.model}`) : (t: tau2.Tau2Task) => tau2.scriptedUser(t);
    const { run, files } = await withDirLocks([v.out], "kiln eval tau2", async () => {
      mkdirSync(v.out, { recursive: true });
      const writer = await TrajectoryWriter.open(join(v.out, "trajectories.rollout.jsonl.gz"), { mode: "overwrite" });
      let run: tau2.Tau2RunResult;
      try {
        run = await tau2.runTau2({
          agent,
          user,
          judge: judge ? http(judge, `judge:${judge.model}`) : undefined,
          split: v.split as tau2.Tau2SplitName,
          version: v["task-version"] as tau2.Tau2TaskVersion,
          taskIds: v.tasks,
          numTrials: v.trials,
          concurrency: v.concurrency,
          maxSteps: v["max-steps"],
          maxErrors: v["max-errors"],
          onProgress: v["no-progress"] ? undefined : tau2.consoleProgress(),
          sink: writer,
        });
      } finally {
        await writer.close();
      }
      return { run, files: tau2.writeTau2Results(v.out, run) };
    });
    const errored = run.episodes.filter((e) => e.terminationReason === tau2.INFRASTRUCTURE_ERROR);
    for (const p of run.metrics.passHatK)
      console.log(`pass^${p.k} = ${(100 * p.value).toFixed(1)}% ± ${(100 * p.stderr).toFixed(1)}`);
    console.log(`episodes: ${run.episodes.length - errored.length} scored, ${errored.length} errored`);
    console.log(`results: ${files.json}, ${files.markdown}`);
    return errorsVerdict(errored.length, run.episodes.length, errored[0]?.error ?? undefined);
  },
});

export const evalClemRunCommand = defineCommand({
  name: "eval clem run",
  summary: "play clembench games against OpenAI-compatible servers, write results and the clemscore",
  options: {
    model: {
      type: "string",
      multiple: true,
      placeholder: "NAME",
      description: "the model for every role; give it twice for a pairing (one per role)",
    },
    "base-url": { type: "strings", placeholder: "URL[,URL…]", description: "the server (several: replicas)" },
    "api-key": { type: "string", placeholder: "KEY", description: "default: $OPENAI_API_KEY" },
    games: {
      type: "strings",
      choices: [...Object.keys(clembench.GAMES), ...Object.keys(clembench.STATIC_GAMES)],
      placeholder: "GAME,GAME…",
      description: "games to play (default: every implemented one)",
    },
    experiments: { type: "strings", placeholder: "NAME,NAME…", description: "only these experiments" },
    ids: { type: "integers", placeholder: "N,N…", description: "only these game ids" },
    limit: { type: "integer", min: 1, description: "at most N instances per experiment" },
    temperature: { type: "number", default: 0, min: 0, description: "sampling temperature" },
    "max-tokens": {
      type: "integer",
      default: 5000,
      min: 1,
      description: "max_tokens per reply (Playschool's setting), capped to fit the server's max_model_len",
    },
    "enable-thinking": { type: "string", choices: ["true", "false"], default: "false", description: "thinking mode" },
    concurrency: { type: "integer", default: 4, min: 1, description: "episodes at once" },
    results: { type: "string", default: "results", placeholder: "DIR", description: "results root" },
    "data-dir": { type: "string", placeholder: "DIR", description: "clembench data (default: shipped)" },
    "no-progress": { type: "boolean", description: "no progress bar" },
  },
  examples: ["kiln eval clem run --model m --base-url http://127.0.0.1:8000/v1 --games wordle --limit 2"],
  run: async ({ values: v }) => {
    const models = v.model;
    if (models.length === 0 || models.length > 2)
      throw new UsageError("give --model once (all roles) or twice (one per role)");
    const baseUrls = v["base-url"];
    if (!baseUrls) throw new UsageError("--base-url is required");
    const apiKey = v["api-key"] ?? process.env.OPENAI_API_KEY;
    let maxTokens = v["max-tokens"];
    for (const model of new Set(models)) {
      const served = await servedModel(baseUrls[0], model, apiKey);
      maxTokens = fitMaxTokens(maxTokens, served, (l) => console.error(`kiln eval clem run: ${l}`), baseUrls[0]);
    }
    // games need text only: no vLLM-specific token-id request field
    const players = models.map(
      (model) => new HttpPolicy({ model, baseUrls, apiKey, id: model, returnTokenIds: false }),
    );
    let bar: ProgressBar | undefined;
    const lock = acquireDirLock(v.results, "kiln eval clem run");
    const summary = await clembench
      .runBenchmark({
        games: v.games ?? Object.keys(clembench.GAMES),
        players,
        resultsDir: v.results,
        dataDir: v["data-dir"],
        filter: { experiments: v.experiments, gameIds: v.ids, limitPerExperiment: v.limit },
        concurrency: v.concurrency,
        temperature: v.temperature,
        maxTokens,
        enableThinking: v["enable-thinking"] === "true",
        onProgress: (e) => {
          if (!bar && !v["no-progress"]) bar = new ProgressBar({ total: e.total, label: "clembench" });
          bar?.tick(1, { [e.result.error ? "errored" : (clembench.episodeOutcome(e.result.scores) ?? "unscored")]: 1 });
        },
      })
      .finally(() => lock.release());
    (bar as ProgressBar | undefined)?.finish();
    const errored = summary.results.filter((r) => r.error !== undefined);
    console.log(clembench.formatStatsMarkdown(summary.table));
    console.log(`\nepisodes: ${summary.results.length - errored.length} played, ${errored.length} errored`);
    console.log(`results: ${v.results}`);
    const first = errored[0];
    return errorsVerdict(
      errored.length,
      summary.results.length,
      first ? `${first.game}/${first.experiment}/${first.gameId}: ${first.error}` : undefined,
    );
  },
});

export const evalClemScoreCommand = defineCommand({
  name: "eval clem score",
  summary: "aggregate a clembench results directory's scores.json files (clemeval): the clemscore table",
  positionals: [{ name: "results-dir", description: "a results root written by kiln eval clem run (or clembench)" }],
  options: {},
  examples: ["kiln eval clem score results"],
  run: async ({ positionals: [dir] }) => {
    const table = clembench.evaluateResults(dir);
    console.log(clembench.formatResultsMarkdown(table));
    const { clem, stat } = clembench.clemAndStatScore(clembench.addPlayedRows(clembench.loadScores(dir)));
    if (stat.rows.length > 0 && clem.rows.length > 0) {
      console.log("\nclemscore (interactive games) / statscore (static benchmarks):");
      for (const r of clem.rows) {
        const st = stat.rows.find((x) => x.model === r.model);
        console.log(
          `${r.model}: clemscore ${r.clemscore.toFixed(2)} / statscore ${st ? st.clemscore.toFixed(2) : "-"}`,
        );
      }
    }
    return 0;
  },
});

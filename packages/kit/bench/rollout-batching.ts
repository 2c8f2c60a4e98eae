// `pnpm bench rollout [--json]` (second half; also alone as `pnpm bench rollout-batching`): continuous
// batching of generation (@kiln/models BatchScheduler), all figures from the same run:
//  - episodes/s of guess-number on the embedded agent model at concurrency 16 vs 1 (greedy and
//    temperature 1 seeded), against the same scheduler at concurrency 1 and against LocalPolicy
//    with batching off (one `generate` per call: the code before the scheduler); trajectories are
//    compared token for token;
//  - aggregate decode tokens/s of 16 sequences through the scheduler vs one static `generate`
//    batch of 16 (the ceiling), on the agent model and a Qwen3-0.6B-shaped random model (short);
//  - `kiln serve` (--max-num-seqs 16) with 16 concurrent clients vs in-process.
// Every comparison runs its contenders in interleaved rounds (A B A B …, after one warm-up each), so a
// change in the machine's load hits both sides alike; each row gives the median over rounds of the
// wall-clock rate and, in a second row, of the rate per CPU-second (process.cpuUsage: every thread of
// this process, the serve worker's and the kernels' worker threads included), which a shared machine
// disturbs far less than wall time. The load average before and after is in every row's note.
// Options: --backend NAME (default auto), --episodes N (default 16), --turns N (default 3),
// --rounds N (default 3), --skip-qwen, --skip-serve.
import { loadavg } from "node:os";
import { GuessNumberEnv, HttpPolicy, type Policy, type Trajectory, runEpisodes } from "@kiln/rollout";
import { BatchScheduler, type Model, LocalPolicy, createModel, generate, loadModel, loadTokenizer } from "@kiln/models";
import { initBackend } from "@kiln/tensor";
import { BenchReporter } from "../../../tooling/src/bench.js";
import { agentModelDir } from "../src/agent-model/paths.js";
import { startServe } from "../src/serve.js";

const argv = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
const rep = new BenchReporter("rollout");
const choice = await initBackend(arg("backend", "auto") as Parameters<typeof initBackend>[0]);
const backend = choice.backend;
const EPISODES = Number(arg("episodes", "16"));
const TURNS = Number(arg("turns", "3"));
const ROUNDS = Number(arg("rounds", "3"));
const load = () => `load ${loadavg()[0].toFixed(1)}`;
process.stderr.write(`rollout batching bench on ${choice.line ?? backend}\n`);

const dir = agentModelDir();
const agent = await loadModel(dir);
const tokenizer = await loadTokenizer(dir);

// --- measurement: interleaved rounds, wall and CPU time ----------------------------------------
interface Sample<T> {
  wallMs: number[];
  cpuMs: number[];
  last: T;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

/** Runs every contender once to warm up, then `ROUNDS` rounds of each in turn; wall and CPU ms per run. */
async function interleaved<T>(contenders: (() => Promise<T>)[]): Promise<Sample<T>[]> {
  const samples: Sample<T>[] = [];
  for (const run of contenders) samples.push({ wallMs: [], cpuMs: [], last: await run() });
  for (let r = 0; r < ROUNDS; r++)
    for (const [i, run] of contenders.entries()) {
      const c0 = process.cpuUsage();
      const t0 = performance.now();
      samples[i].last = await run();
      samples[i].wallMs.push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      samples[i].cpuMs.push((c.user + c.system) / 1000);
    }
  return samples;
}

/** Two rows (wall-clock rate and rate per CPU-second, medians over rounds) comparing `a` with `b`. */
function report(
  row: { case: string; metric: string; unit: string; peer: string; note: string },
  work: number,
  a: Sample<unknown>,
  b: Sample<unknown>,
  loadBefore: string,
) {
  const rounds = (s: Sample<unknown>) => s.wallMs.map((ms) => ((work * 1000) / ms).toPrecision(3)).join(", ");
  const note = `${row.note}; ${ROUNDS} interleaved rounds, wall rates kiln [${rounds(a)}] peer [${rounds(b)}]; ${loadBefore} → ${load()}`;
  rep.add({
    ...row,
    better: "higher",
    kiln: (work * 1000) / median(a.wallMs),
    peer_value: (work * 1000) / median(b.wallMs),
    note,
  });
  rep.add({
    ...row,
    metric: `${row.metric}, per CPU-second`,
    unit: `${row.unit} per CPU-s`,
    better: "higher",
    kiln: (work * 1000) / median(a.cpuMs),
    peer_value: (work * 1000) / median(b.cpuMs),
    note: `CPU ms per run kiln [${a.cpuMs.map(Math.round).join(", ")}] peer [${b.cpuMs.map(Math.round).join(", ")}]`,
  });
}

// --- episodes/s --------------------------------------------------------------------------------
const tokensOf = (ts: Trajectory[]) => JSON.stringify(ts.map((t) => t.turns.map((u) => u.completionTokenIds)));

async function play(policy: Policy, concurrency: number, temperature: number): Promise<string> {
  const r = await runEpisodes({
    makeEnv: () => new GuessNumberEnv(),
    policy,
    episodes: EPISODES,
    concurrency,
    baseSeed: 11,
    params: { temperature, maxTokens: 48 },
    limits: { maxTurns: TURNS },
  });
  return tokensOf(r.trajectories);
}

for (const [label, temperature] of [
  ["greedy", 0],
  ["temperature 1 seeded", 1],
] as const) {
  const loadBefore = load();
  const before = new LocalPolicy({ model: agent, tokenizer, batching: false });
  const one = new LocalPolicy({ model: agent, tokenizer });
  const many = new LocalPolicy({ model: agent, tokenizer });
  const [b, o, m] = await interleaved([
    () => play(before, 1, temperature),
    () => play(one, 1, temperature),
    () => play(many, 16, temperature),
  ]);
  const same = m.last === o.last;
  const sameBefore = m.last === b.last;
  const what = `agent model, ${EPISODES} guess-number episodes × ≤${TURNS} turns, ${backend}`;
  report(
    {
      case: `episodes ${label}`,
      metric: "episodes/s, concurrency 16 vs 1 (scheduler both)",
      unit: "episodes/s",
      peer: "concurrency 1",
      note: `${what}; trajectories c16 = c1: ${same}`,
    },
    EPISODES,
    m,
    o,
    loadBefore,
  );
  report(
    {
      case: `episodes ${label}`,
      metric: "episodes/s, concurrency 16 vs 1 with batching off (before)",
      unit: "episodes/s",
      peer: "concurrency 1, no scheduler",
      note: `${what}; trajectories = unbatched: ${sameBefore}`,
    },
    EPISODES,
    m,
    b,
    loadBefore,
  );
}

// --- aggregate decode tokens/s -----------------------------------------------------------------
async function decodeRate(name: string, model: Model, promptLength: number, newTokens: number) {
  const prompts = Array.from({ length: 16 }, (_, b) =>
    Array.from({ length: promptLength }, (_, i) => 3 + ((b * 37 + i * 11) % (model.config.vocabSize - 3))),
  );
  const opts = { maxNewTokens: newTokens, temperature: 1, seed: 5, stopTokenIds: [] as number[] };
  const scheduler = new BatchScheduler(model, { maxNumSeqs: 16 });
  const loadBefore = load();
  const [sched, fixed] = await interleaved([
    () => Promise.all(prompts.map((p, b) => scheduler.generate(p, { ...opts, seed: b }))),
    async () => generate(model, prompts, opts),
  ]);
  report(
    {
      case: `decode ${name}`,
      metric: "tokens/s, 16 sequences through the scheduler vs one static generate batch of 16",
      unit: "tokens/s",
      peer: "static generate (16 rows)",
      note: `${promptLength}-token prompts, ${newTokens} new tokens each (prefill included), ${backend}`,
    },
    16 * newTokens,
    sched,
    fixed,
    loadBefore,
  );
}
await decodeRate("agent model", agent, 32, 64);
if (!argv.includes("--skip-qwen")) {
  const qwen = createModel(
    {
      architectures: ["Qwen3ForCausalLM"],
      model_type: "qwen3",
      vocab_size: 151936,
      hidden_size: 1024,
      intermediate_size: 3072,
      num_hidden_layers: 28,
      num_attention_heads: 16,
      num_key_value_heads: 8,
      head_dim: 128,
      rope_theta: 1000000,
      rms_norm_eps: 1e-6,
      max_position_embeddings: 40960,
      tie_word_embeddings: true,
    },
    { seed: 1 },
  );
  await decodeRate("Qwen3-0.6B-shaped (random)", qwen, 16, 8);
}

// --- kiln serve, 16 clients ---------------------------------------------------------------------
if (!argv.includes("--skip-serve")) {
  const serve = await startServe({ dir, backend, port: 0, maxConcurrency: 16, modelId: "agent" });
  try {
    const http = new HttpPolicy({ baseUrls: [serve.server.url], model: "agent" });
    const local = new LocalPolicy({ model: agent, tokenizer });
    const loadBefore = load();
    const [served, inProcess] = await interleaved([() => play(http, 16, 0), () => play(local, 16, 0)]);
    report(
      {
        case: "kiln serve greedy",
        metric: "episodes/s, 16 HTTP clients vs in-process concurrency 16",
        unit: "episodes/s",
        peer: "in-process LocalPolicy",
        note: `kiln serve --max-num-seqs 16 on ${backend} (model in its worker thread); trajectories served = in-process: ${served.last === inProcess.last}`,
      },
      EPISODES,
      served,
      inProcess,
      loadBefore,
    );
  } finally {
    await serve.close();
  }
}
rep.finish();
process.exit(0);

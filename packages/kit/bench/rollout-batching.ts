// `pnpm bench rollout [--json]` (second half; also alone as `pnpm bench rollout-batching`): continuous
// batching of generation (@kiln/models BatchScheduler), all figures from the same run:
//  - episodes/s of guess-number on the embedded agent model at concurrency 16 vs 1 (greedy and
//    temperature 1 seeded), against the same scheduler at concurrency 1 and against LocalPolicy
//    with batching off (one `generate` per call: the code before the scheduler); trajectories are
//    compared token for token;
//  - aggregate decode tokens/s of 16 sequences through the scheduler vs one static `generate`
//    batch of 16 (the ceiling), on the agent model and a Qwen3-0.6B-shaped random model (short);
//  - aggregate greedy decode tokens/s of 16 sequences on the agent model through the scheduler vs
//    llama.cpp's batched decoding (node-llama-cpp: one context with 16 sequences evaluating at once, so
//    its batch dispatcher puts all of them in each llama_decode), on the same weights (the model exported
//    to an f32 GGUF), the same prompts and lengths, the same thread count (`--threads`, default the
//    backend's own; run with --threads 1 for the 1-thread comparison);
//  - `kiln serve` (--max-num-seqs 16) with 16 concurrent clients vs in-process.
// Every comparison runs its contenders in interleaved rounds (A B A B …, after one warm-up each), so a
// change in the machine's load hits both sides alike; each row gives the median over rounds of the
// wall-clock rate and, in a second row, of the rate per CPU-second (process.cpuUsage: every thread of
// this process, the serve worker's and the kernels' worker threads included), which a shared machine
// disturbs far less than wall time. The load average before and after is in every row's note.
// Options: --backend NAME (default auto), --episodes N (default 16), --turns N (default 3),
// --rounds N (default 3), --threads N (kiln's backend threads; llama.cpp gets the same), --qwen-layers N
// (default 28; the Qwen3 row is 8-token prompts and 4 new tokens), --skip-episodes, --skip-qwen, --skip-llama-cpp, --skip-serve.
import { mkdtempSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { exportModelToGguf } from "@kiln/hub-io";
import { GuessNumberEnv, HttpPolicy, type Policy, type Trajectory, runEpisodes } from "@kiln/rollout";
import {
  BatchScheduler,
  CausalLM,
  type LlamaCppHandle,
  LocalPolicy,
  type Model,
  generate,
  loadLlamaCpp,
  loadModel,
  loadTokenizer,
  parameterShapes,
  parseDecoderConfig,
} from "@kiln/models";
import { Tensor, initBackend, nativeBackendInfo } from "@kiln/tensor";
import { BenchReporter } from "../../../tooling/src/bench.js";
import { agentModelDir } from "../src/agent-model/paths.js";
import { startServe } from "../src/serve.js";

const argv = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
const rep = new BenchReporter("rollout");
const threadsArg = argv.includes("--threads") ? Number(arg("threads", "")) : undefined;
if (threadsArg !== undefined && !(Number.isInteger(threadsArg) && threadsArg >= 1)) {
  process.stderr.write(`--threads must be a positive integer, got ${JSON.stringify(arg("threads", ""))}\n`);
  process.exit(2);
}
const choice = await initBackend(arg("backend", "auto") as Parameters<typeof initBackend>[0], {
  ...(threadsArg === undefined ? {} : { threads: threadsArg }),
});
const backend = choice.backend;
// The threads kiln's kernels use: native's BLAS threads; wasm's workers (min(2, cores) unless asked); js one.
const kilnThreads =
  backend === "native"
    ? (nativeBackendInfo()?.threads ?? 1)
    : backend === "wasm"
      ? (threadsArg ?? Math.min(2, availableParallelism()))
      : (threadsArg ?? 1);
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

for (const [label, temperature] of argv.includes("--skip-episodes")
  ? []
  : ([
      ["greedy", 0],
      ["temperature 1 seeded", 1],
    ] as const)) {
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
/**
 * A Qwen3-0.6B-shaped model (the real config's dims, `layers` of its 28 layers) with uniform random weights
 * from a linear congruential generator: createModel's counter-based normal init of its 600M values took
 * 128 s on this machine, this takes a few; decode speed does not depend on the values.
 */
function qwen3Shaped(layers: number): Model {
  const config = parseDecoderConfig({
    architectures: ["Qwen3ForCausalLM"],
    model_type: "qwen3",
    vocab_size: 151936,
    hidden_size: 1024,
    intermediate_size: 3072,
    num_hidden_layers: layers,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    rope_theta: 1000000,
    rms_norm_eps: 1e-6,
    max_position_embeddings: 40960,
    tie_word_embeddings: true,
  });
  let state = 1;
  const tensors = new Map<string, Tensor>();
  for (const [name, shape] of parameterShapes(config)) {
    const values = new Float32Array(shape.reduce((a, d) => a * d, 1));
    if (name.endsWith("norm.weight")) values.fill(1);
    else
      for (let i = 0; i < values.length; i++) {
        state = (Math.imul(state, 1664525) + 1013904223) >>> 0;
        values[i] = (state / 2 ** 32 - 0.5) * 0.07; // std 0.02, transformers' initializer_range
      }
    tensors.set(name, Tensor.fromHost(values, shape, "f32"));
  }
  return CausalLM.fromTensors(config, tensors);
}
if (!argv.includes("--skip-qwen")) {
  const layers = Number(arg("qwen-layers", "28"));
  if (!(Number.isInteger(layers) && layers >= 1 && layers <= 28)) {
    process.stderr.write(
      `--qwen-layers must be an integer in [1, 28], got ${JSON.stringify(arg("qwen-layers", ""))}\n`,
    );
    process.exit(2);
  }
  // 8-token prompts: the scheduler's 7 prefill rows per sequence fill one 128-row prefill forward (16 × 7 =
  // 112), as the static batch's one 128-row prefill; then 4 decode steps of 16 rows each.
  const made = performance.now();
  const qwen = qwen3Shaped(layers);
  process.stderr.write(
    `  Qwen3-0.6B-shaped model (${layers} layers) made in ${((performance.now() - made) / 1000).toFixed(1)} s\n`,
  );
  await decodeRate(`Qwen3-0.6B-shaped (random${layers === 28 ? "" : `, ${layers} of 28 layers`})`, qwen, 8, 4);
  for (const [, t] of qwen.stateDict()) t.dispose();
}

// --- against llama.cpp's batched decoding ---------------------------------------------------------
// node-llama-cpp's view of a context with several sequences (typed here: it is an optional dependency).
interface NlcBatchedSequence {
  evaluate(tokens: number[], options: { temperature: number; yieldEogToken: boolean }): AsyncGenerator<number>;
}
interface NlcBatchedContext {
  getSequence(): NlcBatchedSequence;
  dispose(): Promise<void>;
}

/** One sequence's greedy continuation in llama.cpp: `newTokens` tokens (EOG ones too, as kiln's empty stop list). */
async function llamaGreedy(seq: NlcBatchedSequence, prompt: number[], newTokens: number): Promise<number[]> {
  const out: number[] = [];
  for await (const t of seq.evaluate(prompt, { temperature: 0, yieldEogToken: true })) {
    out.push(t);
    if (out.length === newTokens) break;
  }
  return out;
}

async function llamaCppBatched(promptLength: number, newTokens: number) {
  let llama: LlamaCppHandle;
  try {
    llama = await loadLlamaCpp();
  } catch (e) {
    process.stderr.write(`  ${(e as Error).message}: no llama.cpp row\n`);
    return;
  }
  const tmp = mkdtempSync(join(tmpdir(), "kiln-batching-bench-"));
  try {
    const gguf = join(tmp, "agent.gguf");
    await exportModelToGguf(dir, gguf, { dtype: "f32" });
    const nlcModel = await llama.loadModel({ modelPath: gguf, gpuLayers: 0 });
    // F32 KV cache, no flash attention: kiln's numerics (llama.cpp's CPU flash attention computes in f16),
    // so the greedy tokens can be compared; contextSize is per sequence. One fresh context per run, all
    // made before timing: reusing sequences after clearHistory() changed later greedy tokens in a second
    // run here (node-llama-cpp 3.21.1), which a fresh context never did.
    const contexts: NlcBatchedContext[] = [];
    for (let r = 0; r <= ROUNDS; r++)
      contexts.push(
        (await nlcModel.createContext({
          sequences: 16,
          contextSize: promptLength + newTokens + 16,
          threads: kilnThreads,
          flashAttention: false,
          experimentalKvCacheKeyType: "F32",
          experimentalKvCacheValueType: "F32",
        } as Parameters<typeof nlcModel.createContext>[0])) as unknown as NlcBatchedContext,
      );
    try {
      const prompts = Array.from({ length: 16 }, (_, b) =>
        Array.from({ length: promptLength }, (_, i) => 3 + ((b * 37 + i * 11) % (agent.config.vocabSize - 3))),
      );
      const scheduler = new BatchScheduler(agent, { maxNumSeqs: 16 });
      const opts = { maxNewTokens: newTokens, greedy: true, stopTokenIds: [] as number[] };
      const loadBefore = load();
      let run = 0;
      const [kiln, lc] = await interleaved([
        () => Promise.all(prompts.map((p) => scheduler.generate(p, opts).then((o) => o.tokenIds))),
        () => {
          const ctx = contexts[run++];
          return Promise.all(prompts.map((p) => llamaGreedy(ctx.getSequence(), p, newTokens)));
        },
      ]);
      const equal = kiln.last.filter((t, b) => t.join() === lc.last[b].join()).length;
      report(
        {
          case: "decode agent model vs llama.cpp",
          metric: "tokens/s, 16 greedy sequences through the scheduler vs llama.cpp's batched decoding",
          unit: "tokens/s",
          peer: "llama.cpp, 16 sequences in one context (node-llama-cpp 3.21.1, CPU)",
          note: `same weights (f32 GGUF), ${promptLength}-token prompts, ${newTokens} new tokens each (prefill included), ${kilnThreads} thread(s) each, kiln on ${backend}, llama.cpp F32 KV cache without flash attention; greedy sequences equal: ${equal}/16`,
        },
        16 * newTokens,
        kiln,
        lc,
        loadBefore,
      );
    } finally {
      for (const ctx of contexts) await ctx.dispose();
      await nlcModel.dispose();
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
if (!argv.includes("--skip-llama-cpp")) await llamaCppBatched(32, 64);

// --- kiln serve, 16 clients ---------------------------------------------------------------------
if (!argv.includes("--skip-serve")) {
  // The worker's backend gets the in-process side's thread count (else its own default, 2 here).
  const serve = await startServe({
    dir,
    backend,
    port: 0,
    maxConcurrency: 16,
    modelId: "agent",
    ...(threadsArg === undefined ? {} : { threads: threadsArg }),
  });
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

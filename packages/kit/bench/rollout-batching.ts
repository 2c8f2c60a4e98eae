// `pnpm bench rollout [--json]` (second half; also alone as `pnpm bench rollout-batching`): continuous
// batching of generation (@kiln/models BatchScheduler), all figures from the same run:
//  - episodes/s of guess-number on the embedded agent model at concurrency 16 vs 1 (greedy and
//    temperature 1 seeded), against the same scheduler at concurrency 1 and against LocalPolicy
//    with batching off (one `generate` per call: the code before the scheduler); trajectories are
//    compared token for token;
//  - aggregate decode tokens/s of 16 sequences through the scheduler vs one static `generate`
//    batch of 16 (the ceiling), on the agent model and a Qwen3-0.6B-shaped random model (short);
//  - `kiln serve` (--max-num-seqs 16) with 16 concurrent clients vs in-process.
// Options: --backend NAME (default auto), --episodes N (default 16), --turns N (default 3),
// --skip-qwen, --skip-serve. The machine's load average is in every row's note (shared machines).
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
const load = () => `load ${loadavg()[0].toFixed(1)}`;
process.stderr.write(`rollout batching bench on ${choice.line ?? backend}\n`);

const dir = agentModelDir();
const agent = await loadModel(dir);
const tokenizer = await loadTokenizer(dir);

// --- episodes/s --------------------------------------------------------------------------------
const tokensOf = (ts: Trajectory[]) => JSON.stringify(ts.map((t) => t.turns.map((u) => u.completionTokenIds)));

async function play(policy: Policy, concurrency: number, temperature: number) {
  const t0 = performance.now();
  const r = await runEpisodes({
    makeEnv: () => new GuessNumberEnv(),
    policy,
    episodes: EPISODES,
    concurrency,
    baseSeed: 11,
    params: { temperature, maxTokens: 48 },
    limits: { maxTurns: TURNS },
  });
  return { eps: (EPISODES * 1000) / (performance.now() - t0), tokens: tokensOf(r.trajectories) };
}

let inProcess16 = 0;
for (const [label, temperature] of [
  ["greedy", 0],
  ["temperature 1 seeded", 1],
] as const) {
  const before = await play(new LocalPolicy({ model: agent, tokenizer, batching: false }), 1, temperature);
  const one = await play(new LocalPolicy({ model: agent, tokenizer }), 1, temperature);
  const many = await play(new LocalPolicy({ model: agent, tokenizer }), 16, temperature);
  if (temperature === 0) inProcess16 = many.eps;
  const same = many.tokens === one.tokens;
  const note = `agent model, ${EPISODES} guess-number episodes × ≤${TURNS} turns, ${backend}; trajectories c16 = c1: ${same}; ${load()}`;
  rep.add({
    case: `episodes ${label}`,
    metric: "episodes/s, concurrency 16 vs 1 (scheduler both)",
    unit: "episodes/s",
    better: "higher",
    kiln: many.eps,
    peer: "concurrency 1",
    peer_value: one.eps,
    note,
  });
  rep.add({
    case: `episodes ${label}`,
    metric: "episodes/s, concurrency 16 vs 1 with batching off (before)",
    unit: "episodes/s",
    better: "higher",
    kiln: many.eps,
    peer: "concurrency 1, no scheduler",
    peer_value: before.eps,
    note: `trajectories = unbatched: ${many.tokens === before.tokens}; ${load()}`,
  });
}

// --- aggregate decode tokens/s -----------------------------------------------------------------
async function decodeRate(name: string, model: Model, promptLength: number, newTokens: number) {
  const prompts = Array.from({ length: 16 }, (_, b) =>
    Array.from({ length: promptLength }, (_, i) => 3 + ((b * 37 + i * 11) % (model.config.vocabSize - 3))),
  );
  const opts = { maxNewTokens: newTokens, temperature: 1, seed: 5, stopTokenIds: [] as number[] };
  const t0 = performance.now();
  generate(model, prompts, opts);
  const staticRate = (16 * newTokens * 1000) / (performance.now() - t0);
  const scheduler = new BatchScheduler(model, { maxNumSeqs: 16 });
  const t1 = performance.now();
  await Promise.all(prompts.map((p, b) => scheduler.generate(p, { ...opts, seed: b })));
  const rate = (16 * newTokens * 1000) / (performance.now() - t1);
  rep.add({
    case: `decode ${name}`,
    metric: "tokens/s, 16 sequences through the scheduler vs one static generate batch of 16",
    unit: "tokens/s",
    better: "higher",
    kiln: rate,
    peer: "static generate (16 rows)",
    peer_value: staticRate,
    note: `${promptLength}-token prompts, ${newTokens} new tokens each (prefill included), ${backend}; ${load()}`,
  });
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
    const served = await play(http, 16, 0);
    rep.add({
      case: "kiln serve greedy",
      metric: "episodes/s, 16 HTTP clients vs in-process concurrency 16",
      unit: "episodes/s",
      better: "higher",
      kiln: served.eps,
      peer: "in-process LocalPolicy",
      peer_value: inProcess16,
      note: `kiln serve --max-num-seqs 16 on ${backend}; ${load()}`,
    });
  } finally {
    await serve.close();
  }
}
rep.finish();
process.exit(0);

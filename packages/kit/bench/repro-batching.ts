// `pnpm bench repro-batching [--json] [--rounds N] [--threads N] [--tasks N] [--skip-before] [--no-prefix-cache]`: what continuous batching
// saves `kiln repro oel`, on one representative piece of it — the base row's test-split evaluation
// (tau2 retail's first `heldout.oelTasks` test tasks × `eval.trials` greedy trials, ≤ rollout.maxTurns
// replies of ≤ rollout.maxTokens tokens, the scripted customer; reproConfig()'s sizes) on the embedded
// agent model, played three ways in interleaved rounds (after one warm-up each):
//  - before: LocalPolicy with batching off (one `generate` per reply, the code before the scheduler),
//    concurrency 16;
//  - the scheduler at concurrency 1 (episodes one at a time);
//  - the scheduler at the recipes' ROLLOUT_CONCURRENCY (16), which `kiln repro` runs.
// Rows give the median wall seconds and CPU seconds (process.cpuUsage: every thread of this process) per
// evaluation, and whether the trajectories are token for token the same; the load average before and
// after is in each note. On a shared machine CPU seconds are the steadier figure. Each evaluation starts
// with an empty prefix cache, as one in `kiln repro oel` does (training steps between evaluations drop it):
// it reuses rows within the evaluation only (an episode's earlier turns, the other trials' identical greedy
// prompts), never the warm-up's. `--no-prefix-cache` runs the scheduler without one (prefixCacheBytes 0).
import { loadavg } from "node:os";
import { tau2 } from "@kiln/benchmarks";
import { LocalPolicy, loadModel, loadTokenizer, ChatTemplate } from "@kiln/models";
import type { Trajectory } from "@kiln/rollout";
import { initBackend } from "@kiln/tensor";
import { BenchReporter } from "../../../tooling/src/bench.js";
import { agentModelDir } from "../src/agent-model/paths.js";
import { Tau2TasksEnvironment } from "../src/recipes/oel-tau2.js";
import { type OelTask, passHatKEval } from "../src/recipes/oel.js";
import { ROLLOUT_CONCURRENCY } from "../src/recipes/recipe-run.js";
import { reproConfig } from "../src/repro/config.js";
import { oelSplits } from "../src/repro/oel-repro.js";

const argv = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
const positive = (name: string, fallback: string) => {
  const v = Number(arg(name, fallback));
  if (!(Number.isInteger(v) && v >= 1)) {
    process.stderr.write(`--${name} must be a positive integer, got ${JSON.stringify(arg(name, fallback))}\n`);
    process.exit(2);
  }
  return v;
};
const ROUNDS = positive("rounds", "3");
const threads = argv.includes("--threads") ? positive("threads", "1") : undefined;
const choice = await initBackend("auto", threads === undefined ? {} : { threads });
process.stderr.write(`repro batching bench on ${choice.line ?? choice.backend}\n`);
const load = () => `load ${loadavg()[0].toFixed(1)}`;

const config = reproConfig();
if (argv.includes("--tasks")) config.heldout.oelTasks = positive("tasks", "1");
const c = config.oel;
const { test } = oelSplits(config);
const dir = agentModelDir();
const model = await loadModel(dir);
const tokenizer = await loadTokenizer(dir);
const chatTemplate = ChatTemplate.fromTokenizer(tokenizer);
const makeEnv = () => new Tau2TasksEnvironment(test, (task) => tau2.scriptedUser(task));
const tasks: OelTask[] = test.map((t) => ({ id: t.id, seed: 0, memory: "", state: { taskId: t.id } }));

const tokensOf = (ts: Trajectory[]) => JSON.stringify(ts.map((t) => t.turns.map((u) => u.completionTokenIds)));
async function evaluation(policy: LocalPolicy, concurrency: number): Promise<string> {
  policy.scheduler?.clearPrefixCache();
  const r = await passHatKEval({
    makeEnv,
    policy,
    tasks,
    trials: c.eval.trials,
    params: { maxTokens: c.rollout.maxTokens, temperature: c.eval.temperature },
    limits: { maxTurns: c.rollout.maxTurns },
    trialSeed: (_task, trial) => config.heldout.oelBaseSeed + trial,
    concurrency,
  });
  return tokensOf(r.trajectories);
}

const prefixCache = !argv.includes("--no-prefix-cache");
const policy = (batching: boolean) =>
  new LocalPolicy({
    model,
    tokenizer,
    chatTemplate,
    batching: batching ? (prefixCache ? {} : { prefixCacheBytes: 0 }) : false,
  });
const skipBefore = argv.includes("--skip-before");
const contenders = [
  { name: `scheduler, concurrency ${ROLLOUT_CONCURRENCY}`, policy: policy(true), concurrency: ROLLOUT_CONCURRENCY },
  { name: "scheduler, concurrency 1", policy: policy(true), concurrency: 1 },
  ...(skipBefore
    ? []
    : [
        {
          name: `before (batching off, concurrency ${ROLLOUT_CONCURRENCY})`,
          policy: policy(false),
          concurrency: ROLLOUT_CONCURRENCY,
        },
      ]),
];
const samples = contenders.map(() => ({ wall: [] as number[], cpu: [] as number[], tokens: "" }));
const loadBefore = load();
for (const [i, k] of contenders.entries()) samples[i].tokens = await evaluation(k.policy, k.concurrency);
for (let r = 0; r < ROUNDS; r++)
  for (const [i, k] of contenders.entries()) {
    const c0 = process.cpuUsage();
    const t0 = performance.now();
    const tokens = await evaluation(k.policy, k.concurrency);
    samples[i].wall.push((performance.now() - t0) / 1000);
    const cpu = process.cpuUsage(c0);
    samples[i].cpu.push((cpu.user + cpu.system) / 1e6);
    if (tokens !== samples[i].tokens) samples[i].tokens = "changed between rounds";
  }
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};
const rep = new BenchReporter("repro-batching");
const what = `kiln repro oel's base test-split evaluation: ${test.length} tau2 retail test tasks × ${c.eval.trials} trials, ≤${c.rollout.maxTurns} replies × ≤${c.rollout.maxTokens} tokens, agent model, ${choice.backend}, prefix cache ${prefixCache ? "on" : "off"}`;
const [many, ...peers] = samples;
const same = peers.every((p) => p.tokens === many.tokens);
for (const [i, s] of peers.entries()) {
  const peer = contenders[i + 1].name;
  const rounds = (xs: number[]) => xs.map((x) => x.toFixed(2)).join(", ");
  rep.add({
    case: "repro oel evaluation",
    metric: `wall seconds, scheduler at concurrency ${ROLLOUT_CONCURRENCY} vs ${peer}`,
    unit: "s",
    better: "lower",
    kiln: median(many.wall),
    peer,
    peer_value: median(s.wall),
    note: `${what}; ${ROUNDS} interleaved rounds, kiln [${rounds(many.wall)}] peer [${rounds(s.wall)}]; trajectories identical across all contenders: ${same}; ${loadBefore} → ${load()}`,
  });
  rep.add({
    case: "repro oel evaluation",
    metric: `CPU seconds, scheduler at concurrency ${ROLLOUT_CONCURRENCY} vs ${peer}`,
    unit: "CPU-s",
    better: "lower",
    kiln: median(many.cpu),
    peer,
    peer_value: median(s.cpu),
    note: `CPU seconds per evaluation kiln [${rounds(many.cpu)}] peer [${rounds(s.cpu)}]`,
  });
}
rep.finish();
process.exit(0);

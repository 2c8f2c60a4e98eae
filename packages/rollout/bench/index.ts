// `pnpm bench rollout [--json]`: harness overhead and serving throughput on loopback.
//  - toy env + scripted policy in-process: episodes/s of runEpisodes vs a bare loop (no parsing,
//    no records) — the ratio is the harness's own cost;
//  - the same episodes through createOpenAIServer + HttpPolicy with M concurrent clients, vs in-process;
//  - server latency p50/p99 under M concurrent chat requests vs a bare node:http JSON server (the
//    loopback floor), and the process's peak RSS;
//  - trajectory file appends/s (gzip members, fsync) vs plain JSONL without fsync.

import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BenchReporter, peakRssMiB, summarize, timeIt } from "../../../tooling/src/bench.js";
import {
  CharTokenizer,
  createOpenAIServer,
  GuessNumberEnv,
  guessNumberScript,
  HttpPolicy,
  type Message,
  runEpisodes,
  ScriptedPolicy,
  TrajectoryWriter,
} from "../src/index.js";

const rep = new BenchReporter("rollout");
const EPISODES = 400;
const script = guessNumberScript({ exploreRate: 0.3, malformedRate: 0.1 });
const policy = new ScriptedPolicy({ id: "stub", script });

// --- harness overhead ------------------------------------------------------------------------
async function bareLoop(n: number): Promise<void> {
  // The same conversation shape (structured tool calls, tool results) without parsing,
  // validation, trajectory records or the pool: what a hand-written loop would do.
  for (let i = 0; i < n; i++) {
    const env = new GuessNumberEnv();
    const messages: Message[] = [...env.reset({ seed: i }).messages];
    for (let t = 0; t < 32; t++) {
      const gen = await policy.generate(messages, env.tools(), { seed: t * 7919 + i });
      const m = /<tool_call>\n\{"name": "guess", "arguments": \{"n": (\d+)\}\}\n<\/tool_call>/.exec(gen.text);
      if (!m) {
        messages.push({ role: "assistant", content: gen.text }, { role: "user", content: "Error: bad call" });
        continue;
      }
      const id = `c${t}`;
      const args = { n: Number(m[1]) };
      const message: Message = {
        role: "assistant",
        content: null,
        tool_calls: [{ id, type: "function", function: { name: "guess", arguments: JSON.stringify(args) } }],
      };
      messages.push(message);
      const r = env.step({ message, toolCalls: [{ id, name: "guess", arguments: args }] });
      messages.push(...r.observations);
      if (r.done) break;
    }
  }
}
const harness = await timeIt(
  () => runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy, episodes: EPISODES, concurrency: 8 }),
  5,
  1,
);
const bare = await timeIt(() => bareLoop(EPISODES), 5, 1);
rep.add({
  case: `toy env, stub policy, ${EPISODES} episodes`,
  metric: "episodes/s",
  unit: "1/s",
  better: "higher",
  kiln: (EPISODES * 1000) / harness.median,
  peer: "bare loop",
  peer_value: (EPISODES * 1000) / bare.median,
});

// --- through the server ----------------------------------------------------------------------
const server = await createOpenAIServer({ policy, tokenizer: new CharTokenizer(), maxConcurrency: 16 });
const inproc = (EPISODES * 1000) / harness.median;
for (const m of [1, 4, 16]) {
  const http = new HttpPolicy({ baseUrls: server.url, model: "stub", id: "stub" });
  const n = 120;
  const t = await timeIt(
    () => runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy: http, episodes: n, concurrency: m }),
    3,
    1,
  );
  rep.add({
    case: `toy env via kiln serve, M=${m} clients`,
    metric: "episodes/s",
    unit: "1/s",
    better: "higher",
    kiln: (n * 1000) / t.median,
    peer: "in-process",
    peer_value: inproc,
  });
}

// --- latency under load ----------------------------------------------------------------------
const body = JSON.stringify({
  model: "stub",
  messages: [{ role: "user", content: "I picked a number between 1 and 100. Make a guess." }],
  tools: new GuessNumberEnv().tools(),
  logprobs: true,
  seed: 1,
});
const fixed = JSON.stringify(await (await fetch(`${server.url}/v1/chat/completions`, { method: "POST", body })).json());
const floor = createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(fixed) });
    res.end(fixed);
  });
});
await new Promise<void>((r) => floor.listen(0, "127.0.0.1", r));
const floorUrl = `http://127.0.0.1:${(floor.address() as AddressInfo).port}`;

async function load(url: string, clients: number, perClient: number): Promise<number[]> {
  const lat: number[] = [];
  await Promise.all(
    Array.from({ length: clients }, async () => {
      for (let i = 0; i < perClient; i++) {
        const t0 = performance.now();
        const res = await fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
        });
        await res.text();
        lat.push(performance.now() - t0);
      }
    }),
  );
  return lat;
}
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
for (const m of [1, 16]) {
  await load(server.url, m, 5);
  await load(floorUrl, m, 5);
  const k = await load(server.url, m, Math.ceil(800 / m));
  const f = await load(floorUrl, m, Math.ceil(800 / m));
  for (const p of [50, 99]) {
    rep.add({
      case: `chat completion latency, M=${m} concurrent`,
      metric: `p${p}`,
      unit: "ms",
      better: "lower",
      kiln: pct(k, p),
      peer: "bare node:http",
      peer_value: pct(f, p),
    });
  }
  rep.add({
    case: `chat completions, M=${m} concurrent`,
    metric: "requests/s",
    unit: "1/s",
    better: "higher",
    kiln: (k.length * 1000) / ((summarize(k).median * k.length) / m),
    peer: "bare node:http",
    peer_value: (f.length * 1000) / ((summarize(f).median * f.length) / m),
    note: "median-latency estimate: M / p50",
  });
}
rep.add({
  case: "bench process after load",
  metric: "peak RSS",
  unit: "MiB",
  better: "lower",
  kiln: peakRssMiB(),
  peer: "-",
  peer_value: null,
});
await server.close();
await new Promise<void>((r) => floor.close(() => r()));

// --- trajectory files ------------------------------------------------------------------------
const dir = mkdtempSync(join(tmpdir(), "kiln-bench-"));
const sample = (await runEpisodes({ makeEnv: () => new GuessNumberEnv(), policy, episodes: 200 })).trajectories;
async function writeAll(path: string, sync: boolean) {
  const w = await TrajectoryWriter.open(path, { mode: "overwrite", sync });
  for (const t of sample) await w.append(t);
  await w.close();
}
const gz = await timeIt(() => writeAll(join(dir, "a.jsonl.gz"), true), 3, 1);
const plain = await timeIt(() => writeAll(join(dir, "b.jsonl"), false), 3, 1);
rep.add({
  case: "trajectory appends (200 episodes)",
  metric: "episodes/s",
  unit: "1/s",
  better: "higher",
  kiln: (sample.length * 1000) / gz.median,
  peer: "plain JSONL, no fsync",
  peer_value: (sample.length * 1000) / plain.median,
  note: "kiln: gzip member + fsync per episode",
});
rmSync(dir, { recursive: true, force: true });
rep.finish();

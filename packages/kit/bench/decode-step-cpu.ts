// `pnpm bench decode-step-cpu [--threads N] [--rounds N]`: CPU time of 16 sequences × 64 new tokens (32-token
// prompts, temperature 1) on the embedded agent model, through the BatchScheduler and as one static
// `generate` batch of 16, in interleaved rounds after a warm-up of each. CPU time (process.cpuUsage, all
// threads) rather than wall time because it is what a shared machine disturbs least; with --threads 1 (the
// default) it is the calling thread's work alone. For a per-function breakdown run it under
// `node --cpu-prof --import tsx --conditions=source bench/decode-step-cpu.ts` from packages/kit.
import { BatchScheduler, generate, loadModel } from "@kiln/models";
import { initBackend } from "@kiln/tensor";
import { agentModelDir } from "../src/agent-model/paths.js";

const argv = process.argv.slice(2);
const arg = (name: string, fallback: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1] : fallback;
};
const threads = Number(arg("threads", "1"));
const rounds = Number(arg("rounds", "4"));
const choice = await initBackend(arg("backend", "native") as Parameters<typeof initBackend>[0], { threads });
const model = await loadModel(agentModelDir());
const prompts = Array.from({ length: 16 }, (_, b) =>
  Array.from({ length: 32 }, (_, i) => 3 + ((b * 37 + i * 11) % (model.config.vocabSize - 3))),
);
const opts = { maxNewTokens: 64, temperature: 1, seed: 5, stopTokenIds: [] as number[] };
const scheduler = new BatchScheduler(model, { maxNumSeqs: 16 });
const contenders: [string, () => Promise<unknown>][] = [
  ["scheduler", () => Promise.all(prompts.map((p, b) => scheduler.generate(p, { ...opts, seed: b })))],
  ["static generate", async () => generate(model, prompts, opts)],
];
for (const [, run] of contenders) await run();
const cpu: Record<string, number[]> = {};
for (let r = 0; r < rounds; r++)
  for (const [name, run] of contenders) {
    const c0 = process.cpuUsage();
    await run();
    const c = process.cpuUsage(c0);
    (cpu[name] ??= []).push((c.user + c.system) / 1000);
  }
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
const tokens = 16 * 64;
for (const [name, ms] of Object.entries(cpu))
  console.log(
    `${name}: CPU ms per run [${ms.map(Math.round).join(", ")}], median ${(tokens / (median(ms) / 1000)).toFixed(0)} tokens per CPU-s`,
  );
console.log(
  `scheduler / static = ${(median(cpu["static generate"]) / median(cpu.scheduler)).toFixed(2)} (${choice.line ?? choice.backend}, ${threads} thread${threads === 1 ? "" : "s"})`,
);
process.exit(0);

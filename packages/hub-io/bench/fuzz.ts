// Fuzz at benchmark scale: ≥ 100,000 random and mutated safetensors inputs through the reader.
// Every input must parse or throw SafetensorsError; RSS must stay flat. `tsx bench/fuzz.ts [N]`.
import { SafetensorsError, parseSafetensors, toFloat32 } from "../src/index.js";
import { fuzzInput, rng } from "../test/fuzz-inputs.js";

export function runFuzz(
  n: number,
  seed = 20261130,
): {
  inputs: number;
  accepted: number;
  crashes: number;
  rules: Record<string, number>;
  ms: number;
  rssGrowthMiB: number;
} {
  const r = rng(seed);
  const rules: Record<string, number> = {};
  let accepted = 0;
  let crashes = 0;
  const rss0 = process.memoryUsage().rss;
  const t0 = performance.now();
  for (let i = 0; i < n; i++) {
    const input = fuzzInput(r);
    try {
      for (const t of parseSafetensors(input).tensors.values()) {
        try {
          toFloat32(t);
        } catch (e) {
          if (!(e instanceof SafetensorsError)) throw e;
        }
      }
      accepted++;
    } catch (e) {
      if (e instanceof SafetensorsError) rules[e.rule] = (rules[e.rule] ?? 0) + 1;
      else {
        crashes++;
        if (crashes <= 3) console.error(`crash on input ${i}:`, e);
      }
    }
  }
  const ms = performance.now() - t0;
  return { inputs: n, accepted, crashes, rules, ms, rssGrowthMiB: (process.memoryUsage().rss - rss0) / 2 ** 20 };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const n = Number(process.argv[2] ?? 100_000);
  const res = runFuzz(n);
  console.log(JSON.stringify(res, null, 2));
  process.exit(res.crashes === 0 ? 0 : 1);
}

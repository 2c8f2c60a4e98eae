import { describe, expect, it } from "vitest";
import { SGD, Tensor } from "@kiln/tensor";
import { BatchScheduler, GenerationError, createModel, kvBytesPerPosition } from "../src/index.js";
import type { BatchSchedulerOptions, ScheduledScore } from "../src/index.js";
import type { GenerationOutput } from "../src/generate.js";
import { SCHEDULER_TEST_CONFIG } from "./helpers.js";

const config = SCHEDULER_TEST_CONFIG;
const model = createModel(config, { seed: 7, std: 0.4 });
const CHUNK = 8;
// A shared "system prompt" of 19 tokens, then each episode's own task.
const system = Array.from({ length: 19 }, (_, i) => (i * 13 + 5) % 95);
const task = (e: number) => Array.from({ length: 5 + e }, (_, i) => (i * 31 + e * 7) % 95);
const gen = { maxNewTokens: 6, temperature: 1, stopTokenIds: [] as number[], topLogprobs: 2 };

interface Turn {
  out: GenerationOutput;
  score: ScheduledScore;
}

/** An episode: each turn's prompt is the previous prompt + its reply + an observation (as an agent's chat grows). */
async function episode(s: BatchScheduler, e: number): Promise<Turn[]> {
  let promptIds = [...system, ...task(e)];
  const turns: Turn[] = [];
  for (let t = 0; t < 3; t++) {
    const out = await s.generate(promptIds, { ...gen, seed: e * 10 + t });
    // Teacher scoring of the same reply (a prompt the cache has just seen).
    const score = await s.score({ promptIds, completionIds: out.tokenIds }, { topLogprobs: 2 });
    turns.push({ out, score });
    promptIds = [...promptIds, ...out.tokenIds, 90 + t, (e + t) % 95, 3];
  }
  return turns;
}

async function play(options: BatchSchedulerOptions, concurrency: number, episodes = 6) {
  const s = new BatchScheduler(model, { maxNumSeqs: 16, prefillChunk: CHUNK, ...options });
  const results: Turn[][] = [];
  for (let first = 0; first < episodes; first += concurrency) {
    const ids = Array.from({ length: Math.min(concurrency, episodes - first) }, (_, i) => first + i);
    results.push(...(await Promise.all(ids.map((e) => episode(s, e)))));
  }
  return { results, stats: s.stats() };
}

describe("BatchScheduler prefix cache", () => {
  it("gives the same tokens, log-probs and scores with the cache on as off, at concurrency 1 and 16", async () => {
    const off = await play({ prefixCacheBytes: 0 }, 1);
    expect(off.stats.prefixHits).toBe(0);
    expect(off.stats.prefixCachedBytes).toBe(0);
    for (const concurrency of [1, 16]) {
      const on = await play({}, concurrency);
      expect(on.results).toEqual(off.results);
      // Hits happened and replaced prefill rows.
      expect(on.stats.prefixHits).toBeGreaterThan(10);
      expect(on.stats.prefixReusedRows).toBeGreaterThan(0);
      expect(on.stats.prefillRows + on.stats.prefixReusedRows).toBe(off.stats.prefillRows);
      expect(on.stats.prefillRows).toBeLessThan(off.stats.prefillRows * 0.6);
      expect(on.stats.prefixCachedBytes).toBeGreaterThan(0);
      expect(on.stats.prefixCachedBytes).toBeLessThanOrEqual(on.stats.prefixCacheBytes);
      expect(on.stats.kvReservedBytes).toBe(0);
    }
  });

  it("stays identical when a tiny cap evicts all the time", async () => {
    const off = await play({ prefixCacheBytes: 0 }, 16);
    const chunkBytes = CHUNK * kvBytesPerPosition(model.config);
    const tiny = await play({ prefixCacheBytes: 3 * chunkBytes }, 16);
    expect(tiny.results).toEqual(off.results);
    expect(tiny.stats.prefixEvictions).toBeGreaterThan(0);
    expect(tiny.stats.prefixHits).toBeGreaterThan(0);
    expect(tiny.stats.prefixCachedBytes).toBeLessThanOrEqual(3 * chunkBytes);
    // A cap below one chunk stores nothing.
    const none = await play({ prefixCacheBytes: chunkBytes - 1 }, 4, 2);
    expect(none.stats.prefixInserts).toBe(0);
    expect(none.stats.prefixHits).toBe(0);
  });

  it("drops the cache when the weights change (an optimizer step)", async () => {
    const own = createModel(config, { seed: 7, std: 0.4 });
    const s = new BatchScheduler(own, { prefillChunk: CHUNK });
    const promptIds = [...system, ...task(1)];
    await s.generate(promptIds, gen);
    expect(s.stats().prefixInserts).toBeGreaterThan(0);
    const [, weight] = own.namedParameters().find(([name]) => name.endsWith("q_proj.weight")) as [string, Tensor];
    weight.grad = Tensor.fromHost(
      Float32Array.from({ length: weight.size }, (_, i) => Math.sin(i)),
      weight.shape,
    );
    new SGD([weight], 0.5).step();
    weight.grad = null;
    const after = await s.generate(promptIds, gen);
    expect(s.stats().prefixClears).toBe(1);
    const fresh = await new BatchScheduler(own, { prefillChunk: CHUNK, prefixCacheBytes: 0 }).generate(promptIds, gen);
    expect(after).toEqual(fresh);
  });

  it("lets sequences that arrive together with the same prompt copy the chunks one of them computes", async () => {
    const promptIds = [...system, ...task(3), ...task(4)]; // 19 + 8 + 9 = 36 tokens: four full chunks of 8
    const greedy = { maxNewTokens: 4, temperature: 0, stopTokenIds: [] as number[] };
    const run = async (prefixCacheBytes?: number) => {
      const s = new BatchScheduler(model, { prefillChunk: CHUNK, maxPrefillForwards: 2, prefixCacheBytes });
      const outs = await Promise.all([0, 1, 2, 3].map(() => s.generate(promptIds, greedy)));
      return { outs, stats: s.stats() };
    };
    const off = await run(0);
    const on = await run();
    expect(on.outs).toEqual(off.outs);
    expect(off.stats.prefillRows).toBe(4 * 35);
    // One sequence computes the 4 full chunks; the others copy them (each still prefills its last 3 tokens).
    expect(on.stats.prefixReusedRows).toBe(3 * 32);
    expect(on.stats.prefillRows).toBe(32 + 4 * 3);
    expect(on.stats.prefixHits).toBe(3);
  });

  it("rejects a bad prefixCacheBytes with a GenerationError", () => {
    for (const bad of [-1, 1.5, Number.NaN, Number.POSITIVE_INFINITY])
      expect(() => new BatchScheduler(model, { prefixCacheBytes: bad })).toThrow(GenerationError);
  });
});

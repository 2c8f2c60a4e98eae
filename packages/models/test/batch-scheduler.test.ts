import { GenerationAbortedError } from "@kiln/rollout";
import { describe, expect, it } from "vitest";
import { linear, mul } from "@kiln/tensor";
import {
  BatchScheduler,
  DecodeWidths,
  Linear,
  GenerationError,
  LocalPolicy,
  createModel,
  generate,
  kvBytesPerPosition,
  linearsRowInvariant,
  scoreCompletions,
  scoreCompletionsTopK,
} from "../src/index.js";
import { qwen3Tokenizer } from "./qwen3-tokenizer.js";
import { SCHEDULER_TEST_CONFIG } from "./helpers.js";

const config = SCHEDULER_TEST_CONFIG;
const model = createModel(config, { seed: 7, std: 0.4 });
const prompt = (n: number, salt: number) => Array.from({ length: n }, (_, i) => (i * 31 + salt * 7) % 95);
const prompts = [prompt(5, 1), prompt(23, 2), prompt(1, 3), prompt(40, 4), prompt(9, 5), prompt(17, 6)];
const opts = { maxNewTokens: 12, temperature: 1, seed: 3, stopTokenIds: [] as number[], topLogprobs: 2 };

describe("BatchScheduler", () => {
  it("gives each sequence the same tokens and log-probs alone as in any batch, queueing past the cap", async () => {
    const alone = [];
    for (const [i, p] of prompts.entries()) {
      const s = new BatchScheduler(model, { maxNumSeqs: 4, prefillChunk: 8 });
      alone.push(await s.generate(p, { ...opts, seed: i }));
    }
    const shared = new BatchScheduler(model, { maxNumSeqs: 4, prefillChunk: 8 });
    // Arrivals spread over steps: three now, the rest while those decode.
    const first = prompts.slice(0, 3).map((p, i) => shared.generate(p, { ...opts, seed: i }));
    await new Promise((r) => setTimeout(r, 5));
    const rest = prompts.slice(3).map((p, i) => shared.generate(p, { ...opts, seed: i + 3 }));
    const together = await Promise.all([...first, ...rest]);
    expect(together).toEqual(alone);
    // Alone, each decode forward was one row wide (js gives every row the same bits at any width); together, wider.
    const padded = new BatchScheduler(model, { maxNumSeqs: 4, prefillChunk: 8, narrowDecode: false });
    expect(await padded.generate(prompts[1], { ...opts, seed: 1 })).toEqual(alone[1]);
    expect(Object.keys(padded.stats().decodeWidths)).toEqual(["4"]);
    const stats = shared.stats();
    expect(Object.keys(stats.decodeWidths).map(Number).sort()).toEqual([1, 2, 4]);
    expect(stats.peakRunning).toBe(4);
    expect(stats.completed).toBe(6);
    expect(stats.kvReservedBytes).toBe(0);
    expect(stats.running + stats.waiting).toBe(0);
    // The 40-token prompt was cut into chunks: the first 39 tokens take five prefill forwards of 8.
    expect(stats.prefillRows).toBe(prompts.reduce((a, p) => a + p.length - 1, 0));
  });

  it("narrows a decode forward only to widths whose rows come out with the same bits", async () => {
    const head = model.lmHead;
    expect(await linearsRowInvariant([head], 1, 4)).toBe(true);
    // A linear whose rows depend on the batch width (as a GEMM taking another code path would) is caught.
    const widthDependent = new Linear(head.weight);
    widthDependent.adapters.push({
      name: "width-dependent",
      enabled: true,
      forward: (x) => mul(linear(x, head.weight), x.shape[0] < 4 ? 2 ** -20 : 0),
    });
    expect(await linearsRowInvariant([head, widthDependent], 2, 4)).toBe(false);
    const widths = new DecodeWidths(() => [head, widthDependent], 4);
    expect(await widths.widthFor(1)).toBe(4);
    expect(await widths.widthFor(3)).toBe(4);
    widthDependent.adapters[0].enabled = false;
    // The adapters changed: checked again.
    expect(await widths.widthFor(1)).toBe(1);
    expect(await new DecodeWidths(() => [head], 4, false).widthFor(1)).toBe(4);
  });

  it("samples what generate samples from the same logits (greedy tokens equal, log-probs close)", async () => {
    const s = new BatchScheduler(model, { maxNumSeqs: 3, prefillChunk: 16 });
    const greedy = { maxNewTokens: 10, temperature: 0, stopTokenIds: [] as number[] };
    const outs = await Promise.all(prompts.map((p) => s.generate(p, greedy)));
    for (const [i, p] of prompts.entries()) {
      const [ref] = generate(model, [p], greedy);
      expect(outs[i].tokenIds).toEqual(ref.tokenIds);
      for (const [t, lp] of outs[i].logprobs.entries()) expect(lp).toBeCloseTo(ref.logprobs[t], 4);
    }
  });

  it("admits sequences only while their KV reservation fits the byte budget", async () => {
    const perPosition = kvBytesPerPosition(model.config);
    // Reservations (prompt + 11 positions) are 16, 34, 12, 51, 20, 28: at most three fit in 60 at once.
    const s = new BatchScheduler(model, { maxNumSeqs: 8, prefillChunk: 8, kvBudgetBytes: 60 * perPosition });
    const outs = await Promise.all(prompts.map((p, i) => s.generate(p, { ...opts, seed: i })));
    expect(outs.every((o) => o.tokenIds.length === 12)).toBe(true);
    const stats = s.stats();
    expect(stats.peakRunning).toBeGreaterThanOrEqual(2);
    expect(stats.peakRunning).toBeLessThanOrEqual(3);
    expect(stats.peakKvReservedBytes).toBeLessThanOrEqual(stats.kvBudgetBytes);
    expect(stats.kvReservedBytes).toBe(0);
    await expect(s.generate(prompt(200, 1), opts)).rejects.toThrow(GenerationError);
    await expect(s.generate(prompt(200, 1), opts)).rejects.toThrow(/budget/);
  });

  it("scores completions in the same batches as generation", async () => {
    const s = new BatchScheduler(model, { maxNumSeqs: 4, prefillChunk: 8 });
    const items = [
      { promptIds: prompt(6, 1), completionIds: prompt(11, 9) },
      { promptIds: prompt(1, 2), completionIds: prompt(3, 8) },
      { promptIds: prompt(19, 3), completionIds: prompt(2, 7) },
    ];
    const [gen, ...scores] = await Promise.all([
      s.generate(prompt(12, 4), opts),
      ...items.map((it) => s.score(it, { topLogprobs: 3 })),
    ]);
    expect(gen.tokenIds).toHaveLength(12);
    const ref = scoreCompletions(model, items);
    const refTop = scoreCompletionsTopK(model, items, 3);
    for (const [i, r] of scores.entries()) {
      expect(r.logprobs).toHaveLength(items[i].completionIds.length);
      for (const [t, lp] of r.logprobs.entries()) expect(lp).toBeCloseTo(ref[i][t], 4);
      expect(r.top?.map((x) => x.tokenIds)).toEqual(refTop.top[i].map((x) => x.tokenIds));
    }
    expect(await s.score({ promptIds: [1], completionIds: [] })).toEqual({ logprobs: [] });
  });

  it("ends an aborted sequence or one whose onToken throws, and only that one", async () => {
    const s = new BatchScheduler(model, { maxNumSeqs: 4, prefillChunk: 8 });
    const controller = new AbortController();
    let seen = 0;
    const aborted = s.generate(prompts[0], {
      ...opts,
      maxNewTokens: 50,
      signal: controller.signal,
      onToken: () => {
        if (++seen === 3) controller.abort();
      },
    });
    const failing = s.generate(prompts[1], {
      ...opts,
      onToken: () => {
        throw new Error("client went away");
      },
    });
    const fine = s.generate(prompts[2], opts);
    // Both handlers attached before either promise settles.
    await Promise.all([
      expect(aborted).rejects.toThrow(GenerationAbortedError),
      expect(failing).rejects.toThrow("client went away"),
    ]);
    expect((await fine).tokenIds).toHaveLength(12);
    expect(seen).toBeLessThan(6);
    expect(s.stats().kvReservedBytes).toBe(0);
    const pre = new AbortController();
    pre.abort();
    await expect(s.generate(prompts[0], { signal: pre.signal })).rejects.toThrow(GenerationAbortedError);
  });

  it("refuses bad requests with a GenerationError naming the problem", async () => {
    const s = new BatchScheduler(model);
    await expect(s.generate([], opts)).rejects.toThrow(/prompt is empty/);
    await expect(s.generate([1, 500], opts)).rejects.toThrow(/token 500 is outside/);
    await expect(s.generate([1], { temperature: -1 })).rejects.toThrow(/temperature/);
    await expect(s.score({ promptIds: [1], completionIds: [2] }, { topLogprobs: 0 })).rejects.toThrow(/topLogprobs/);
    expect(() => new BatchScheduler(model, { maxNumSeqs: 0 })).toThrow(/maxNumSeqs/);
  });

  it("LocalPolicy batches concurrent calls, and runs one at a time with batching: false", async () => {
    const tokenizer = qwen3Tokenizer();
    const big = createModel({ ...config, vocab_size: 151936, eos_token_id: 151645 }, { seed: 2, std: 0.4 });
    const batched = new LocalPolicy({ model: big, tokenizer, batching: { maxNumSeqs: 2, prefillChunk: 16 } });
    const serial = new LocalPolicy({ model: big, tokenizer, batching: false });
    expect(serial.scheduler).toBeNull();
    const ask = (p: LocalPolicy, i: number) =>
      p.generate([{ role: "user", content: `Question ${i}?` }], undefined, { maxTokens: 3, temperature: 0 });
    const together = await Promise.all([0, 1, 2].map((i) => ask(batched, i)));
    expect(batched.stats()?.peakRunning).toBe(2);
    for (const [i, g] of together.entries())
      expect(g.completionTokenIds).toEqual((await ask(serial, i)).completionTokenIds);
  });
});

import { Tensor, concat, narrow, noGrad } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import {
  GenerationError,
  type Model,
  generate,
  generateAsync,
  loadModel,
  scoreCompletions,
  scoreCompletionsTopK,
} from "../src/index.js";
import { maxAbsDiff, tinyDir } from "./helpers.js";

const models = new Map<string, Model>();
async function tiny(name: string): Promise<Model> {
  let m = models.get(name);
  if (!m) {
    m = await loadModel(tinyDir(name));
    models.set(name, m);
  }
  return m;
}

const PROMPTS = [
  [5, 17, 42, 9, 3],
  [60, 2],
  [11, 12, 13, 14, 15, 16, 17, 18],
];

describe("KV cache", () => {
  for (const name of ["llama", "qwen2", "qwen3"]) {
    it(`${name}: prefill + one-token decode steps equal a full recompute`, async () => {
      const model = await tiny(name);
      const seq = Int32Array.from([7, 3, 88, 41, 0, 19, 63, 5, 27, 50]);
      const T = seq.length;
      const full = noGrad(() => model.forward(new Tensor(seq, [1, T], "i32")));
      const cache = model.newCache(1);
      const parts = noGrad(() => {
        const out = [model.forward(new Tensor(seq.slice(0, 4), [1, 4], "i32"), { cache })];
        for (let t = 4; t < T; t++) out.push(model.forward(new Tensor(seq.slice(t, t + 1), [1, 1], "i32"), { cache }));
        return concat(out, 1);
      });
      expect(cache.length).toBe(T);
      expect(maxAbsDiff(parts.toFloat32Array(), full.toFloat32Array())).toBeLessThan(1e-5);
    });
  }

  it("left-padded prefill + decode equals the unpadded sequence", async () => {
    const model = await tiny("qwen3");
    const seq = [7, 3, 88, 41, 0, 19];
    const alone = noGrad(() => model.forward(new Tensor(Int32Array.from(seq), [1, 6], "i32")));
    const cache = model.newCache(1);
    const padded = noGrad(() => {
      const a = model.forward(new Tensor(Int32Array.from([0, 0, 0, ...seq.slice(0, 3)]), [1, 6], "i32"), {
        cache,
        attentionMask: [[0, 0, 0, 1, 1, 1]],
      });
      const b = model.forward(new Tensor(Int32Array.from(seq.slice(3)), [1, 3], "i32"), { cache });
      return concat([narrow(a, 1, 3), b], 1);
    });
    expect(maxAbsDiff(padded.toFloat32Array(), alone.toFloat32Array())).toBeLessThan(1e-5);
  });
});

describe("generate", () => {
  it("batched (left padding) equals unbatched, greedy", async () => {
    const model = await tiny("llama");
    const batched = generate(model, PROMPTS, { greedy: true, maxNewTokens: 8, stopTokenIds: [] });
    PROMPTS.forEach((p, i) => {
      const [alone] = generate(model, [p], { greedy: true, maxNewTokens: 8, stopTokenIds: [] });
      expect(batched[i].tokenIds).toEqual(alone.tokenIds);
      expect(maxAbsDiff(batched[i].logprobs, alone.logprobs)).toBeLessThan(1e-5);
    });
  });

  it("generateAsync (async logits reads, for device backends) returns exactly what generate does", async () => {
    const model = await tiny("qwen2");
    const opts = { temperature: 1.3, topK: 20, maxNewTokens: 6, stopTokenIds: [], seeds: [4, 5, 6], topLogprobs: 2 };
    const sync = generate(model, PROMPTS, opts);
    const viaAsync = await generateAsync(model, PROMPTS, opts);
    expect(viaAsync).toEqual(sync);
    expect(sync.every((o) => o.tokenIds.length === 6)).toBe(true);
  });

  it("batched equals unbatched when sampling with per-row seeds", async () => {
    const model = await tiny("qwen2");
    const opts = { temperature: 1.3, topK: 20, topP: 0.95, maxNewTokens: 6, stopTokenIds: [] };
    const batched = generate(model, PROMPTS, { ...opts, seeds: [1, 2, 3] });
    PROMPTS.forEach((p, i) => {
      const [alone] = generate(model, [p], { ...opts, seeds: [i + 1] });
      expect(batched[i].tokenIds).toEqual(alone.tokenIds);
    });
  });

  it("is reproducible from its seed and varies across seeds", async () => {
    const model = await tiny("qwen3");
    const run = (seed: number) =>
      generate(model, [PROMPTS[0]], { temperature: 1.5, maxNewTokens: 12, seed, stopTokenIds: [] })[0].tokenIds;
    expect(run(7)).toEqual(run(7));
    const others = [8, 9, 10].map(run);
    expect(others.some((o) => o.join() !== run(7).join())).toBe(true);
  });

  it("temperature 0, top-k 1, min-p 1 and a tiny top-p all reduce to greedy", async () => {
    const model = await tiny("qwen3");
    const base = { maxNewTokens: 6, stopTokenIds: [], seed: 3 };
    const greedy = generate(model, [PROMPTS[2]], { ...base, greedy: true })[0].tokenIds;
    expect(generate(model, [PROMPTS[2]], { ...base, temperature: 0 })[0].tokenIds).toEqual(greedy);
    expect(generate(model, [PROMPTS[2]], { ...base, topK: 1, temperature: 2 })[0].tokenIds).toEqual(greedy);
    expect(generate(model, [PROMPTS[2]], { ...base, minP: 1, temperature: 2 })[0].tokenIds).toEqual(greedy);
    expect(generate(model, [PROMPTS[2]], { ...base, topP: 1e-6, temperature: 2 })[0].tokenIds).toEqual(greedy);
  });

  it("repetition penalty changes greedy output away from repeats", async () => {
    const model = await tiny("llama");
    const plain = generate(model, [PROMPTS[1]], { greedy: true, maxNewTokens: 16, stopTokenIds: [] })[0].tokenIds;
    const penalised = generate(model, [PROMPTS[1]], {
      greedy: true,
      maxNewTokens: 16,
      stopTokenIds: [],
      repetitionPenalty: 100,
    })[0].tokenIds;
    const distinct = (xs: number[]) => new Set(xs).size;
    expect(distinct(penalised)).toBe(16);
    expect(distinct(penalised)).toBeGreaterThan(distinct(plain));
  });

  it("stops at a stop token (kept in ids, not counted past) and at max new tokens", async () => {
    const model = await tiny("llama");
    const [free] = generate(model, [PROMPTS[0]], { greedy: true, maxNewTokens: 10, stopTokenIds: [] });
    expect(free.tokenIds).toHaveLength(10);
    expect(free.finishReason).toBe("length");
    const stopAt = free.tokenIds[3];
    const first = free.tokenIds.indexOf(stopAt);
    const [stopped] = generate(model, [PROMPTS[0]], { greedy: true, maxNewTokens: 10, stopTokenIds: [stopAt] });
    expect(stopped.tokenIds).toEqual(free.tokenIds.slice(0, first + 1));
    expect(stopped.finishReason).toBe("stop");
    expect(stopped.stoppedBy).toBe(stopAt);
  });

  it("returns top-k alternatives whose best entry is the greedy token", async () => {
    const model = await tiny("qwen3");
    const [out] = generate(model, [PROMPTS[0]], { greedy: true, maxNewTokens: 4, topLogprobs: 3, stopTokenIds: [] });
    out.topLogprobs?.forEach((alts, i) => {
      expect(alts).toHaveLength(3);
      expect(alts[0].tokenId).toBe(out.tokenIds[i]);
      expect(alts[0].logprob).toBeCloseTo(out.logprobs[i], 6);
      expect(alts[0].logprob).toBeGreaterThanOrEqual(alts[1].logprob);
    });
  });

  it("rejects bad arguments with GenerationError", async () => {
    const model = await tiny("qwen3");
    expect(() => generate(model, [[]], {})).toThrow(GenerationError);
    expect(() => generate(model, [[1000]], {})).toThrow(/outside \[0, 96\)/);
    expect(() => generate(model, [[1]], { topP: 0 })).toThrow(/topP/);
    expect(() => generate(model, [[1]], { stopStrings: ["x"] })).toThrow(/tokenizer/);
  });
});

describe("scoreCompletions", () => {
  it("equals the log-probs generate reported for the same tokens (one batched forward)", async () => {
    const model = await tiny("qwen2");
    const outs = generate(model, PROMPTS, { temperature: 1, seed: 5, maxNewTokens: 7, stopTokenIds: [] });
    const scores = scoreCompletions(
      model,
      outs.map((o) => ({ promptIds: o.promptIds, completionIds: o.tokenIds })),
    );
    for (const [i, o] of outs.entries()) expect(maxAbsDiff(scores[i], o.logprobs)).toBeLessThan(1e-4);
  });
});

describe("scoreCompletionsTopK", () => {
  it("lists each position's k best tokens of the full log-softmax, and the same token log-probs as scoreCompletions", async () => {
    const model = await tiny("qwen3");
    const outs = generate(model, PROMPTS, { temperature: 1, seed: 8, maxNewTokens: 5, stopTokenIds: [] });
    const items = outs.map((o) => ({ promptIds: o.promptIds, completionIds: o.tokenIds }));
    const k = 4;
    const { logprobs, top } = scoreCompletionsTopK(model, items, k, { chunkRows: 2 });
    const plain = scoreCompletions(model, items);
    for (const [b, it] of items.entries()) {
      expect(maxAbsDiff(logprobs[b], plain[b])).toBeLessThan(1e-4);
      // Reference: the full logits of prompt + completion, log-softmax in float64, sorted.
      const seq = [...it.promptIds, ...it.completionIds];
      const logits = noGrad(() => model.forward(new Tensor(Int32Array.from(seq), [1, seq.length], "i32")));
      const V = logits.shape[2];
      const z = logits.toFloat32Array();
      expect(top[b]).toHaveLength(it.completionIds.length);
      for (let j = 0; j < it.completionIds.length; j++) {
        const o = (it.promptIds.length + j - 1) * V;
        const row = Array.from(z.subarray(o, o + V));
        const mx = Math.max(...row);
        const lse = mx + Math.log(row.reduce((a, v) => a + Math.exp(v - mx), 0));
        const order = row.map((v, i) => [v - lse, i] as const).sort((x, y) => y[0] - x[0]);
        expect(top[b][j].tokenIds).toEqual(order.slice(0, k).map(([, i]) => i));
        expect(
          maxAbsDiff(
            top[b][j].logprobs,
            order.slice(0, k).map(([v]) => v),
          ),
        ).toBeLessThan(1e-4);
      }
    }
    expect(() => scoreCompletionsTopK(model, items, 0)).toThrow(GenerationError);
  });
});

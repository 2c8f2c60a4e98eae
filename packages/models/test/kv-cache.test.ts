// Decode steps on a resident backend: intermediates go back to the pool each step, the cache keeps only
// its key/value buffers (grown by doubling, written in place), and KVCache.dispose returns them (the hidden
// states the head read wait for the collector); logits match the js reference. Then the ways a step reads the
// cache (in place for decode rows whose keys are one run; a contiguous copy otherwise; concatenated under a
// gradient tape) against a full recompute without a cache.
import {
  Tensor,
  backward,
  concat,
  disposeWasmBackend,
  initBackend,
  memory,
  narrow,
  noGrad,
  setBackend,
  sum,
  withBackend,
} from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type AttentionLayerCache, type KVCache, argmaxOf, createModel, kvBytesPerPosition } from "../src/index.js";
import { maxAbsDiff } from "./helpers.js";

const CONFIG = {
  architectures: ["LlamaForCausalLM"],
  model_type: "llama",
  vocab_size: 96,
  hidden_size: 32,
  intermediate_size: 48,
  num_hidden_layers: 2,
  num_attention_heads: 4,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-5,
  rope_theta: 10000,
  tie_word_embeddings: false,
  max_position_embeddings: 128,
};

beforeAll(async () => {
  await initBackend("wasm", { threads: 1, activate: false });
});
afterAll(() => {
  setBackend("js");
  disposeWasmBackend();
});

/** Bytes of every key/value buffer the cache holds. */
function bufferBytes(cache: KVCache): number {
  let bytes = 0;
  for (const l of cache.layers) if (l?.kind === "attention") bytes += 4 * ((l as AttentionLayerCache).k.size * 2);
  return bytes;
}

/** Greedy decode: prompt, then `steps` steps; the logits of every step and the live bytes after each. */
function decode(backend: string, steps: number) {
  return withBackend(backend, () =>
    noGrad(() => {
      const model = createModel(CONFIG, { seed: 3 });
      const cache = model.newCache(1);
      const base = memory(backend).liveBytes;
      let logits = model.forward(new Tensor(Int32Array.of(5, 17, 42, 8), [1, 4], "i32"), { cache, logitsToKeep: 1 });
      const all: Float32Array[] = [];
      const live: number[] = [];
      const held: number[] = [];
      const capacities: number[] = [];
      for (let s = 0; s < steps; s++) {
        const host = logits.toFloat32Array().slice();
        all.push(host);
        logits = model.forward(new Tensor(Int32Array.of(argmaxOf(host)), [1, 1], "i32"), { cache });
        live.push(memory(backend).liveBytes - base);
        held.push(bufferBytes(cache));
        capacities.push((cache.layers[0] as AttentionLayerCache).k.shape[2]);
      }
      cache.dispose();
      return { all, live, held, capacities, afterDispose: memory(backend).liveBytes - base, model };
    }),
  );
}

describe("KVCache on a resident backend", () => {
  it("keeps only the cache live between steps and frees it on dispose; logits match js", () => {
    const steps = 16;
    const wasm = decode("wasm", steps);
    const js = decode("js", steps);
    for (let s = 0; s < steps; s++) {
      expect(argmaxOf(wasm.all[s])).toBe(argmaxOf(js.all[s]));
      for (let i = 0; i < wasm.all[s].length; i++) expect(Math.abs(wasm.all[s][i] - js.all[s][i])).toBeLessThan(1e-5);
    }
    const perPosition = kvBytesPerPosition(wasm.model.config);
    // The buffers grow by doubling: a 4-token prompt starts at 16 positions, which last 12 steps (16 tokens), then
    // 32. Besides them, a step leaves at most its hidden states (D floats) and the heap's size-class rounding.
    expect(wasm.capacities).toEqual([...Array(12).fill(16), ...Array(steps - 12).fill(32)]);
    for (let s = 0; s < steps; s++) {
      expect(wasm.held[s]).toBe(wasm.capacities[s] * perPosition);
      expect(wasm.live[s] - wasm.held[s]).toBeLessThanOrEqual((s + 2) * CONFIG.hidden_size * 4 + 4096);
    }
    // Steps within a capacity allocate nothing that stays: the growth is the hidden states alone.
    expect(wasm.live[10] - wasm.live[1]).toBeLessThanOrEqual(9 * CONFIG.hidden_size * 4 + 1024);
    // What may remain are the final hidden states of each forward (D floats, [1, 1, D]): the head's views of
    // them live outside any scope and are released when the garbage collector finalizes them.
    expect(wasm.afterDispose).toBeLessThanOrEqual((steps + 1) * CONFIG.hidden_size * 4);
  });
});

describe("KVCache reads", () => {
  const model = createModel(CONFIG, { seed: 5 });
  const full = (ids: number[][], mask?: number[][]) =>
    noGrad(() =>
      model
        .forward(
          ids.map((r) => r),
          mask ? { attentionMask: mask } : {},
        )
        .toFloat32Array(),
    );
  /** Prefill `prefill` tokens per row, then one token per step: logits of every position, [B, T, V] row-major. */
  function stepwise(ids: number[][], mask: number[][], prefill: number): Float32Array {
    const B = ids.length;
    const T = ids[0].length;
    const cache = model.newCache(B);
    const out = noGrad(() => {
      const pieces = [
        model.forward(
          ids.map((r) => r.slice(0, prefill)),
          { cache, attentionMask: mask.map((r) => r.slice(0, prefill)) },
        ),
      ];
      for (let t = prefill; t < T; t++)
        pieces.push(
          model.forward(
            ids.map((r) => [r[t]]),
            { cache, attentionMask: mask.map((r) => [r[t]]) },
          ),
        );
      return concat(pieces, 1).toFloat32Array();
    });
    cache.dispose();
    return out;
  }
  const V = CONFIG.vocab_size;
  /** Logits of the positions where `mask` is 1 (what a padded position's output is does not matter). */
  const kept = (logits: Float32Array, mask: number[][]) =>
    mask.flatMap((r, b) =>
      r.flatMap((m, t) => (m ? [...logits.subarray((b * r.length + t) * V, (b * r.length + t + 1) * V)] : [])),
    );
  const ids = Array.from({ length: 3 }, (_, b) => Array.from({ length: 40 }, (_, t) => (t * 13 + b * 7 + 1) % V));

  it("decode rows that are left-padded, finished (masked tail) or unpadded read the cache in place; equal a recompute", () => {
    // Row 0 unpadded; row 1 left-padded by 5; row 2 left-padded by 2 and finished after position 30. 40 positions
    // from a 3-token prefill cross two capacity doublings (16, 32, 64).
    const mask = [
      Array(40).fill(1),
      Array.from({ length: 40 }, (_, t) => (t < 5 ? 0 : 1)),
      Array.from({ length: 40 }, (_, t) => (t < 2 || t > 30 ? 0 : 1)),
    ];
    const a = kept(stepwise(ids, mask, 3), mask);
    const b = kept(full(ids, mask), mask);
    expect(maxAbsDiff(a, b)).toBeLessThan(1e-5);
  });

  it("a mask with holes (not one run per row) and a chunked prefill read a contiguous copy; equal a recompute", () => {
    const mask = [
      Array.from({ length: 40 }, (_, t) => (t % 7 === 3 ? 0 : 1)),
      Array(40).fill(1),
      Array.from({ length: 40 }, (_, t) => (t < 4 ? 0 : 1)),
    ];
    expect(maxAbsDiff(kept(stepwise(ids, mask, 20), mask), kept(full(ids, mask), mask))).toBeLessThan(1e-5);
    const cache = model.newCache(1);
    const chunked = noGrad(() =>
      concat(
        [
          model.forward([ids[0].slice(0, 10)], { cache }),
          model.forward([ids[0].slice(10, 25)], { cache }),
          model.forward([ids[0].slice(25)], { cache }),
        ],
        1,
      ).toFloat32Array(),
    );
    expect(maxAbsDiff(chunked, full([ids[0]]))).toBeLessThan(1e-5);
  });

  it("a decode step equals a recompute, and a fresh cache fed the same steps gives the same bits", () => {
    const seq = ids[0].slice(0, 12);
    const cache = model.newCache(1);
    const last = noGrad(() => {
      model.forward([seq.slice(0, 11)], { cache });
      return model.forward([seq.slice(11)], { cache }).toFloat32Array();
    });
    const recompute = full([seq]).subarray(11 * V, 12 * V);
    expect(maxAbsDiff(last, recompute)).toBeLessThan(1e-5);
    // And a second cache fed the same steps gives the same bits (no stale buffer memory is read).
    const again = model.newCache(1);
    const last2 = noGrad(() => {
      model.forward([seq.slice(0, 11)], { cache: again });
      return model.forward([seq.slice(11)], { cache: again }).toFloat32Array();
    });
    expect(last2).toEqual(last);
  });

  it("under a gradient tape concatenates (differentiable) and gives the untaped in-place read's bits (js)", () => {
    const trainable = createModel(CONFIG, { seed: 5 });
    const params = trainable.requireGrad();
    const cache = trainable.newCache(1);
    const first = trainable.forward([ids[0].slice(0, 6)], { cache });
    const step = trainable.forward([ids[0].slice(6, 7)], { cache });
    const entry = cache.layers[0] as AttentionLayerCache;
    expect(entry.k.shape[2]).toBe(7);
    expect(entry.k.requiresGrad).toBe(true);
    const untaped = model.newCache(1);
    const ref = noGrad(() => {
      model.forward([ids[0].slice(0, 6)], { cache: untaped });
      return model.forward([ids[0].slice(6, 7)], { cache: untaped }).toFloat32Array();
    });
    // The taped step runs attention over the concatenated keys (the cache's read before in-place buffers); the
    // in-place read (raggedDecodeAttention) does the same arithmetic for one query row.
    expect(step.toFloat32Array()).toEqual(ref);
    // The step's loss reaches the embedding row of the first token, which only the cached keys and values carry.
    backward(sum(narrow(step, 2, 0, 1)));
    const embed = trainable.embedTokens.grad?.toFloat32Array() ?? new Float32Array(0);
    const D = CONFIG.hidden_size;
    expect(embed.subarray(ids[0][0] * D, (ids[0][0] + 1) * D).some((x) => x !== 0)).toBe(true);
    expect(first.shape).toEqual([1, 6, V]);
    expect(params.length).toBeGreaterThan(0);
  });
});

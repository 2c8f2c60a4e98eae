// Decode steps on a resident backend: intermediates go back to the pool each step, the cache keeps only
// its current keys/values, and KVCache.dispose returns them (the hidden states the head read wait for
// the collector); logits match the js reference.
import { Tensor, disposeWasmBackend, initBackend, memory, noGrad, setBackend, withBackend } from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { argmaxOf, createModel, kvBytesPerPosition } from "../src/index.js";

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
      for (let s = 0; s < steps; s++) {
        const host = logits.toFloat32Array().slice();
        all.push(host);
        logits = model.forward(new Tensor(Int32Array.of(argmaxOf(host)), [1, 1], "i32"), { cache });
        live.push(memory(backend).liveBytes - base);
      }
      cache.dispose();
      return { all, live, afterDispose: memory(backend).liveBytes - base, model };
    }),
  );
}

describe("KVCache on a resident backend", () => {
  it("keeps only the cache live between steps and frees it on dispose; logits match js", () => {
    const steps = 12;
    const wasm = decode("wasm", steps);
    const js = decode("js", steps);
    for (let s = 0; s < steps; s++) {
      expect(argmaxOf(wasm.all[s])).toBe(argmaxOf(js.all[s]));
      for (let i = 0; i < wasm.all[s].length; i++) expect(Math.abs(wasm.all[s][i] - js.all[s][i])).toBeLessThan(1e-5);
    }
    const perPosition = kvBytesPerPosition(wasm.model.config);
    // Each step adds one position to the cache and nothing else stays allocated (the heap rounds blocks up
    // to size classes, so allow one class step per layer tensor).
    const growth = wasm.live[steps - 1] - wasm.live[1];
    expect(growth).toBeGreaterThanOrEqual((steps - 2) * perPosition);
    expect(growth).toBeLessThanOrEqual(2 * (steps - 2) * perPosition + 4 * CONFIG.num_hidden_layers * 1024);
    // What may remain are the final hidden states of each forward (D floats, [1, 1, D]): the head's views of
    // them live outside any scope and are released when the garbage collector finalizes them.
    expect(wasm.afterDispose).toBeLessThanOrEqual((steps + 1) * CONFIG.hidden_size * 4);
  });
});

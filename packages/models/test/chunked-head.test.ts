// The row-chunked head → log-prob path against the full-logits path, and the memory it saves.
import { Tensor, backward, memory, mul, narrow, noGrad, reshape, sum, tidy, tokenLogProbs } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { type CausalLM, createModel, headTokenLogProbs, loadModel, scoreCompletions } from "../src/index.js";
import { FIXTURES, maxAbsDiff, tinyDir } from "./helpers.js";

function targetsFor(ids: Int32Array, B: number, T: number, ignoreEvery: number): Int32Array {
  const t = new Int32Array(B * T);
  for (let i = 0; i < B * T; i++) t[i] = i % ignoreEvery === 0 ? -100 : ids[(i + 1) % (B * T)];
  return t;
}

/** Gradients of Σ w·log p through the full logits and through the chunked head. */
function bothPaths(model: CausalLM, ids: Tensor, targets: Tensor, chunkRows: number) {
  const params = model.requireGrad();
  const weights = new Tensor(
    Float32Array.from({ length: targets.size }, (_, i) => 0.5 + (i % 7) / 7),
    targets.shape,
  );
  const run = (chunked: boolean) => {
    for (const p of params) p.grad = null;
    const lp = chunked
      ? model.tokenLogProbs(ids, targets, { chunkRows })
      : reshape(
          tokenLogProbs(
            reshape(model.forward(ids), [targets.size, model.config.vocabSize]),
            reshape(targets, [targets.size]),
          ),
          targets.shape,
        );
    backward(sum(mul(lp, weights)));
    return { lp: lp.toFloat32Array(), grads: params.map((p) => (p.grad as Tensor).toFloat32Array()) };
  };
  const full = run(false);
  const chunked = run(true);
  model.requireGrad(false);
  return { full, chunked };
}

describe("headTokenLogProbs", () => {
  for (const [label, source] of [
    ["qwen3 (untied head)", tinyDir("qwen3")],
    ["qwen2 (tied head)", tinyDir("qwen2")],
    ["qwen3.5 hybrid", `${FIXTURES}/qwen3_5/text`],
  ] as const) {
    it(`${label}: values and every parameter's gradient equal the full-logits path (ragged chunks, ignored rows)`, async () => {
      const model = await loadModel(source);
      const B = 2;
      const T = 7;
      const ids = Int32Array.from({ length: B * T }, (_, i) => (i * 13 + 5) % 64);
      const targets = new Tensor(targetsFor(ids, B, T, 4), [B, T], "i32");
      const { full, chunked } = bothPaths(model, new Tensor(ids, [B, T], "i32"), targets, 3);
      expect(maxAbsDiff(chunked.lp, full.lp)).toBeLessThan(1e-5);
      for (const [i, g] of chunked.grads.entries()) expect(maxAbsDiff(g, full.grads[i])).toBeLessThan(1e-5);
    });
  }

  for (const chunkRows of [3, 64])
    it(`training steps through the chunked head (${chunkRows === 3 ? "five chunks" : "one chunk"}) leave no memory behind`, async () => {
      const model = await loadModel(tinyDir("qwen3"));
      const params = model.requireGrad();
      const B = 2;
      const T = 7;
      const ids = Int32Array.from({ length: B * T }, (_, i) => (i * 13 + 5) % 64);
      const targets = new Tensor(targetsFor(ids, B, T, 4), [B, T], "i32");
      const live: number[] = [];
      for (let step = 0; step < 4; step++) {
        tidy(() => {
          for (const p of params) {
            p.grad?.dispose();
            p.grad = null;
          }
          backward(sum(model.tokenLogProbs(new Tensor(ids, [B, T], "i32"), targets, { chunkRows })));
        });
        live.push(memory().allocations);
      }
      expect(live.slice(1), `live allocations after each step: ${live.join(", ")}`).toEqual([
        live[0],
        live[0],
        live[0],
      ]);
    });

  it("chunkedLogits projects rows to exactly the forward's logits", async () => {
    const model = await loadModel(tinyDir("qwen3"));
    const ids = new Tensor(Int32Array.from([4, 8, 15, 16, 23, 42]), [2, 3], "i32");
    const full = noGrad(() => model.forward(ids)).toFloat32Array();
    const c = noGrad(() => model.chunkedLogits(ids, { chunkRows: 2 }));
    expect(c.vocab).toBe(model.config.vocabSize);
    const rows = noGrad(() => c.project(reshape(c.hidden, [6, model.config.hiddenSize]))).toFloat32Array();
    expect(maxAbsDiff(rows, full)).toBe(0);
  });

  it("rejects mismatched targets by name", async () => {
    const model = await loadModel(tinyDir("qwen3"));
    const h = noGrad(() => model.hiddenStates(new Tensor(Int32Array.from([1, 2, 3]), [1, 3], "i32")));
    expect(() => headTokenLogProbs(model.lmHead, h, new Tensor(Int32Array.from([1, 2]), [2], "i32"))).toThrow(
      /targets i32 \[2\] must be i32 with one target per hidden row \(3\)/,
    );
  });

  it("scoring through the chunked head equals log-softmax of the full logits", async () => {
    const model = await loadModel(tinyDir("llama"));
    const items = [
      { promptIds: [5, 17, 42], completionIds: [9, 3, 77, 1] },
      { promptIds: [60], completionIds: [2, 8] },
    ];
    const scores = scoreCompletions(model, items);
    for (const [b, it] of items.entries()) {
      const seq = [...it.promptIds, ...it.completionIds];
      const logits = noGrad(() => model.forward(new Tensor(Int32Array.from(seq), [1, seq.length], "i32")));
      const P = it.promptIds.length;
      const rows = reshape(narrow(logits, 1, P - 1, seq.length - 1), [it.completionIds.length, model.config.vocabSize]);
      const want = tokenLogProbs(rows, new Tensor(Int32Array.from(it.completionIds), [it.completionIds.length], "i32"));
      expect(maxAbsDiff(scores[b], want.toFloat32Array())).toBeLessThan(1e-5);
    }
  });
});

describe("training memory", () => {
  it("a training step at T = 1,024 never allocates a [T, V] float array", () => {
    const V = 16384;
    const T = 1024;
    const model = createModel(
      {
        architectures: ["Qwen3ForCausalLM"],
        vocab_size: V,
        hidden_size: 16,
        intermediate_size: 32,
        num_hidden_layers: 1,
        num_attention_heads: 2,
        num_key_value_heads: 1,
        head_dim: 8,
        tie_word_embeddings: true,
      },
      { seed: 1 },
    );
    const params = model.requireGrad();
    const ids = new Tensor(
      Int32Array.from({ length: T }, (_, i) => (i * 7919) % V),
      [1, T],
      "i32",
    );
    const targets = new Tensor(
      Int32Array.from({ length: T }, (_, i) => (i * 104729 + 1) % V),
      [1, T],
      "i32",
    );
    // Record the length of every Float32Array created during the step (host and js-backend storage).
    const Original = globalThis.Float32Array;
    let largest = 0;
    class Tracked extends Original {
      // biome-ignore lint/suspicious/noExplicitAny: mirrors the typed-array constructor overloads
      constructor(...args: any[]) {
        super(...(args as []));
        if (this.length > largest) largest = this.length;
      }
      static override [Symbol.hasInstance](x: unknown): boolean {
        return x instanceof Original;
      }
    }
    globalThis.Float32Array = Tracked as unknown as Float32ArrayConstructor;
    let loss: number;
    try {
      const lp = model.tokenLogProbs(ids, targets, { checkpointLayers: true, chunkRows: 64 });
      const l = mul(sum(lp), -1 / T);
      backward(l);
      loss = l.item();
    } finally {
      globalThis.Float32Array = Original;
    }
    expect(Number.isFinite(loss)).toBe(true);
    expect(params.every((p) => p.grad !== null)).toBe(true);
    // 64 rows of logits (1 Mi values) bound the step; [T, V] would be 16 Mi.
    expect(largest).toBeGreaterThanOrEqual(64 * V);
    expect(largest).toBeLessThan((T * V) / 8);
  });
});

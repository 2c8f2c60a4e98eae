// generate and the scoring helpers on a backend whose memory the host cannot read synchronously (what
// WebGPU is): the sync helpers refuse with a SyncReadError naming their async variant, before any work,
// and the async variants return exactly what the sync ones return on js. The backend here runs the js
// kernels on memory it only hands out through `await read()`, so this suite runs on every machine; the
// webgpu suite (packages/tensor/test/webgpu) checks the same on the real device where one exists.
import * as T from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  GenerationError,
  type Model,
  SyncReadError,
  generate,
  generateAsync,
  loadModel,
  scoreCompletions,
  scoreCompletionsAsync,
  scoreCompletionsTopK,
  scoreCompletionsTopKAsync,
} from "../src/index.js";
import { tinyDir } from "./helpers.js";

const HIDDEN = "host-hidden-test";

const hiddenStorage: T.StorageBackend<T.StorageArray, T.StorageArray> = {
  name: HIDDEN,
  hostVisible: false,
  epoch: 0,
  adoptsUploads: false,
  releaseOnGc: false,
  alloc: (dtype, size) => T.allocate(dtype, size),
  upload: (host) => host.slice() as T.StorageArray,
  view: (native, _dtype, offset, length) => native.subarray(offset, offset + length) as T.StorageArray,
  read: (native, _dtype, offset, length) => Promise.resolve(native.slice(offset, offset + length) as T.StorageArray),
  release: () => {},
  memory: () => ({ liveBytes: 0, pooledBytes: 0, peakBytes: 0, allocations: 0 }),
};

/** Run `fn` with the hidden backend active across its awaits. */
async function onHidden<R>(fn: () => Promise<R> | R): Promise<R> {
  const previous = T.getBackend();
  T.setBackend(HIDDEN);
  try {
    return await fn();
  } finally {
    T.setBackend(previous);
  }
}

const PROMPTS = [
  [5, 17, 42, 9, 3],
  [60, 2],
];

describe("helpers that read tensors, on a backend the host cannot read synchronously", () => {
  let onJs: Model;
  let hidden: Model;
  beforeAll(async () => {
    T.registerBackend(hiddenStorage as T.StorageBackend, T.backendKernels("js"));
    onJs = await loadModel(tinyDir("qwen3"));
    hidden = await onHidden(() => loadModel(tinyDir("qwen3")));
  });
  afterAll(() => T.unregisterBackend(HIDDEN));

  it("the model's weights really live there (a plain read is refused by @kiln/tensor)", () => {
    const [, w] = hidden.namedParameters()[0];
    expect(w.backend).toBe(HIDDEN);
    expect(() => w.dataSync()).toThrow(T.DataSyncError);
  });

  it("generate throws SyncReadError naming generateAsync (not tensor's dataSync advice); generateAsync equals js", async () => {
    const opts = { temperature: 1.2, topK: 20, maxNewTokens: 5, stopTokenIds: [], seeds: [3, 4], topLogprobs: 2 };
    const err = await onHidden(() => {
      try {
        generate(hidden, PROMPTS, opts);
      } catch (e) {
        return e;
      }
    });
    expect(err).toBeInstanceOf(SyncReadError);
    expect(err).toMatchObject({ helper: "generate", asyncVariant: "generateAsync", backend: HIDDEN });
    expect(String((err as Error).message)).toMatch(/await generateAsync/);
    expect(String((err as Error).message)).not.toMatch(/dataSync/);
    const want = generate(onJs, PROMPTS, opts);
    expect(await onHidden(() => generateAsync(hidden, PROMPTS, opts))).toEqual(want);
  });

  it("scoreCompletions and scoreCompletionsTopK: SyncReadError naming their async variants, which equal js", async () => {
    const items = generate(onJs, PROMPTS, { temperature: 1, seed: 9, maxNewTokens: 4, stopTokenIds: [] }).map((o) => ({
      promptIds: o.promptIds,
      completionIds: o.tokenIds,
    }));
    await onHidden(() => {
      expect(() => scoreCompletions(hidden, items)).toThrow(SyncReadError);
      expect(() => scoreCompletions(hidden, items)).toThrow(/await scoreCompletionsAsync/);
      expect(() => scoreCompletionsTopK(hidden, items, 3)).toThrow(/await scoreCompletionsTopKAsync/);
    });
    expect(await onHidden(() => scoreCompletionsAsync(hidden, items))).toEqual(scoreCompletions(onJs, items));
    expect(await onHidden(() => scoreCompletionsTopKAsync(hidden, items, 3, { chunkRows: 2 }))).toEqual(
      scoreCompletionsTopK(onJs, items, 3, { chunkRows: 2 }),
    );
  });

  it("weights on the device but the js backend active: tensor's error saying how to move them", () => {
    expect(() => generate(hidden, PROMPTS, { maxNewTokens: 1 })).toThrow(/await toBackend/);
  });

  it("forward refuses an attention mask tensor it cannot read, naming the host forms it takes", async () => {
    await onHidden(() => {
      const mask = T.Tensor.fromHost(Int32Array.of(1, 1), [1, 2], "i32");
      expect(() =>
        T.noGrad(() => hidden.forward(new T.Tensor(Int32Array.of(5, 6), [1, 2], "i32"), { attentionMask: mask })),
      ).toThrow(GenerationError);
    });
  });
});

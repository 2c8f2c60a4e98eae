// The batching scheduler (@kiln/models BatchScheduler) on the webgpu backend: stories260K greedy through
// shared decode steps gives the js backend's tokens, and a prompt decoded alone gives what it gets in a batch.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// Relative imports: @kiln/tensor has no dependency on the packages built on it.
import { BatchScheduler, type CausalLM, loadStories260K } from "../../../models/src/index.js";
import * as T from "../../src/index.js";
import { openWebGPU, reportMissing } from "./setup.js";

const greedyFixture = JSON.parse(
  readFileSync(new URL("../../../models/test/fixtures/stories260K/greedy.json", import.meta.url), "utf8"),
) as { cases: { prompt_ids: number[]; greedy_ids: number[] }[] };

async function loadOn(backend: string): Promise<CausalLM> {
  const previous = T.getBackend();
  T.setBackend(backend);
  try {
    return (await loadStories260K()).model;
  } finally {
    T.setBackend(previous);
  }
}

/** Every prompt's greedy tokens through one scheduler on `backend` (the backend stays active while it runs). */
async function decodeAll(model: CausalLM, backend: string, prompts: number[][], steps: number): Promise<number[][]> {
  const previous = T.getBackend();
  T.setBackend(backend);
  try {
    const s = new BatchScheduler(model, { maxNumSeqs: 4, prefillChunk: 8 });
    const outs = await Promise.all(
      prompts.map((p) => s.generate(p, { greedy: true, maxNewTokens: steps, stopTokenIds: [] })),
    );
    expect(s.stats().kvReservedBytes).toBe(0);
    return outs.map((o) => o.tokenIds);
  } finally {
    T.setBackend(previous);
  }
}

const suite = await openWebGPU();

if (!reportMissing(suite)) {
  suite.runtime?.destroy();
  describe("webgpu: BatchScheduler", () => {
    beforeAll(async () => {
      await T.initBackend("webgpu", { activate: false });
    });
    afterAll(() => {
      T.setBackend("js");
      T.disposeWebGPUBackend();
    });

    it("decodes prompts together as the js backend does, and one alone as in the batch", async () => {
      const prompts = greedyFixture.cases.map((c) => c.prompt_ids).slice(0, 3);
      const steps = 12;
      const gpuModel = await loadOn("webgpu");
      const gpu = await decodeAll(gpuModel, "webgpu", prompts, steps);
      const js = await decodeAll(await loadOn("js"), "js", prompts, steps);
      expect(gpu).toEqual(js);
      for (const [i, c] of greedyFixture.cases.slice(0, 3).entries())
        expect(gpu[i]).toEqual(c.greedy_ids.slice(0, steps));
      const alone = await decodeAll(gpuModel, "webgpu", [prompts[1]], steps);
      expect(alone[0]).toEqual(gpu[1]);
    });

    it("copies cached prompt chunks on webgpu with the bits of a recompute (prefix cache)", async () => {
      const gpuModel = await loadOn("webgpu");
      const previous = T.getBackend();
      T.setBackend("webgpu");
      try {
        const opts = { greedy: true, maxNewTokens: 6, stopTokenIds: [] as number[] };
        // A 5-token prompt grown by its own continuation twice: each turn extends the previous prompt, as an
        // episode's turns do, so the second and third turns find full 8-token chunks in the cache.
        const turns = async (s: BatchScheduler) => {
          let prompt = greedyFixture.cases[1].prompt_ids;
          const out: number[][] = [];
          for (let turn = 0; turn < 3; turn++) {
            const o = await s.generate(prompt, opts);
            out.push(o.tokenIds);
            prompt = [...prompt, ...o.tokenIds, ...greedyFixture.cases[2].prompt_ids];
          }
          return out;
        };
        const cached = new BatchScheduler(gpuModel, { maxNumSeqs: 4, prefillChunk: 8 });
        const warm = await turns(cached);
        expect(cached.stats().prefixHits).toBeGreaterThan(0);
        expect(cached.stats().prefixReusedRows).toBeGreaterThan(0);
        const cold = await turns(new BatchScheduler(gpuModel, { maxNumSeqs: 4, prefillChunk: 8, prefixCacheBytes: 0 }));
        expect(warm).toEqual(cold);
      } finally {
        T.setBackend(previous);
      }
    });
  });
}

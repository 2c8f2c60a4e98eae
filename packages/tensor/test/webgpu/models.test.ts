// Model-level checks of the webgpu backend: the embedded stories260K decoded greedily with its KV cache
// (tokens identical to the js backend and to llama2.c's run.c), and LoRA SFT steps whose losses and
// updated adapter weights match the wasm backend.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
// Relative imports: @kiln/tensor has no dependency on the packages built on it.
import { attachLora } from "../../../lora/src/index.js";
import {
  type CausalLM,
  SyncReadError,
  generate,
  generateAsync,
  loadStories260K,
  scoreCompletions,
  scoreCompletionsAsync,
} from "../../../models/src/index.js";
import * as T from "../../src/index.js";
import { openWebGPU, reportMissing } from "./setup.js";

const greedyFixture = JSON.parse(
  readFileSync(new URL("../../../models/test/fixtures/stories260K/greedy.json", import.meta.url), "utf8"),
) as { cases: { prompt: string; prompt_ids: number[]; greedy_ids: number[] }[] };

/** Load stories260K with its weights on `backend` (loading allocates on the active backend). */
async function loadOn(backend: string): Promise<CausalLM> {
  const previous = T.getBackend();
  T.setBackend(backend);
  try {
    return (await loadStories260K()).model;
  } finally {
    T.setBackend(previous);
  }
}

/** Greedy decoding with the KV cache: one prefill, then one token per forward; logits read asynchronously. */
async function greedy(model: CausalLM, backend: string, prompt: number[], steps: number): Promise<number[]> {
  const cache = model.newCache(1);
  const out: number[] = [];
  let ids = prompt;
  for (let s = 0; s < steps; s++) {
    const logits = T.withBackend(backend, () =>
      T.noGrad(() =>
        model.forward(T.Tensor.fromHost(Int32Array.from(ids), [1, ids.length], "i32"), { cache, logitsToKeep: 1 }),
      ),
    );
    const row = await logits.toFloat32ArrayAsync();
    let best = 0;
    for (let j = 1; j < row.length; j++) if (row[j] > row[best]) best = j;
    out.push(best);
    ids = [best];
  }
  return out;
}

const suite = await openWebGPU();

if (!reportMissing(suite)) {
  suite.runtime?.destroy();
  describe("webgpu: stories260K end to end", () => {
    beforeAll(async () => {
      await T.initBackend("webgpu", { activate: false });
      await T.initBackend("wasm", { threads: 1, activate: false });
    });
    afterAll(() => {
      T.setBackend("js");
      T.disposeWebGPUBackend();
      T.disposeWasmBackend();
    });

    it("greedy text with the KV cache equals the js backend and run.c", async () => {
      const c = greedyFixture.cases[1];
      const steps = 16;
      const gpu = await greedy(await loadOn("webgpu"), "webgpu", c.prompt_ids, steps);
      const js = await greedy(await loadOn("js"), "js", c.prompt_ids, steps);
      expect(gpu).toEqual(js);
      expect(gpu).toEqual(c.greedy_ids.slice(0, steps));
    });

    it("generate() refuses with SyncReadError naming generateAsync; generateAsync and scoreCompletionsAsync equal js", async () => {
      const c = greedyFixture.cases[1];
      const options = { greedy: true, maxNewTokens: 12, stopTokenIds: [] };
      const gpuModel = await loadOn("webgpu");
      const jsModel = await loadOn("js");
      const want = generate(jsModel, [c.prompt_ids], options);
      T.setBackend("webgpu");
      try {
        expect(() => generate(gpuModel, [c.prompt_ids], options)).toThrow(SyncReadError);
        expect(() => generate(gpuModel, [c.prompt_ids], options)).toThrow(/await generateAsync/);
        const got = await generateAsync(gpuModel, [c.prompt_ids], options);
        expect(got[0].tokenIds).toEqual(want[0].tokenIds);
        const items = [{ promptIds: c.prompt_ids, completionIds: want[0].tokenIds }];
        expect(() => scoreCompletions(gpuModel, items)).toThrow(/await scoreCompletionsAsync/);
        const scores = await scoreCompletionsAsync(gpuModel, items);
        const ref = T.withBackend("js", () => scoreCompletions(jsModel, items));
        for (const [j, v] of ref[0].entries()) expect(Math.abs(scores[0][j] - v)).toBeLessThan(1e-3);
      } finally {
        T.setBackend("js");
      }
    });

    it("generateAsync of a left-padded batch (decode rows starting past their cache's first position) equals js", async () => {
      const prompts = greedyFixture.cases.slice(0, 3).map((c, i) => c.prompt_ids.slice(0, 4 + 3 * i));
      const options = { greedy: true, maxNewTokens: 10, stopTokenIds: [] };
      const want = generate(await loadOn("js"), prompts, options);
      const gpuModel = await loadOn("webgpu");
      T.setBackend("webgpu");
      try {
        const got = await generateAsync(gpuModel, prompts, options);
        expect(got.map((g) => g.tokenIds)).toEqual(want.map((w) => w.tokenIds));
      } finally {
        T.setBackend("js");
      }
    });

    const seq = 32;
    const batch = 2;
    const batchIds = () => {
      const ids = new Int32Array(batch * seq);
      const targets = new Int32Array(batch * seq);
      for (let i = 0; i < ids.length; i++) {
        ids[i] = (i * 37 + 11) % 512;
        targets[i] = (i * 37 + 48) % 512;
      }
      return [T.Tensor.fromHost(ids, [batch, seq], "i32"), T.Tensor.fromHost(targets, [batch * seq], "i32")];
    };
    /** Three AdamW steps on `params(model)`; returns the losses and the updated parameters. */
    const train = async (backend: string, params: (model: CausalLM) => T.Tensor[]) => {
      const model = await loadOn(backend);
      return T.withBackend(backend, () => {
        const [x, y] = batchIds();
        const trained = params(model);
        const opt = new T.AdamW(trained, { lr: 1e-2, weightDecay: 0.01 });
        const losses: T.Tensor[] = [];
        for (let step = 0; step < 3; step++) {
          opt.zeroGrad();
          const loss = T.crossEntropy(T.reshape(model.forward(x), [batch * seq, -1]), y);
          T.backward(loss);
          opt.step();
          losses.push(loss.detach());
        }
        return { losses, params: trained.map((p) => p.detach()) };
      });
    };
    const compare = async (ref: Awaited<ReturnType<typeof train>>, gpu: Awaited<ReturnType<typeof train>>) => {
      expect(gpu.params.every((p) => p.backend === "webgpu")).toBe(true);
      for (const [i, l] of ref.losses.entries()) {
        const a = await gpu.losses[i].itemAsync();
        expect(Math.abs(a - l.item()), `loss of step ${i}`).toBeLessThan(1e-4 * Math.abs(l.item()) + 1e-5);
      }
      let worst = 0;
      for (const [i, p] of ref.params.entries()) {
        const want = p.toFloat32Array();
        const got = await gpu.params[i].toFloat32ArrayAsync();
        for (let j = 0; j < want.length; j++) worst = Math.max(worst, Math.abs(got[j] - want[j]));
      }
      return worst;
    };

    it("SFT steps on every f32 parameter: losses and updated weights match wasm", async () => {
      const all = (model: CausalLM) => model.requireGrad();
      const worst = await compare(await train("wasm", all), await train("webgpu", all));
      // Three Adam steps of lr 1e-2 move weights by up to 3e-2; f32 sums differ in order between backends.
      expect(worst).toBeLessThan(2e-4);
    });

    it("LoRA SFT steps (attachLora, all linear layers): losses and adapter weights match wasm", async () => {
      const lora = (model: CausalLM) =>
        attachLora(model, { r: 4, alpha: 8, dropout: 0, targetModules: "all-linear", seed: 3 }).parameters();
      const worst = await compare(await train("wasm", lora), await train("webgpu", lora));
      expect(worst).toBeLessThan(2e-4);
    });
  });
}

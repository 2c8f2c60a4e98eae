// End to end on a real pretrained model none of us trained: llama2.c's stories260K,
// converted to HF files by @kiln/hub-io and loaded by @kiln/models.
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { convertLlama2cToHf } from "@kiln/hub-io";
import { loadModel, loadTokenizer } from "@kiln/models";
import * as T from "@kiln/tensor";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { attachLora, loadAdapter, mergeAdapter, saveAdapter } from "../src/index.js";

const fixture = (name: string) =>
  new Uint8Array(readFileSync(new URL(`../../models/data/stories260K/${name}`, import.meta.url)));
const tmp = mkdtempSync(join(tmpdir(), "kiln-lora-e2e-"));

beforeAll(async () => {
  await T.initBackend("wasm", { threads: 1 });
});
afterAll(() => {
  T.setBackend("js");
  T.disposeWasmBackend();
  rmSync(tmp, { recursive: true, force: true });
});

describe("LoRA on stories260K", () => {
  it("trains (loss falls), saves, reloads and merges to the same logits", async () => {
    const files = convertLlama2cToHf(fixture("stories260K.bin"), fixture("tok512.bin")).files;
    const model = await loadModel(files);
    const tokenizer = await loadTokenizer(files);
    const text =
      "Once upon a time, there was a little dog named Max. Max loved to dig in the garden. One day he found a shiny blue key. ";
    const ids = tokenizer.encode(text.repeat(3));
    const seq = 48;
    const batch = 2;
    const inputs = new Int32Array(batch * seq);
    const targets = new Int32Array(batch * seq);
    for (let b = 0; b < batch; b++)
      for (let t = 0; t < seq; t++) {
        inputs[b * seq + t] = ids[b * 7 + t];
        targets[b * seq + t] = ids[b * 7 + t + 1];
      }
    const x = new T.Tensor(inputs, [batch, seq], "i32");
    const y = new T.Tensor(targets, [batch * seq], "i32");
    const adapter = attachLora(model, { r: 8, alpha: 16, dropout: 0.05, targetModules: "all-linear", seed: 1 });
    const opt = new T.AdamW(adapter.parameters(), { lr: 1e-2, weightDecay: 0 });
    const lossAt = () => T.noGrad(() => T.crossEntropy(T.reshape(model.forward(x), [batch * seq, -1]), y).item());
    adapter.train(false);
    const before = lossAt();
    adapter.train(true);
    for (let step = 0; step < 150; step++) {
      opt.zeroGrad();
      const loss = T.crossEntropy(T.reshape(model.forward(x), [batch * seq, -1]), y);
      T.backward(loss);
      T.clipGradNorm(adapter.parameters(), 1);
      opt.step();
    }
    adapter.train(false);
    const after = lossAt();
    expect(after).toBeLessThan(before * 0.5);

    const logits = T.noGrad(() => model.forward(x)).toFloat32Array();
    const dir = join(tmp, "adapter");
    await saveAdapter(adapter, dir);
    const fresh = await loadModel(files);
    const reloaded = await loadAdapter(fresh, dir);
    const reloadedLogits = T.noGrad(() => fresh.forward(x)).toFloat32Array();
    for (let i = 0; i < logits.length; i++) expect(Math.abs(reloadedLogits[i] - logits[i])).toBeLessThan(1e-5);
    mergeAdapter(reloaded);
    const mergedLogits = T.noGrad(() => fresh.forward(x)).toFloat32Array();
    let worst = 0;
    for (let i = 0; i < logits.length; i++) worst = Math.max(worst, Math.abs(mergedLogits[i] - logits[i]));
    expect(worst).toBeLessThan(1e-3);
  });
});

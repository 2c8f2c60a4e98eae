// A GGUF base trains LoRA like a Hugging Face one: the agent model exported as q8_0 and loaded back
// with loadModel(.gguf) (dequantised), an adapter attached, a few AdamW steps lower the SFT loss, and
// the adapter saves as PEFT and as a GGUF LoRA.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { GgufFile, exportAdapterToGguf, exportModelToGguf } from "@kiln/hub-io";
import { sftLoss } from "@kiln/losses";
import { attachLora, saveAdapter } from "@kiln/lora";
import { loadModel, loadTokenizer } from "@kiln/models";
import { AdamW, Tensor, backward } from "@kiln/tensor";
import { afterAll, describe, expect, it } from "vitest";
import { agentModelDir } from "../../src/agent-model/paths.js";

const tmp = mkdtempSync(join(tmpdir(), "kiln-gguf-train-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

describe("LoRA on a GGUF base", () => {
  it("loads a q8_0 GGUF, trains an adapter (loss falls) and exports it as a GGUF LoRA for that base", async () => {
    const gguf = join(tmp, "agent-q8.gguf");
    await exportModelToGguf(agentModelDir(), gguf, { dtype: "q8_0" });
    const model = await loadModel(gguf);
    const tokenizer = await loadTokenizer(gguf);
    const text = "Once upon a time, there was a little dog named Max. Max liked to run in the park.";
    const ids = new Tensor(Int32Array.from(tokenizer.encode(text)), [1, tokenizer.encode(text).length], "i32");
    const adapter = attachLora(model, { r: 4, alpha: 8, targetModules: ["q_proj", "v_proj"], seed: 1 });
    const opt = new AdamW(adapter.parameters(), { lr: 1e-2 });
    const losses: number[] = [];
    for (let step = 0; step < 5; step++) {
      const out = sftLoss(model.forward(ids), ids);
      losses.push(out.loss.item());
      backward(out.loss);
      opt.step();
      opt.zeroGrad();
    }
    expect(losses[4]).toBeLessThan(losses[0]);
    const dir = join(tmp, "adapter");
    await saveAdapter(adapter, dir);
    await exportAdapterToGguf(dir, join(tmp, "adapter.gguf"), { baseConfig: model.config.raw });
    const f = await GgufFile.open(join(tmp, "adapter.gguf"));
    expect(f.get("general.architecture")).toBe("qwen3");
    // A and B for q_proj and v_proj in every layer.
    expect(f.tensors.length).toBe(model.config.numLayers * 2 * 2);
    await f.close();
  });
});

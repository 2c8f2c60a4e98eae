// The DPO reference model option behind `--ablation dpo-reference`: a separate reference model
// with the adapter-off weights gives exactly the default loss; a different reference (another
// base) changes the implicit rewards by log π_default_ref − log π_other_ref.
import { attachLora } from "@kiln/lora";
import { Tensor } from "@kiln/tensor";
import { describe, expect, it } from "vitest";
import { type PreferenceExample, preferenceBatch } from "../../src/trainer/chat-batches.js";
import { dpoBatchLoss } from "../../src/trainer/objectives/dpo.js";
import { tinyChat } from "../../src/recipes/tiny-chat.js";

const pairs: PreferenceExample[] = [
  {
    prompt: [
      { role: "system", content: "Guess the number." },
      { role: "user", content: "Between 1 and 100." },
    ],
    chosen: { role: "assistant", content: "50" },
    rejected: { role: "assistant", content: "50 50 50" },
  },
  {
    prompt: [{ role: "user", content: "Higher than 50." }],
    chosen: { role: "assistant", content: "75" },
    rejected: { role: "assistant", content: "12" },
  },
];

describe("DPO with a separate reference model", () => {
  it("equals the adapter-off reference when the reference has the same weights, and differs otherwise", () => {
    const seed = 1 + (Date.now() % 1000);
    const policy = tinyChat({ seed, std: 0.2 });
    const twin = tinyChat({ seed, std: 0.2 });
    const other = tinyChat({ seed: seed + 1, std: 0.2 });
    const adapter = attachLora(policy.model, { r: 4, alpha: 8, dropout: 0, targetModules: "all-linear", seed });
    // A non-zero delta, so policy ≠ reference.
    for (const layer of adapter.layers.values()) {
      const v = new Float32Array(layer.B.size);
      for (let i = 0; i < v.length; i++) v[i] = Math.sin(i + seed) * 0.05;
      layer.B = new Tensor(v, layer.B.shape);
    }
    const codec = { tokenizer: policy.tokenizer, template: policy.chatTemplate };
    const batch = preferenceBatch(codec, pairs);
    const own = dpoBatchLoss(policy.model, adapter, batch, { beta: 0.1 });
    const same = dpoBatchLoss(policy.model, adapter, batch, { beta: 0.1 }, {}, twin.model);
    const diff = dpoBatchLoss(policy.model, adapter, batch, { beta: 0.1 }, {}, other.model);
    expect(same.loss.item()).toBeCloseTo(own.loss.item(), 6);
    expect(same.metrics["rewards/margins"]).toBeCloseTo(own.metrics["rewards/margins"], 6);
    expect(Math.abs(diff.metrics["rewards/chosen"] - own.metrics["rewards/chosen"])).toBeGreaterThan(1e-3);
  });
});

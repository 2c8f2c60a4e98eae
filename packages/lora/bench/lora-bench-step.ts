// The LoRA SFT step the lora benchmarks time and profile: the tensor benchmark's reference decoder as a
// Llama with a frozen bf16 base, LoRA r=16 α=32 on all linear layers, AdamW on the adapter, next-token
// loss on B=4 × T=128 random tokens. Call after the backend is initialised.
import { createModel } from "@kiln/models";
import * as T from "@kiln/tensor";
import { attachLora } from "../src/index.js";

export const LORA_BENCH_SHAPE = { B: 4, S: 128, V: 2048 } as const;

/** Builds the model, adapter and batch; `step()` runs one forward, backward and AdamW step inside tidy(). */
export function loraBenchStep(): { step: () => void; trainable: number } {
  const { B, S, V } = LORA_BENCH_SHAPE;
  const model = createModel(
    {
      architectures: ["LlamaForCausalLM"],
      hidden_size: 256,
      intermediate_size: 688,
      num_hidden_layers: 4,
      num_attention_heads: 4,
      num_key_value_heads: 4,
      vocab_size: V,
      rms_norm_eps: 1e-5,
      rope_theta: 10000,
      tie_word_embeddings: false,
    },
    { seed: 0, dtype: "bf16" },
  );
  const adapter = attachLora(model, { r: 16, alpha: 32, dropout: 0, targetModules: "all-linear", seed: 1 });
  const opt = new T.AdamW(adapter.parameters(), { lr: 1e-4 });
  const rng = new T.Rng(2);
  const ids = Int32Array.from(rng.uniform(B * S), (u) => Math.floor(u * V));
  const targets = new Int32Array(B * S);
  for (let b = 0; b < B; b++) for (let t = 0; t < S; t++) targets[b * S + t] = t + 1 < S ? ids[b * S + t + 1] : -100;
  const x = new T.Tensor(ids, [B, S], "i32");
  const y = new T.Tensor(targets, [B * S], "i32");
  const step = () => {
    for (const p of adapter.parameters()) p.grad?.dispose();
    opt.zeroGrad();
    // Inside tidy() the step's activations are freed when it returns (resident in wasm memory meanwhile).
    T.tidy(() => {
      const loss = T.crossEntropy(T.reshape(model.forward(x), [B * S, V]), y);
      T.backward(loss);
      opt.step();
    });
  };
  return { step, trainable: adapter.parameterCount };
}

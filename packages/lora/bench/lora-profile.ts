// Where the LoRA SFT step (bench/lora-step-run.ts's model and adapter) spends its time, kernel by kernel:
//   tsx --conditions=source bench/lora-profile.ts [threads] [steps] [bf16Gemm widen|onednn]
// Prints a markdown table (the tensor package's bench/kernel-profile.ts). Run it for 1 and 2 threads.
import { createModel } from "@kiln/models";
import * as T from "@kiln/tensor";
import { printProfile, profileKernels } from "../../tensor/bench/kernel-profile.js";
import { attachLora } from "../src/index.js";

const [threadsArg = "2", stepsArg = "8", bf16Gemm = "widen"] = process.argv.slice(2);
const threads = Number(threadsArg);
const steps = Number(stepsArg);
await T.initBackend("native", {
  threads,
  relaxedSimd: true,
  ignoreOpenblasEnv: true,
  bf16Gemm: bf16Gemm === "onednn" ? "onednn" : "widen",
});
const B = 4;
const S = 128;
const V = 2048;
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
const profile = profileKernels("native");
let wall = 0;
let cpu = 0;
for (let r = 0; r < steps + 2; r++) {
  // Two warm-up steps (tier-up, pools) before counting.
  if (r === 2) {
    profile.reset();
    wall = 0;
    cpu = 0;
  }
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (const p of adapter.parameters()) p.grad?.dispose();
  opt.zeroGrad();
  T.tidy(() => {
    const loss = T.crossEntropy(T.reshape(model.forward(x), [B * S, V]), y);
    T.backward(loss);
    opt.step();
  });
  wall += performance.now() - t0;
  const c = process.cpuUsage(c0);
  cpu += (c.user + c.system) / 1000;
}
printProfile(`LoRA r16 step, native ${threads} thread(s), bf16 ${bf16Gemm}`, profile, steps, wall, cpu);
profile.restore();
T.disposeNativeBackend();
T.disposeWasmBackend();

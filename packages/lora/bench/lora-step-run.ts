// One LoRA SFT measurement in its own process (peak RSS belongs to this config):
//   tsx --conditions=source bench/lora-step-run.ts [backend] [threads] [reps] [bf16Gemm widen|onednn]
// native loads OpenBLAS ignoring OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE (as the PyTorch peer runs) and reports its core.
// Frozen bf16 base (the tensor benchmark's reference decoder as a Llama), LoRA r=16 α=32
// on all linear layers, AdamW on the adapter, next-token loss on B=4 × T=128 tokens.
import { readFileSync } from "node:fs";
import { createModel } from "@kiln/models";
import * as T from "@kiln/tensor";
import { attachLora } from "../src/index.js";

const [backend = "wasm", threads = "2", repsArg = "3", bf16Gemm = "widen"] = process.argv.slice(2);
const reps = Number(repsArg);
if (backend !== "js")
  await T.initBackend(backend, {
    threads: Number(threads),
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
const times: number[] = [];
const cpu: number[] = [];
for (let r = 0; r <= reps; r++) {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  for (const p of adapter.parameters()) p.grad?.dispose();
  opt.zeroGrad();
  // Inside tidy() the step's activations are freed when it returns (resident in wasm memory meanwhile).
  T.tidy(() => {
    const loss = T.crossEntropy(T.reshape(model.forward(x), [B * S, V]), y);
    T.backward(loss);
    opt.step();
  });
  if (r > 0) {
    times.push(performance.now() - t0);
    const c = process.cpuUsage(c0);
    cpu.push((c.user + c.system) / 1000);
  }
}
const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
console.log(
  JSON.stringify({
    step_ms: [...times].sort((a, b) => a - b)[times.length >> 1],
    // CPU time of the whole process per step (all threads): on a loaded machine, the work itself.
    step_cpu_ms: [...cpu].sort((a, b) => a - b)[cpu.length >> 1],
    tokens: B * S,
    peak_rss_mib: hwm ? Number(hwm[1]) / 1024 : null,
    trainable: adapter.parameterCount,
    blas: T.nativeBackendInfo()?.summary ?? null,
  }),
);
T.disposeNativeBackend();
T.disposeWasmBackend();

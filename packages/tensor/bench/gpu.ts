// `pnpm bench gpu [--json] [--size=N] [--lora|--no-lora]`: kiln's webgpu backend on this machine's GPU —
// f32 and f16 GEMM GFLOP/s, the reference decoder's fwd+bwd tokens/s, and a Qwen3-0.6B-shaped LoRA step
// (random bf16 base, r16 on every linear, B=1, T=256) tokens/s and peak device memory — with PyTorch CUDA
// as the peer when it is importable (bench/gpu_torch.py). Runs as is wherever Node has the `webgpu`
// package and a Vulkan/Metal/D3D12 driver. On a software adapter (lavapipe, SwiftShader) the GEMM is
// 1024³ and the 0.6B step is left out unless --lora is given (it takes hours on a CPU); --layers=N and
// --vocab=N shrink that model for a quick smoke run (the rows then say so).
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { BenchReporter } from "../../../tooling/src/bench.js";
import { attachLora } from "../../lora/src/index.js";
import { createModel } from "../../models/src/index.js";
import * as T from "../src/index.js";
import type { WebGPURuntime } from "../src/backends/webgpu/runtime.js";
import { REFERENCE_DECODER } from "./decoder-model.js";
import { kilnDecoder, kilnMatmulMs, median } from "./webgpu.js";

const here = dirname(fileURLToPath(import.meta.url));
const reporter = new BenchReporter("gpu");
const arg = (name: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);

try {
  await T.initBackend("webgpu", { activate: false });
} catch (err) {
  process.stderr.write(`bench gpu: ${(err as Error).message}\n`);
  process.exit(1);
}
const rt = T.webgpuRuntime() as WebGPURuntime;
const software = /llvmpipe|lavapipe|swiftshader/i.test(rt.info.adapterName);
const size = Number(arg("size") ?? (software ? 1024 : 4096));
const runLora = process.argv.includes("--lora") || (!software && !process.argv.includes("--no-lora"));
const note = `adapter ${rt.info.adapterName}${rt.info.shaderF16 ? " (shader-f16)" : ""}`;

interface TorchResult {
  available: boolean;
  reason?: string;
  device?: string;
  matmul_f32?: number;
  matmul_f16?: number;
  decoder_tok_s?: number;
  lora_tok_s?: number;
  lora_peak_mib?: number;
}
const py = spawnSync("python3", [join(here, "gpu_torch.py"), String(size), runLora ? "1" : "0"], { encoding: "utf8" });
let torch: TorchResult = { available: false, reason: py.error ? String(py.error) : py.stderr.trim().split("\n").pop() };
try {
  if (py.status === 0) torch = JSON.parse(py.stdout.trim().split("\n").pop() ?? "");
} catch {
  torch = { available: false, reason: "unreadable output of gpu_torch.py" };
}
const peer = torch.available ? `pytorch-cuda (${torch.device})` : "pytorch-cuda";
const peerNote = torch.available ? note : `${note}; peer not run: ${torch.reason}`;
const gf = (ms: number) => (2 * size ** 3) / (ms * 1e6);

for (const mode of ["f32", "f16"] as const) {
  if (mode === "f16" && !rt.info.shaderF16) continue;
  const times = await kilnMatmulMs(rt, size, size, size, 3, mode);
  reporter.add({
    case: `matmul ${mode} ${size}x${size}x${size}`,
    metric: mode === "f32" ? "FP32 GEMM (peer: TF32 off)" : "f16 weights, f16 math (shader-f16)",
    unit: "GFLOP/s",
    better: "higher",
    kiln: gf(median(times)),
    peer,
    peer_value: (mode === "f32" ? torch.matmul_f32 : torch.matmul_f16) ?? null,
    note: peerNote,
  });
}

const cfg = REFERENCE_DECODER;
const ids = Int32Array.from(new T.Rng(1).uniform(cfg.batch * cfg.seq), (u) => Math.floor(u * cfg.vocab));
const decoder = kilnDecoder(rt, cfg, ids);
await decoder();
const dec: number[] = [];
for (let r = 0; r < 3; r++) dec.push(await decoder());
reporter.add({
  case: `decoder fwd+bwd (${cfg.layers} layers, d=${cfg.dim}, T=${cfg.seq}, B=${cfg.batch})`,
  metric: "tokens/s",
  unit: "tok/s",
  better: "higher",
  kiln: ((cfg.batch * cfg.seq) / median(dec)) * 1000,
  peer,
  peer_value: torch.decoder_tok_s ?? null,
  note: peerNote,
});

if (runLora) {
  // Qwen3-0.6B's shapes (config.json of Qwen/Qwen3-0.6B) with random weights: no download needed.
  const qwen3 = {
    architectures: ["Qwen3ForCausalLM"],
    model_type: "qwen3",
    hidden_size: 1024,
    intermediate_size: 3072,
    num_hidden_layers: Number(arg("layers") ?? 28),
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    vocab_size: Number(arg("vocab") ?? 151936),
    max_position_embeddings: 40960,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    tie_word_embeddings: true,
    hidden_act: "silu",
    torch_dtype: "bfloat16",
  };
  const seq = 256;
  const shrunk = qwen3.num_hidden_layers !== 28 || qwen3.vocab_size !== 151936;
  const loraCase = `Qwen3-0.6B-shaped LoRA step (bf16 base, r16 all-linear, B=1, T=256${
    shrunk ? `; SHRUNK: ${qwen3.num_hidden_layers} layers, vocab ${qwen3.vocab_size}` : ""
  })`;
  const model = T.withBackend("webgpu", () => createModel(qwen3, { dtype: "bf16", seed: 0 }));
  const steps: number[] = [];
  rt.resetPeak();
  const { opt, x, y } = T.withBackend("webgpu", () => {
    const adapter = attachLora(model, { r: 16, alpha: 32, dropout: 0, targetModules: "all-linear", seed: 1 });
    const tokens = Int32Array.from(new T.Rng(2).uniform(seq + 1), (u) => Math.floor(u * qwen3.vocab_size));
    return {
      opt: new T.AdamW(adapter.parameters(), { lr: 1e-4, weightDecay: 0 }),
      x: T.Tensor.fromHost(tokens.subarray(0, seq), [1, seq], "i32"),
      y: T.Tensor.fromHost(tokens.subarray(1), [seq], "i32"),
    };
  });
  for (let r = 0; r < 3; r++) {
    const t0 = performance.now();
    const loss = T.withBackend("webgpu", () =>
      T.tidy(() => {
        opt.zeroGrad();
        const l = T.crossEntropy(T.reshape(model.forward(x, { logitsToKeep: seq }), [seq, -1]), y);
        T.backward(l);
        opt.step();
        return l.detach();
      }),
    );
    await loss.itemAsync();
    if (r > 0) steps.push(performance.now() - t0);
  }
  reporter.add({
    case: loraCase,
    metric: "tokens/s",
    unit: "tok/s",
    better: "higher",
    kiln: (seq / median(steps)) * 1000,
    peer,
    peer_value: torch.lora_tok_s ?? null,
    note: peerNote,
  });
  reporter.add({
    case: loraCase,
    metric: "peak device memory",
    unit: "MiB",
    better: "lower",
    kiln: rt.peakBytes / 2 ** 20,
    peer,
    peer_value: torch.lora_peak_mib ?? null,
    note: `${peerNote}; kiln: peak of live webgpu buffers (pool size classes included)`,
  });
}
reporter.finish();
T.disposeWebGPUBackend();

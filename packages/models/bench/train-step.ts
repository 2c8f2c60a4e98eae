// `pnpm bench models train-step [--layers N] [--seq T] [--steps S] [--json]`: one LoRA training step on a
// Qwen3-0.6B-shaped model (the real config's dims, random weights): bf16 frozen base, LoRA r16 on all
// linears, the loss through the row-chunked head (no [T, V] logits), activation recomputation per
// layer; plus prefill / decode tokens/s. Peers: bench/torch_train_step.py in f32 and bf16, 1 thread,
// with full logits (what transformers computes) and no recomputation. Each side runs in its own
// process so its peak RSS is its own; they run one after the other (not interleaved: each holds a
// whole model), so machine load hits them unevenly — the note says so.
import { spawnSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { AdamW, Tensor, backward, initBackend, noGrad } from "@kiln/tensor";
import { BenchReporter } from "../../../tooling/src/bench.js";
import { peerEnv, torchNote } from "../../../tooling/src/peer.js";
import { sftLoss } from "../../losses/src/index.js";
import { attachLora } from "../../lora/src/index.js";
import { argmaxOf, createModel } from "../src/index.js";

const here = dirname(fileURLToPath(import.meta.url));

/** Qwen/Qwen3-0.6B config.json dims (docs/NUMERICS.md §5). */
export function qwen3_06b(layers: number): Record<string, unknown> {
  return {
    architectures: ["Qwen3ForCausalLM"],
    model_type: "qwen3",
    vocab_size: 151936,
    hidden_size: 1024,
    intermediate_size: 3072,
    num_hidden_layers: layers,
    num_attention_heads: 16,
    num_key_value_heads: 8,
    head_dim: 128,
    rms_norm_eps: 1e-6,
    rope_theta: 1000000,
    tie_word_embeddings: true,
    max_position_embeddings: 40960,
  };
}

interface Args {
  layers: number;
  seq: number;
  steps: number;
  prompt: number;
  decode: number;
}

function parseArgs(argv: string[]): Args {
  const get = (name: string, fallback: number) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? Number(argv[i + 1]) : fallback;
  };
  return {
    layers: get("layers", 28),
    seq: get("seq", 1024),
    steps: get("steps", 2),
    prompt: 128,
    decode: get("decode", 16),
  };
}

export interface StepReport {
  stepMs: number[];
  prefillMs: number;
  decodeMs: number;
  maxRssMiB: number;
  loss: number;
  version?: string;
}

/** The kiln side, in this process (run as a child so its peak RSS is its own). */
async function kilnChild(a: Args): Promise<StepReport> {
  await initBackend("wasm", { threads: 1 });
  const model = createModel(qwen3_06b(a.layers), { seed: 0, dtype: "bf16" });
  const adapter = attachLora(model, { r: 16, alpha: 32, targetModules: "all-linear", seed: 1 });
  const opt = new AdamW(adapter.parameters(), { lr: 1e-4 });
  const V = 151936;
  const ids = new Tensor(
    Int32Array.from({ length: a.seq }, (_, i) => (i * 7919 + 13) % V),
    [1, a.seq],
    "i32",
  );
  const stepMs: number[] = [];
  let loss = Number.NaN;
  for (let s = 0; s < a.steps; s++) {
    const t0 = performance.now();
    opt.zeroGrad();
    const out = sftLoss(model.chunkedLogits(ids, { checkpointLayers: true }), ids);
    backward(out.loss);
    opt.step();
    stepMs.push(performance.now() - t0);
    loss = out.metrics.loss;
  }
  const prompt = Int32Array.from({ length: a.prompt }, (_, i) => (i * 104729 + 7) % V);
  // Prefill with a cache, then greedy one-token steps (what the peer times too).
  const cache = model.newCache(1);
  const p0 = performance.now();
  let logits = noGrad(() => model.forward(new Tensor(prompt, [1, a.prompt], "i32"), { cache, logitsToKeep: 1 }));
  const prefillMs = performance.now() - p0;
  const d0 = performance.now();
  for (let s = 0; s < a.decode; s++) {
    const next = Int32Array.of(argmaxOf(logits.toFloat32Array()));
    logits = noGrad(() => model.forward(new Tensor(next, [1, 1], "i32"), { cache }));
  }
  const decodeMs = performance.now() - d0;
  return { stepMs, prefillMs, decodeMs, maxRssMiB: process.resourceUsage().maxRSS / 1024, loss };
}

function lastJson(stdout: string): StepReport | null {
  const line = stdout.trim().split("\n").pop();
  try {
    return line ? (JSON.parse(line) as StepReport) : null;
  } catch {
    return null;
  }
}

/** Driver: kiln child, then torch f32 and bf16 children; one row per metric. */
export async function runTrainStepBench(argv: string[]): Promise<void> {
  const a = parseArgs(argv);
  const reporter = new BenchReporter("models", argv);
  const common = [
    "--layers",
    String(a.layers),
    "--seq",
    String(a.seq),
    "--steps",
    String(a.steps),
    "--decode",
    String(a.decode),
  ];
  const tsx = join(here, "../../../node_modules/.bin/tsx");
  const kilnRun = spawnSync(tsx, ["--conditions=source", join(here, "train-step.ts"), "--child", ...common], {
    encoding: "utf8",
    maxBuffer: 1 << 24,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const kiln = lastJson(kilnRun.stdout);
  if (!kiln) throw new Error(`kiln train-step child failed (status ${kilnRun.status})`);
  const peers: [string, StepReport | null][] = ["f32", "bf16"].map((dtype) => {
    const r = spawnSync("/usr/bin/python3", [join(here, "torch_train_step.py"), dtype, ...common], {
      encoding: "utf8",
      maxBuffer: 1 << 24,
      env: peerEnv(1),
      stdio: ["ignore", "pipe", "inherit"],
    });
    return [dtype, lastJson(r.stdout)];
  });
  const shape = `Qwen3-0.6B dims, ${a.layers} layers, T=${a.seq}`;
  const note = `${shape}; kiln: wasm 1 thread, bf16 base, LoRA r16 all-linear, chunked head, per-layer recomputation; peer: full logits, no recomputation, ${torchNote(1)}; processes run one after another (load differs)`;
  const step = (r: StepReport) => r.stepMs[r.stepMs.length - 1];
  for (const [dtype, peer] of peers) {
    const peerName = `torch ${peer?.version ?? "?"} ${dtype} (1 thread)`;
    reporter.add({
      case: `train-step ${a.layers}L T${a.seq}`,
      metric: "peak RSS",
      unit: "MiB",
      better: "lower",
      kiln: kiln.maxRssMiB,
      peer: peerName,
      peer_value: peer ? peer.maxRssMiB : null,
      note,
    });
    reporter.add({
      case: `train-step ${a.layers}L T${a.seq}`,
      metric: "train",
      unit: "tok/s",
      better: "higher",
      kiln: (a.seq / step(kiln)) * 1000,
      peer: peerName,
      peer_value: peer ? (a.seq / step(peer)) * 1000 : null,
      note,
    });
    reporter.add({
      case: `${a.layers}L prefill ${a.prompt}`,
      metric: "prefill",
      unit: "tok/s",
      better: "higher",
      kiln: (a.prompt / kiln.prefillMs) * 1000,
      peer: peerName,
      peer_value: peer ? (a.prompt / peer.prefillMs) * 1000 : null,
      note,
    });
    reporter.add({
      case: `${a.layers}L decode ${a.decode}`,
      metric: "decode",
      unit: "tok/s",
      better: "higher",
      kiln: (a.decode / kiln.decodeMs) * 1000,
      peer: peerName,
      peer_value: peer ? (a.decode / peer.decodeMs) * 1000 : null,
      note,
    });
  }
  reporter.finish();
}

if (process.argv.includes("--child")) {
  const report = await kilnChild(parseArgs(process.argv));
  process.stdout.write(`${JSON.stringify(report)}\n`);
  process.exit(0);
}

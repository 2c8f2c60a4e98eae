// `pnpm bench models qwen35-step [--seq T] [--layers N] [--threads N] [--bf16-gemm auto|widen|onednn] [--json]`:
// a Qwen3.5-2B-shaped model (random weights laid out as the real checkpoint: the vision-language config
// nesting, `model.language_model.*` names, bf16 matrices) builds, runs a cached prefill and one LoRA
// training step (r16 on all linears, the linear-attention projections included; chunked head; per-layer
// recomputation; AdamW), and reports seconds and the process's peak RSS. The goal it checks: the whole
// step fits in 24 GiB. No peer: torch 1.13 on this machine has no Qwen3.5, so the row's "peer" is the
// memory budget itself (ratio = the fraction of it used).
import { AdamW, Tensor, backward, initBackend, noGrad } from "@kiln/tensor";
import { BenchReporter } from "../../../tooling/src/bench.js";
import { sftLoss } from "../../losses/src/index.js";
import { attachLora } from "../../lora/src/index.js";
import { CausalLM, parameterShapes, parseDecoderConfig } from "../src/index.js";

const GIB = 2 ** 30;
const BUDGET_BYTES = 24 * GIB;

/**
 * Qwen/Qwen3.5-2B's text dims: 24 layers (every 4th full attention, 6 in all), hidden 2,048, 8 query /
 * 2 KV heads of 256 (docs/NUMERICS.md §5 for the family's layout, head size, vocabulary and partial rotary;
 * the model's own card for layers, hidden size and head counts). The FFN width (6,144) and the
 * linear-attention heads (16 key / 16 value heads of 128, as Qwen3.5-0.8B) are not in those sources:
 * they are the values a 2B total implies, not read from the checkpoint.
 */
export function qwen35_2b(layers = 24): Record<string, unknown> {
  return {
    architectures: ["Qwen3_5ForConditionalGeneration"],
    model_type: "qwen3_5",
    tie_word_embeddings: true,
    text_config: {
      model_type: "qwen3_5_text",
      vocab_size: 248320,
      hidden_size: 2048,
      intermediate_size: 6144,
      num_hidden_layers: layers,
      num_attention_heads: 8,
      num_key_value_heads: 2,
      head_dim: 256,
      hidden_act: "silu",
      rms_norm_eps: 1e-6,
      max_position_embeddings: 262144,
      attn_output_gate: true,
      linear_conv_kernel_dim: 4,
      linear_key_head_dim: 128,
      linear_value_head_dim: 128,
      linear_num_key_heads: 16,
      linear_num_value_heads: 16,
      full_attention_interval: 4,
      layer_types: Array.from({ length: layers }, (_, i) =>
        (i + 1) % 4 === 0 ? "full_attention" : "linear_attention",
      ),
      partial_rotary_factor: 0.25,
      rope_parameters: {
        rope_type: "default",
        rope_theta: 10000000,
        partial_rotary_factor: 0.25,
        mrope_interleaved: true,
        mrope_section: [11, 11, 10],
      },
      tie_word_embeddings: true,
      dtype: "bfloat16",
    },
  };
}

/**
 * Random weights in the checkpoint's storage: matrices as bf16 bit patterns straight from a xorshift
 * (|w| in [2⁻⁸, 2⁻⁴), random signs), everything else f32 from the same draws. A seeded normal init of
 * two billion values would take minutes; the step's memory and speed do not depend on the values.
 */
export function randomQwen35(config: Record<string, unknown>): CausalLM {
  const c = parseDecoderConfig(config);
  let x = 0x9e3779b9;
  const next = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x;
  };
  const tensors = new Map<string, Tensor>();
  for (const [name, shape] of parameterShapes(c)) {
    const n = shape.reduce((a, b) => a * b, 1);
    if (shape.length === 2) {
      const bits = new Uint16Array(n);
      for (let i = 0; i < n; i++) {
        const r = next();
        // sign | exponent 119..122 | 7 mantissa bits
        bits[i] = ((r >>> 16) & 0x8000) | ((119 + (r & 3)) << 7) | ((r >>> 2) & 0x7f);
      }
      tensors.set(name, Tensor.fromHost(bits, shape, "bf16"));
    } else {
      const values = new Float32Array(n);
      for (let i = 0; i < n; i++) values[i] = ((next() >>> 8) / 2 ** 24) * 0.1;
      tensors.set(name, Tensor.fromHost(values, shape, "f32"));
    }
  }
  return CausalLM.fromTensors(c, tensors);
}

interface Args {
  seq: number;
  layers: number;
  threads: number;
  bf16Gemm: "auto" | "widen" | "onednn";
}

function parseArgs(argv: string[]): Args {
  const get = (name: string) => {
    const i = argv.indexOf(`--${name}`);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const gemm = get("bf16-gemm") ?? "auto";
  if (gemm !== "auto" && gemm !== "widen" && gemm !== "onednn")
    throw new Error(`--bf16-gemm must be auto, widen or onednn, got ${gemm}`);
  return {
    seq: Number(get("seq") ?? 256),
    layers: Number(get("layers") ?? 24),
    threads: Number(get("threads") ?? 2),
    bf16Gemm: gemm,
  };
}

/**
 * "auto": native with oneDNN's bf16 GEMM where libdnnl loads, else what initBackend("auto") finds.
 * The widened path converts every bf16 weight to f32 per product, and the head's chunks each widen
 * the whole 248,320 × 2,048 embedding: at T = 64 that was 85% of a 4-layer step (79 s against 13 s).
 */
async function backendFor(a: Args) {
  if (a.bf16Gemm !== "auto") return initBackend("auto", { threads: a.threads, bf16Gemm: a.bf16Gemm });
  try {
    return await initBackend("native", { threads: a.threads, bf16Gemm: "onednn" });
  } catch {
    return initBackend("auto", { threads: a.threads });
  }
}

export async function runQwen35StepBench(argv: string[]): Promise<void> {
  const a = parseArgs(argv);
  const reporter = new BenchReporter("models", argv);
  const backend = await backendFor(a);
  const seconds = (t0: number) => (performance.now() - t0) / 1000;

  let t0 = performance.now();
  const model = randomQwen35(qwen35_2b(a.layers));
  const adapter = attachLora(model, { r: 16, alpha: 32, targetModules: "all-linear", seed: 1 });
  const buildS = seconds(t0);
  const params = [...parameterShapes(model.config).values()].reduce((s, sh) => s + sh.reduce((p, d) => p * d, 1), 0);
  const V = model.config.vocabSize;
  const ids = new Tensor(
    Int32Array.from({ length: a.seq }, (_, i) => (i * 7919 + 13) % V),
    [1, a.seq],
    "i32",
  );

  t0 = performance.now();
  noGrad(() => model.forward(ids, { cache: model.newCache(1), logitsToKeep: 1 }).toFloat32Array());
  const prefillS = seconds(t0);

  const opt = new AdamW(adapter.parameters(), { lr: 1e-4 });
  t0 = performance.now();
  opt.zeroGrad();
  const out = sftLoss(model.chunkedLogits(ids, { checkpointLayers: true }), ids);
  backward(out.loss);
  opt.step();
  const stepS = seconds(t0);
  const loss = out.metrics.loss;
  if (!Number.isFinite(loss)) throw new Error(`qwen35-step: the loss is ${loss}`);
  const rssMiB = process.resourceUsage().maxRSS / 1024;

  const shape = `Qwen3.5-2B dims (${(params / 1e9).toFixed(2)} B text parameters), ${a.layers} layers, T=${a.seq}`;
  const note = `${shape}; ${backend.line}; bf16 base, LoRA r16 all-linear, chunked head, per-layer recomputation, AdamW; build ${buildS.toFixed(1)} s, loss ${loss.toFixed(3)}; peer = the 24 GiB goal, not a measurement`;
  const kase = `qwen35-2b step ${a.layers}L T${a.seq}`;
  reporter.add({
    case: kase,
    metric: "peak RSS",
    unit: "MiB",
    better: "lower",
    kiln: rssMiB,
    peer: "24 GiB goal",
    peer_value: BUDGET_BYTES / 2 ** 20,
    note,
  });
  reporter.add({
    case: kase,
    metric: "train step",
    unit: "s",
    better: "lower",
    kiln: stepS,
    peer: "none",
    peer_value: null,
    note,
  });
  reporter.add({
    case: kase,
    metric: "prefill (cached, no grad)",
    unit: "tok/s",
    better: "higher",
    kiln: a.seq / prefillS,
    peer: "none",
    peer_value: null,
    note,
  });
  reporter.finish();
  if (rssMiB * 2 ** 20 > BUDGET_BYTES) {
    console.error(`qwen35-step: peak RSS ${rssMiB.toFixed(0)} MiB is over the 24 GiB goal`);
    process.exitCode = 1;
  }
}

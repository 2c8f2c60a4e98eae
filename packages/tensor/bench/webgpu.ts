// webgpu rows of `pnpm bench tensor` (and the core of `pnpm bench gpu`): kiln's webgpu backend against
// @tensorflow/tfjs-backend-webgpu on the same adapter, in the same process, measured in interleaved
// rounds (medians of per-round medians). Times include device execution: each measurement ends with a
// readback that waits for the queue.
import type { BenchReporter } from "../../../tooling/src/bench.js";
import * as T from "../src/index.js";
import { gpuMatmul } from "../src/backends/webgpu/kernels/matmul.js";
import type { WebGPURuntime } from "../src/backends/webgpu/runtime.js";
import { type DecoderConfig, REFERENCE_DECODER, allParams, decoderLoss, initDecoder } from "./decoder-model.js";
import { startTfjsWebGPU, tfjsDecoder, tfjsMatmulMs } from "./webgpu-peers.js";

export const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[s.length >> 1] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : Number.NaN;
};
const gflops = (m: number, n: number, k: number, ms: number) => (2 * m * n * k) / (ms * 1e6);

function randomHost(n: number, seed: number): Float32Array {
  const u = new T.Rng(seed).uniform(n);
  return Float32Array.from(u, (v) => 2 * v - 1);
}

/** ms per m×n×k matmul on the kiln runtime (B f32, or f16 weights with f16 math), timed to completion. */
export async function kilnMatmulMs(
  rt: WebGPURuntime,
  m: number,
  n: number,
  k: number,
  reps: number,
  mode: "f32" | "f16",
): Promise<number[]> {
  const a = rt.upload(randomHost(m * k, 1), "f32");
  let b = rt.upload(randomHost(k * n, 2), "f32");
  if (mode === "f16") {
    const half = rt.alloc("f16", k * n);
    T.withBackend("webgpu", () => T.kernel("cast")(b as never, half as never, k * n, "f32", "f16"));
    rt.release(b);
    b = half;
  }
  const out = rt.alloc("f32", m * n);
  const times: number[] = [];
  for (let r = 0; r < reps + 1; r++) {
    const t0 = performance.now();
    gpuMatmul(rt, a, b, out, { batch: 1, m, n, k }, { f16Math: mode === "f16" });
    await rt.read({ ...out, length: 1 });
    if (r > 0) times.push(performance.now() - t0);
  }
  for (const x of [a, b, out]) rt.release(x);
  return times;
}

/** Timer of one kiln forward+backward of the reference decoder on webgpu (ms, to completion). */
export function kilnDecoder(rt: WebGPURuntime, cfg: DecoderConfig, ids: Int32Array): () => Promise<number> {
  const params = T.withBackend("webgpu", () => initDecoder(cfg, 0));
  return async () => {
    const t0 = performance.now();
    T.withBackend("webgpu", () => {
      for (const p of allParams(params)) p.grad = null;
      T.backward(decoderLoss(params, cfg, ids));
    });
    await rt.read({ ...(params.embed.grad?.arg() as T.GpuArray), length: 1 });
    return performance.now() - t0;
  };
}

export interface WebGPUBenchOptions {
  rounds?: number;
  matmulSizes?: number[];
  decoder?: DecoderConfig;
}

export async function benchWebGPU(reporter: BenchReporter, options: WebGPUBenchOptions = {}): Promise<void> {
  const rounds = options.rounds ?? 3;
  try {
    await T.initBackend("webgpu", { activate: false });
  } catch (err) {
    process.stderr.write(`  webgpu rows skipped: ${(err as Error).message}\n`);
    reporter.add({
      case: "matmul f32 1024x1024x1024, webgpu",
      metric: "kiln-webgpu",
      unit: "GFLOP/s",
      better: "higher",
      kiln: null,
      peer: "tfjs-webgpu",
      peer_value: null,
      note: `no WebGPU adapter: ${(err as Error).message}`,
    });
    return;
  }
  const rt = T.webgpuRuntime() as WebGPURuntime;
  const tfjs = await startTfjsWebGPU();
  const adapter = rt.info.adapterName;
  const note = `adapter ${adapter}; tfjs-webgpu 4.22.0 on the same adapter; median of ${rounds} interleaved rounds`;
  for (const n of options.matmulSizes ?? [1024]) {
    const kiln: number[] = [];
    const peer: number[] = [];
    for (let r = 0; r < rounds; r++) {
      kiln.push(median(await kilnMatmulMs(rt, n, n, n, 2, "f32")));
      if (tfjs) peer.push(median(await tfjsMatmulMs(tfjs, n, 2)));
    }
    reporter.add({
      case: `matmul f32 ${n}x${n}x${n}, webgpu`,
      metric: "kiln-webgpu",
      unit: "GFLOP/s",
      better: "higher",
      kiln: gflops(n, n, n, median(kiln)),
      peer: "tfjs-webgpu",
      peer_value: peer.length ? gflops(n, n, n, median(peer)) : null,
      note,
    });
  }
  const cfg = options.decoder ?? REFERENCE_DECODER;
  const ids = Int32Array.from(new T.Rng(1).uniform(cfg.batch * cfg.seq), (u) => Math.floor(u * cfg.vocab));
  const kilnRun = kilnDecoder(rt, cfg, ids);
  const tfjsRun = tfjs ? tfjsDecoder(tfjs, cfg, ids) : null;
  await kilnRun(); // pipelines compile on first use
  await tfjsRun?.();
  const kiln: number[] = [];
  const peer: number[] = [];
  for (let r = 0; r < rounds; r++) {
    kiln.push(await kilnRun());
    if (tfjsRun) peer.push(await tfjsRun());
  }
  const tokens = cfg.batch * cfg.seq;
  reporter.add({
    case: `decoder fwd+bwd, webgpu (${cfg.layers} layers, d=${cfg.dim}, T=${cfg.seq}, B=${cfg.batch})`,
    metric: "tokens/s",
    unit: "tok/s",
    better: "higher",
    kiln: (tokens / median(kiln)) * 1000,
    peer: "tfjs-webgpu",
    peer_value: peer.length ? (tokens / median(peer)) * 1000 : null,
    note: `${note}; tfjs attention materialises T×T scores (no fused kernel)`,
  });
  T.disposeWebGPUBackend();
}

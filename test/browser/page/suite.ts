// Runs inside headless Chromium (bundled by test/browser/browser.test.ts with esbuild). It exposes
// `window.kilnSuite`; the Node side calls its functions with page.evaluate and makes the assertions,
// so a failure shows up as a vitest failure with the numbers in it. It imports the package sources by
// path because this test directory does not depend on every package (the example page imports @kiln/*).
import { convertLlama2cToHf } from "../../../packages/hub-io/src/index.js";
import { attachLora } from "../../../packages/lora/src/index.js";
import { generateAsync, loadModel, loadTokenizer } from "../../../packages/models/src/index.js";
import * as T from "../../../packages/tensor/src/index.js";

/** Host values of a tensor on any backend (an async read works everywhere; the sync one where it exists). */
async function values(t: T.Tensor): Promise<Float32Array> {
  const anyT = t as unknown as { data?: () => Promise<ArrayLike<number>>; toFloat32Array?: () => Float32Array };
  if (typeof anyT.data === "function") return Float32Array.from(await anyT.data());
  return anyT.toFloat32Array!();
}

/** mulberry32: a small seeded generator, so a failing seed can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type Random = (shape: number[], lo?: number, hi?: number, grad?: boolean) => T.Tensor;

function randomFactory(seed: number): Random {
  const next = rng(seed);
  return (shape, lo = -1, hi = 1, grad = true) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const data = new Float32Array(n);
    for (let i = 0; i < n; i++) data[i] = lo + (hi - lo) * next();
    // On the backend under test, as a user's parameters would be (a host tensor would be copied per op).
    const t = T.Tensor.fromHost(data, shape);
    t.requiresGrad = grad;
    return t;
  };
}

interface ParityCase {
  name: string;
  /** Every output and gradient to compare; inputs come from `random` (same seed on every backend). */
  run(random: Random): T.Tensor[];
}

const parityCases: ParityCase[] = [
  {
    name: "matmul batched, transB, fwd+bwd (odd sizes)",
    run: (r) => {
      const a = r([3, 17, 9]);
      const b = r([3, 13, 9]);
      const y = T.matmul(a, b, { transB: true });
      T.backward(T.sum(T.square(y)));
      return [y, a.grad!, b.grad!];
    },
  },
  {
    name: "matmul transA, tiled size (70×130 · 70×65)",
    run: (r) => {
      const a = r([70, 130]);
      const b = r([70, 65]);
      const y = T.matmul(a, b, { transA: true });
      T.backward(T.sum(T.square(y)));
      return [y, a.grad!, b.grad!];
    },
  },
  {
    name: "linear with a frozen bf16 weight",
    run: (r) => {
      const x = r([5, 33]);
      const w = r([21, 33], -1, 1, false).to("bf16");
      const y = T.linear(x, w);
      T.backward(T.sum(T.square(y)));
      return [y, x.grad!];
    },
  },
  {
    name: "rmsNorm fwd+bwd (2100×130, split across threads on wasm)",
    run: (r) => {
      const x = r([2100, 130], -2, 2);
      const w = r([130], 0.5, 1.5);
      const y = T.rmsNorm(x, w, { eps: 1e-5 });
      T.backward(T.sum(T.square(y)));
      return [y, x.grad!, w.grad!];
    },
  },
  {
    name: "rope fwd+bwd, partial rotary 12 of 16, per-batch positions",
    run: (r) => {
      const x = r([3, 2, 5, 16], -3, 3);
      const positions = Int32Array.from({ length: 15 }, (_, i) => (i * 37) % 101);
      const y = T.rope(x, positions, T.ropeInvFreq(12, 10000), { rotaryDim: 12 });
      T.backward(T.sum(T.mul(y, r([3, 2, 5, 16], -1, 1, false))));
      return [y, x.grad!];
    },
  },
  {
    name: "ropeHeads fwd+bwd ([B, T, H, D], head permute fused)",
    run: (r) => {
      const x = r([2, 40, 4, 32], -3, 3);
      const positions = Int32Array.from({ length: 80 }, (_, i) => (i * 7) % 90);
      const y = T.ropeHeads(x, positions, T.ropeInvFreq(32, 10000));
      T.backward(T.sum(T.mul(y, r([2, 4, 40, 32], -1, 1, false))));
      return [y, x.grad!];
    },
  },
  {
    name: "attention GQA + causal + padding mask fwd+bwd",
    run: (r) => {
      const q = r([2, 4, 70, 8]);
      const k = r([2, 2, 70, 8]);
      const v = r([2, 2, 70, 8]);
      const keyMask = Uint8Array.from({ length: 140 }, (_, i) => (i >= 70 && i < 73 ? 0 : 1));
      const y = T.attention(q, k, v, { causal: true, keyMask });
      T.backward(T.sum(T.square(y)));
      return [y, q.grad!, k.grad!, v.grad!];
    },
  },
  {
    name: "attention KV-cache decode (tq < tk)",
    run: (r) => {
      const q = r([1, 2, 3, 8]);
      const k = r([1, 2, 9, 8]);
      const v = r([1, 2, 9, 8]);
      const y = T.attention(q, k, v, { causal: true });
      T.backward(T.sum(T.square(y)));
      return [y, q.grad!, k.grad!, v.grad!];
    },
  },
  {
    name: "swiglu fwd+bwd (75,000 elements)",
    run: (r) => {
      const g = r([300, 250], -6, 6);
      const u = r([300, 250]);
      const y = T.swiglu(g, u);
      T.backward(T.sum(T.square(y)));
      return [y, g.grad!, u.grad!];
    },
  },
  {
    name: "softmax and logSoftmax rows fwd+bwd",
    run: (r) => {
      const x = r([37, 515], -5, 5);
      const y = T.softmax(x, -1);
      const z = T.logSoftmax(x, -1);
      T.backward(T.add(T.sum(T.square(y)), T.sum(T.mul(z, r([37, 515], -1, 1, false)))));
      return [y, z, x.grad!];
    },
  },
  {
    name: "cross-entropy fwd+bwd with ignored rows (vocab 512)",
    run: (r) => {
      const logits = r([9, 512], -4, 4);
      const y = T.crossEntropy(logits, T.tensor([1, 2, -100, 4, 49, 0, 511, 8, 9], [9], "i32"));
      T.backward(y);
      return [y, logits.grad!];
    },
  },
  {
    name: "elementwise + broadcast + reductions fwd+bwd",
    run: (r) => {
      const a = r([6, 1, 33], -2, 2);
      const b = r([1, 5, 33], 0.5, 2);
      const y = T.div(T.mul(T.silu(a), T.exp(T.neg(b))), T.add(b, T.scalar(1)));
      const s = T.mean(T.square(y), -1);
      T.backward(T.sum(T.mul(s, T.tanh(s))));
      return [y, s, a.grad!, b.grad!];
    },
  },
  {
    name: "embedding and gather fwd+bwd (repeated ids: scatter-add in the backward)",
    run: (r) => {
      const table = r([37, 24]);
      const ids = T.Tensor.fromHost(
        Int32Array.from({ length: 30 }, (_, i) => (i * 11) % 13),
        [5, 6],
        "i32",
      );
      const e = T.embedding(table, ids);
      const x = r([6, 9]);
      const index = T.Tensor.fromHost(
        Int32Array.from({ length: 18 }, (_, i) => (i * 5) % 9),
        [6, 3],
        "i32",
      );
      const g = T.gather(x, 1, index);
      T.backward(T.add(T.sum(T.square(e)), T.sum(T.mul(g, g))));
      return [e, g, table.grad!, x.grad!];
    },
  },
  {
    name: "movement: permute, narrow, concat, transpose fwd+bwd",
    run: (r) => {
      const a = r([3, 4, 5]);
      const b = r([3, 2, 5]);
      const c = T.concat([a, b], 1);
      const p = T.permute(c, [2, 0, 1]);
      const n = T.narrow(p, 2, 1, 5);
      const t = T.transpose(n, 0, 2);
      T.backward(T.sum(T.mul(t, T.tanh(t))));
      return [c, p, n, t, a.grad!, b.grad!];
    },
  },
  {
    name: "max, logsumexp, argmax, where, clamp, maximum fwd+bwd",
    run: (r) => {
      const x = r([11, 29], -3, 3);
      const m = T.max(x, -1);
      const l = T.logsumexp(x, -1);
      const am = T.argmax(x, -1);
      const w = T.where(T.compare("gt", x, 0.5), T.clamp(x, -1, 2), T.maximum(x, T.scalar(-0.25)));
      T.backward(T.add(T.add(T.sum(m), T.sum(T.square(l))), T.sum(T.square(w))));
      return [m, l, am.to("f32"), w, x.grad!];
    },
  },
  {
    name: "dropout (counter-based mask: same seed, same mask on every backend) fwd+bwd",
    run: (r) => {
      const x = r([17, 33]);
      const y = T.dropout(x, 0.3, { seed: 1234, offset: 77 });
      T.backward(T.sum(T.square(y)));
      return [y, x.grad!];
    },
  },
  {
    name: "AdamW, 3 steps over 70,001 elements",
    run: (r) => {
      const w = r([70001]);
      const opt = new T.AdamW([w], { lr: 0.01, weightDecay: 0.1 });
      for (let step = 0; step < 3; step++) {
        opt.zeroGrad();
        T.backward(T.sum(T.mul(T.square(w), r([70001], -1, 1, false))));
        opt.step();
      }
      return [w.detach()];
    },
  },
];

export interface ParityRow {
  name: string;
  /** Largest |backend − js| over every output and gradient of the case. */
  maxAbsDiff: number;
  /** Largest |js| over the same values (for a relative reading). */
  maxAbsRef: number;
  count: number;
  error?: string;
}

async function runCase(backend: string, c: ParityCase, seed: number): Promise<Float32Array[]> {
  const outputs = T.withBackend(backend, () => c.run(randomFactory(seed)));
  return Promise.all(outputs.map((t) => values(t)));
}

async function parity(backend: string, seed: number): Promise<ParityRow[]> {
  const rows: ParityRow[] = [];
  for (const [i, c] of parityCases.entries()) {
    const row: ParityRow = { name: c.name, maxAbsDiff: 0, maxAbsRef: 0, count: 0 };
    try {
      const ref = await runCase("js", c, seed + i);
      const got = await runCase(backend, c, seed + i);
      if (got.length !== ref.length) throw new Error(`${got.length} outputs, js gave ${ref.length}`);
      for (let o = 0; o < ref.length; o++) {
        if (got[o].length !== ref[o].length)
          throw new Error(`output ${o} has ${got[o].length} values, js gave ${ref[o].length}`);
        for (let j = 0; j < ref[o].length; j++) {
          const d = Math.abs(got[o][j] - ref[o][j]);
          // NaN anywhere must fail the comparison, not vanish in Math.max.
          row.maxAbsDiff = Number.isNaN(d) ? Number.POSITIVE_INFINITY : Math.max(row.maxAbsDiff, d);
          row.maxAbsRef = Math.max(row.maxAbsRef, Math.abs(ref[o][j]));
        }
        row.count += ref[o].length;
      }
    } catch (err) {
      row.error = String((err as Error)?.stack ?? err);
    }
    rows.push(row);
  }
  return rows;
}

const modelBytes: Record<string, Uint8Array> = {};
async function fetchBytes(url: string): Promise<Uint8Array> {
  if (!modelBytes[url]) {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`GET ${url}: ${res.status}`);
    modelBytes[url] = new Uint8Array(await res.arrayBuffer());
  }
  return modelBytes[url];
}

export interface LoraRun {
  backend: string;
  losses: number[];
  /** Every adapter parameter after the first optimizer step, concatenated. */
  adapterValues: number[];
  greedyBefore: number[];
  greedyText: string;
  greedyError?: string;
  ms: number;
  /** Wall time of each step, up to its loss value on the host (the first one includes shader compiles). */
  stepMs: number[];
}

/** LoRA SFT on stories260K (converted from the llama2.c files in the page), same seed on every backend. */
async function loraSteps(backend: string, steps: number): Promise<LoraRun> {
  const files = convertLlama2cToHf(
    await fetchBytes("/model/stories260K.bin"),
    await fetchBytes("/model/tok512.bin"),
  ).files;
  const previous = T.getBackend();
  T.setBackend(backend);
  try {
    const model = await loadModel(files);
    const tokenizer = await loadTokenizer(files);
    const prompt = tokenizer.encode("Once upon a time, there was a");
    // Generation is checked on its own, so a failure there does not hide the training comparison.
    let greedyBefore: number[] = [];
    let greedyText = "";
    let greedyError: string | undefined;
    try {
      // generateAsync reads logits with awaits, so it runs on every backend (webgpu has no sync read).
      const [before] = await generateAsync(model, [prompt], { maxNewTokens: 12, temperature: 0, tokenizer });
      greedyBefore = before.tokenIds;
      greedyText = before.text;
    } catch (err) {
      greedyError = String((err as Error)?.stack ?? err);
    }
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
    const x = T.Tensor.fromHost(inputs, [batch, seq], "i32");
    const y = T.Tensor.fromHost(targets, [batch * seq], "i32");
    const adapter = attachLora(model, { r: 8, alpha: 16, dropout: 0, targetModules: "all-linear", seed: 1 });
    const opt = new T.AdamW(adapter.parameters(), { lr: 1e-2, weightDecay: 0 });
    const losses: number[] = [];
    const adapterValues: number[] = [];
    const stepMs: number[] = [];
    const t0 = performance.now();
    for (let step = 0; step < steps; step++) {
      const s0 = performance.now();
      opt.zeroGrad();
      const loss = T.crossEntropy(T.reshape(model.forward(x), [batch * seq, -1]), y);
      T.backward(loss);
      opt.step();
      losses.push((await values(loss))[0]);
      stepMs.push(performance.now() - s0);
      if (step === 0) for (const p of adapter.parameters()) adapterValues.push(...(await values(p)));
    }
    const ms = performance.now() - t0;
    return {
      backend,
      losses,
      adapterValues,
      greedyBefore,
      greedyText,
      greedyError,
      ms,
      stepMs,
    };
  } finally {
    T.setBackend(previous);
  }
}

export interface Environment {
  crossOriginIsolated: boolean;
  sharedArrayBuffer: boolean;
  hardwareConcurrency: number;
  webgpu: boolean;
  adapter: string | null;
  backends: string[];
  wasmThreads: number | null;
}

async function environment(): Promise<Environment> {
  let adapter: string | null = null;
  const gpu = (
    navigator as { gpu?: { requestAdapter(): Promise<{ info?: { vendor: string; architecture: string } } | null> } }
  ).gpu;
  if (gpu) {
    const a = await gpu.requestAdapter();
    adapter = a ? `${a.info?.vendor ?? "?"}/${a.info?.architecture ?? "?"}` : null;
  }
  const kernels = T.wasmKernels?.() as { threads?: number } | null | undefined;
  return {
    crossOriginIsolated: globalThis.crossOriginIsolated === true,
    sharedArrayBuffer: typeof SharedArrayBuffer === "function",
    hardwareConcurrency: navigator.hardwareConcurrency,
    webgpu: Boolean(gpu),
    adapter,
    backends: T.listBackends(),
    wasmThreads: kernels?.threads ?? null,
  };
}

/** Starts a backend; `threads` undefined lets the wasm backend choose. Resolves to the error text, if any. */
async function init(backend: string, threads?: number): Promise<string | null> {
  try {
    await T.initBackend(backend, { threads, activate: false });
    return null;
  } catch (err) {
    return String((err as Error)?.message ?? err);
  }
}

const suite = { environment, init, parity, loraSteps, caseCount: parityCases.length };
(globalThis as { kilnSuite?: typeof suite }).kilnSuite = suite;
document.title = "kiln browser suite ready";

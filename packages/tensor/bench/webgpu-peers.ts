// The same-adapter peer of the webgpu rows: @tensorflow/tfjs-backend-webgpu running in Node over the
// `webgpu` package (Dawn), given its own GPU instance through navigator.gpu before it loads.
import { rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import type { DecoderConfig } from "./decoder-model.js";

type Tf = typeof import("@tensorflow/tfjs-core");

/**
 * tfjs-core's Node bundle ships no gradient functions (the umbrella @tensorflow/tfjs imports
 * dist/register_all_gradients, an ES module tree Node cannot load: extensionless imports). Bundle that
 * entry with esbuild (tsx's copy) into one CommonJS file and load it; it registers into tfjs's global
 * gradient registry and engine, which every copy of tfjs-core shares.
 */
async function registerTfjsGradients(): Promise<void> {
  const root = createRequire(join(process.cwd(), "..", "..", "package.json"));
  const esbuild = createRequire(root.resolve("tsx/package.json"))("esbuild") as {
    build(options: Record<string, unknown>): Promise<unknown>;
  };
  const here = createRequire(import.meta.url);
  const entry = join(dirname(here.resolve("@tensorflow/tfjs-core/package.json")), "dist", "register_all_gradients.js");
  const outfile = join(tmpdir(), `kiln-tfjs-gradients-${process.pid}.cjs`);
  await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    format: "cjs",
    platform: "node",
    outfile,
    logLevel: "silent",
  });
  try {
    here(outfile);
  } finally {
    rmSync(outfile, { force: true });
  }
}

export interface TfjsWebGPU {
  tf: Tf;
  adapter: string;
}

/** tfjs-core with the webgpu backend active, or null with the reason printed. */
export async function startTfjsWebGPU(): Promise<TfjsWebGPU | null> {
  try {
    const { create, globals } = (await import("webgpu")) as unknown as {
      create: (flags: string[]) => GPU;
      globals: Record<string, unknown>;
    };
    for (const [k, v] of Object.entries(globals))
      if (!(k in globalThis)) (globalThis as Record<string, unknown>)[k] = v;
    const g = globalThis as { navigator?: { gpu?: GPU } };
    // tfjs reads navigator.gpu when its backend loads; Node ≥ 21 has a navigator without gpu.
    if (!g.navigator) Object.defineProperty(globalThis, "navigator", { value: {}, configurable: true, writable: true });
    if (!g.navigator?.gpu) Object.defineProperty(g.navigator, "gpu", { value: create([]), configurable: true });
    const tf = await import("@tensorflow/tfjs-core");
    await registerTfjsGradients();
    await import("@tensorflow/tfjs-backend-webgpu");
    if (!(await tf.setBackend("webgpu"))) throw new Error("tf.setBackend('webgpu') returned false");
    await tf.ready();
    const adapter = ((tf.backend() as unknown as { adapterInfo?: { description?: string } }).adapterInfo?.description ??
      "webgpu") as string;
    return { tf, adapter };
  } catch (err) {
    process.stderr.write(`  tfjs-webgpu peer missing (${String(err)})\n`);
    return null;
  }
}

/** ms for one n×n×n f32 matmul on tfjs-webgpu including execution (a 1-element readback waits for it). */
export async function tfjsMatmulMs(t: TfjsWebGPU, n: number, reps: number): Promise<number[]> {
  const { tf } = t;
  const a = tf.randomUniform([n, n], -1, 1);
  const b = tf.randomUniform([n, n], -1, 1);
  const times: number[] = [];
  for (let r = 0; r < reps + 1; r++) {
    const t0 = performance.now();
    const c = tf.matMul(a, b);
    const first = tf.slice(c, [0, 0], [1, 1]);
    await first.data();
    if (r > 0) times.push(performance.now() - t0);
    c.dispose();
    first.dispose();
  }
  a.dispose();
  b.dispose();
  return times;
}

/**
 * The reference decoder (decoder-model.ts) in tfjs ops: RMSNorm, RoPE by halves, causal softmax
 * attention (T×T scores: tfjs has no fused attention), SwiGLU, untied head, mean cross-entropy over
 * the first T−1 positions. Returns a function timing one forward+backward (ms, waiting for the device).
 */
export function tfjsDecoder(t: TfjsWebGPU, cfg: DecoderConfig, ids: Int32Array): () => Promise<number> {
  const { tf } = t;
  const { batch: B, seq: S, dim, heads, hidden, vocab, layers } = cfg;
  const hd = dim / heads;
  const half = hd / 2;
  const w = (o: number, i: number) => tf.variable(tf.randomNormal([o, i], 0, 0.02));
  const ones = (n: number) => tf.variable(tf.ones([n]));
  const P = {
    embed: w(vocab, dim),
    layers: Array.from({ length: layers }, () => ({
      attnNorm: ones(dim),
      wq: w(dim, dim),
      wk: w(dim, dim),
      wv: w(dim, dim),
      wo: w(dim, dim),
      mlpNorm: ones(dim),
      gate: w(hidden, dim),
      up: w(hidden, dim),
      down: w(dim, hidden),
    })),
    norm: ones(dim),
    head: w(vocab, dim),
  };
  const invFreq = Float32Array.from({ length: half }, (_, i) => 1 / 10000 ** ((2 * i) / hd));
  const ang = new Float32Array(S * half);
  for (let s = 0; s < S; s++) for (let i = 0; i < half; i++) ang[s * half + i] = s * invFreq[i];
  const cos = tf.cos(tf.tensor2d(ang, [S, half]));
  const sin = tf.sin(tf.tensor2d(ang, [S, half]));
  const maskValues = new Float32Array(S * S);
  for (let i = 0; i < S; i++) for (let j = i + 1; j < S; j++) maskValues[i * S + j] = -1e9;
  const causal = tf.tensor2d(maskValues, [S, S]);
  const idsT = tf.tensor2d(ids, [B, S], "int32");
  const targets = new Int32Array(B * S);
  const weights = new Float32Array(B * S);
  for (let b = 0; b < B; b++)
    for (let s = 0; s < S; s++) {
      targets[b * S + s] = s + 1 < S ? ids[b * S + s + 1] : 0;
      weights[b * S + s] = s + 1 < S ? 1 : 0;
    }
  const onehot = tf.oneHot(tf.tensor1d(targets, "int32"), vocab);
  const lossWeights = tf.tensor1d(weights);
  type T2 = import("@tensorflow/tfjs-core").Tensor;
  const rms = (x: T2, g: T2) => tf.mul(tf.mul(x, tf.rsqrt(tf.add(tf.mean(tf.square(x), -1, true), 1e-5))), g);
  const lin = (x: T2, wt: T2) => tf.matMul(x, wt, false, true);
  const rope = (x: T2) => {
    const x1 = tf.slice(x, [0, 0, 0, 0], [B, heads, S, half]);
    const x2 = tf.slice(x, [0, 0, 0, half], [B, heads, S, half]);
    return tf.concat([tf.sub(tf.mul(x1, cos), tf.mul(x2, sin)), tf.add(tf.mul(x2, cos), tf.mul(x1, sin))], -1);
  };
  const split = (x: T2) => tf.transpose(tf.reshape(x, [B, S, heads, hd]), [0, 2, 1, 3]);
  const loss = () => {
    let h = tf.reshape(tf.gather(P.embed, tf.reshape(idsT, [B * S])), [B * S, dim]);
    for (const l of P.layers) {
      const n = rms(h, l.attnNorm);
      const q = rope(split(lin(n, l.wq)));
      const k = rope(split(lin(n, l.wk)));
      const v = split(lin(n, l.wv));
      const scores = tf.add(tf.mul(tf.matMul(q, k, false, true), 1 / Math.sqrt(hd)), causal);
      const a = tf.reshape(tf.transpose(tf.matMul(tf.softmax(scores), v), [0, 2, 1, 3]), [B * S, dim]);
      const x2 = tf.add(h, lin(a, l.wo));
      const m = rms(x2, l.mlpNorm);
      const g = lin(m, l.gate);
      h = tf.add(x2, lin(tf.mul(tf.mul(g, tf.sigmoid(g)), lin(m, l.up)), l.down));
    }
    const logits = lin(rms(h, P.norm), P.head);
    return tf.losses.softmaxCrossEntropy(onehot, logits, lossWeights) as import("@tensorflow/tfjs-core").Scalar;
  };
  return async () => {
    const t0 = performance.now();
    const { value, grads } = tf.variableGrads(loss);
    await grads[P.embed.name].data();
    const ms = performance.now() - t0;
    value.dispose();
    for (const g of Object.values(grads)) g.dispose();
    return ms;
  };
}

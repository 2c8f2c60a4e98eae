// The reference decoder of the tensor benchmark, written with @kiln/tensor ops:
// Llama-style pre-norm blocks (RMSNorm, RoPE, causal MHA, SwiGLU), untied LM head.
import * as T from "../src/index.js";

export interface DecoderConfig {
  layers: number;
  dim: number;
  heads: number;
  hidden: number;
  vocab: number;
  seq: number;
  batch: number;
}

export const REFERENCE_DECODER: DecoderConfig = {
  layers: 4,
  dim: 256,
  heads: 4,
  hidden: 688,
  vocab: 2048,
  seq: 128,
  batch: 4,
};

export interface DecoderParams {
  embed: T.Tensor;
  layers: {
    attnNorm: T.Tensor;
    wq: T.Tensor;
    wk: T.Tensor;
    wv: T.Tensor;
    wo: T.Tensor;
    mlpNorm: T.Tensor;
    gate: T.Tensor;
    up: T.Tensor;
    down: T.Tensor;
  }[];
  norm: T.Tensor;
  head: T.Tensor;
}

export function initDecoder(cfg: DecoderConfig, seed = 0): DecoderParams {
  const rng = new T.Rng(seed);
  const w = (out: number, inp: number) => T.randn([out, inp], { rng, std: 0.02 }).requireGrad();
  const ones = (n: number) => T.ones([n]).requireGrad();
  return {
    embed: w(cfg.vocab, cfg.dim),
    layers: Array.from({ length: cfg.layers }, () => ({
      attnNorm: ones(cfg.dim),
      wq: w(cfg.dim, cfg.dim),
      wk: w(cfg.dim, cfg.dim),
      wv: w(cfg.dim, cfg.dim),
      wo: w(cfg.dim, cfg.dim),
      mlpNorm: ones(cfg.dim),
      gate: w(cfg.hidden, cfg.dim),
      up: w(cfg.hidden, cfg.dim),
      down: w(cfg.dim, cfg.hidden),
    })),
    norm: ones(cfg.dim),
    head: w(cfg.vocab, cfg.dim),
  };
}

export function allParams(p: DecoderParams): T.Tensor[] {
  return [p.embed, ...p.layers.flatMap((l) => Object.values(l)), p.norm, p.head];
}

/** Mean next-token cross-entropy of `ids` [B, T] (targets = ids shifted left, last position ignored). */
export function decoderLoss(p: DecoderParams, cfg: DecoderConfig, ids: Int32Array, checkpointLayers = false): T.Tensor {
  const { batch: B, seq: S, dim, heads } = cfg;
  const hd = dim / heads;
  const invFreq = T.ropeInvFreq(hd, 10000);
  const positions = Int32Array.from({ length: S }, (_, i) => i);
  let h = T.embedding(p.embed, new T.Tensor(ids, [B, S], "i32"));
  const heads4 = (x: T.Tensor) => T.reshape(x, [B, S, heads, hd]);
  const split = (x: T.Tensor) => T.permute(heads4(x), [0, 2, 1, 3]);
  for (const l of p.layers) {
    const block = (x: T.Tensor) => {
      const n = T.rmsNorm(x, l.attnNorm, { eps: 1e-5 });
      // RoPE fused with the permute to [B, H, T, D], as in @kiln/models' attention.
      const q = T.ropeHeads(heads4(T.linear(n, l.wq)), positions, invFreq);
      const k = T.ropeHeads(heads4(T.linear(n, l.wk)), positions, invFreq);
      const v = split(T.linear(n, l.wv));
      const a = T.reshape(T.permute(T.attention(q, k, v, { causal: true }), [0, 2, 1, 3]), [B, S, dim]);
      const x2 = T.add(x, T.linear(a, l.wo));
      const m = T.rmsNorm(x2, l.mlpNorm, { eps: 1e-5 });
      return T.add(x2, T.linear(T.swiglu(T.linear(m, l.gate), T.linear(m, l.up)), l.down));
    };
    h = checkpointLayers ? T.checkpoint(block, h) : block(h);
  }
  const logits = T.linear(T.rmsNorm(h, p.norm, { eps: 1e-5 }), p.head);
  const targets = new Int32Array(B * S);
  for (let b = 0; b < B; b++) for (let t = 0; t < S; t++) targets[b * S + t] = t + 1 < S ? ids[b * S + t + 1] : -100;
  return T.crossEntropy(T.reshape(logits, [B * S, cfg.vocab]), new T.Tensor(targets, [B * S], "i32"));
}

/** Token ids the step benchmarks train on: a fixed draw for `cfg`'s batch. */
export function referenceIds(cfg: DecoderConfig): Int32Array {
  return Int32Array.from(new T.Rng(1).uniform(cfg.batch * cfg.seq), (u) => Math.floor(u * cfg.vocab));
}

/**
 * What the step benchmarks train: the reference decoder (seed 0), its fixed ids and an AdamW over every parameter.
 * `step` is one whole training step inside tidy (gradients cleared, forward, backward, update).
 */
export function referenceTraining(checkpointLayers = false) {
  const cfg = REFERENCE_DECODER;
  const params = initDecoder(cfg, 0);
  const ids = referenceIds(cfg);
  const opt = new T.AdamW(allParams(params), { lr: 1e-3 });
  const clearGrads = () => {
    for (const p of allParams(params)) p.grad?.dispose();
    opt.zeroGrad();
  };
  const step = () => {
    clearGrads();
    const loss = T.tidy(() => {
      const l = decoderLoss(params, cfg, ids, checkpointLayers);
      T.backward(l);
      opt.step();
      return l;
    });
    loss.dispose();
  };
  return { cfg, params, ids, opt, clearGrads, step };
}

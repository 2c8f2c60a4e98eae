// Qwen3.5's Gated DeltaNet linear-attention layer (transformers Qwen3_5GatedDeltaNet, read at
// huggingface/transformers commit d8c1e2844cbfeae1e342a1723d7f4e69ff1adcc0,
// src/transformers/models/qwen3_5/modeling_qwen3_5.py; docs/NUMERICS.md §5.2):
//
//   qkv = conv1d_causal(in_proj_qkv(x)) → SiLU → split q, k, v (per head; q/k L2-normalised)
//   z = in_proj_z(x), β = σ(in_proj_b(x)), g = −exp(A_log) · softplus(in_proj_a(x) + dt_bias)
//   per head, state S ∈ R^{dk×dv}, S₀ = 0:  S ← e^{g_t} S;  S ← S + k_t (β_t (v_t − Sᵀk_t))ᵀ;  o_t = Sᵀ q_t / √dk
//   y = out_proj( RMSNorm(o) · w · silu(z) )
//
// Everything is written with @kiln/tensor ops, so it runs on every backend and autograd gives
// the gradients. The recurrence has two forms with the same result: `gatedDeltaRuleChunked`
// (training and prefill; work per chunk is matrix products) and `gatedDeltaRuleRecurrent`
// (one token at a time; decoding).
import {
  type Tensor,
  add,
  broadcastTo,
  concat,
  exp,
  matmul,
  mul,
  narrow,
  neg,
  permute,
  reshape,
  rmsNorm,
  rsqrt,
  sigmoid,
  silu,
  softplus,
  square,
  sub,
  sum,
  tensor,
  unsqueeze,
  zeros,
} from "@kiln/tensor";
import type { DecoderConfig, LinearAttentionConfig } from "./decoder-config.js";
import type { OtherLayerCache } from "./kv-cache.js";
import { GenerationError, ModelConfigError } from "./errors.js";
import type { LayerContext } from "./layer-context.js";
import type { Linear } from "./linear.js";

/** What a linear-attention layer keeps in `KVCache.layers[i]` between forwards. */
export interface LinearAttentionLayerCache extends OtherLayerCache {
  kind: "linear_attention";
  /** The last (kernel − 1) conv inputs, [B, kernel − 1, convDim]. */
  conv: Tensor;
  /** The delta-rule state, [B, Hv, dk, dv]. */
  state: Tensor;
}

export interface GatedDeltaRuleInputs {
  /** [B, H, T, dk], L2-normalised; scaled by dk^−½ inside. */
  q: Tensor;
  /** [B, H, T, dk], L2-normalised. */
  k: Tensor;
  /** [B, H, T, dv]. */
  v: Tensor;
  /** Log decay per token, [B, H, T] (≤ 0). */
  g: Tensor;
  /** Write strength per token, [B, H, T]. */
  beta: Tensor;
  /** State before the first token, [B, H, dk, dv]; zeros when absent. */
  initialState?: Tensor | null;
}

export interface GatedDeltaRuleOutput {
  /** [B, H, T, dv]. */
  out: Tensor;
  /** State after the last token, [B, H, dk, dv]. */
  state: Tensor;
}

function ruleShapes(x: GatedDeltaRuleInputs): [number, number, number, number, number] {
  const [B, H, T, dk] = x.k.shape;
  const dv = x.v.shape[3];
  const ok =
    x.q.rank === 4 &&
    x.k.rank === 4 &&
    x.v.rank === 4 &&
    x.q.shape.every((d, i) => d === x.k.shape[i]) &&
    x.v.shape[0] === B &&
    x.v.shape[1] === H &&
    x.v.shape[2] === T &&
    x.g.shape.length === 3 &&
    x.beta.shape.length === 3 &&
    [x.g, x.beta].every((t) => t.shape[0] === B && t.shape[1] === H && t.shape[2] === T) &&
    (!x.initialState ||
      (x.initialState.rank === 4 && [B, H, dk, dv].every((d, i) => (x.initialState as Tensor).shape[i] === d)));
  if (!ok) {
    const s = (t: Tensor | null | undefined) => (t ? `[${t.shape.join(", ")}]` : "none");
    throw new GenerationError(
      `gated delta rule: shapes q ${s(x.q)} k ${s(x.k)} v ${s(x.v)} g ${s(x.g)} beta ${s(x.beta)} state ${s(x.initialState)} do not agree (want q, k [B, H, T, dk], v [B, H, T, dv], g, beta [B, H, T], state [B, H, dk, dv])`,
    );
  }
  return [B, H, T, dk, dv];
}

/** Token-by-token form (transformers torch_recurrent_gated_delta_rule). */
export function gatedDeltaRuleRecurrent(x: GatedDeltaRuleInputs): GatedDeltaRuleOutput {
  const [B, H, T, dk, dv] = ruleShapes(x);
  const q = mul(x.q, 1 / Math.sqrt(dk));
  let state = x.initialState ?? zeros([B, H, dk, dv]);
  const outs: Tensor[] = [];
  for (let t = 0; t < T; t++) {
    const at = (u: Tensor) => narrow(u, 2, t, t + 1);
    const kt = at(x.k);
    const decay = reshape(exp(at(x.g)), [B, H, 1, 1]);
    const betaT = reshape(at(x.beta), [B, H, 1, 1]);
    state = mul(state, decay);
    const delta = mul(sub(at(x.v), matmul(kt, state)), betaT);
    state = add(state, matmul(kt, delta, { transA: true }));
    outs.push(matmul(at(q), state));
  }
  return { out: T === 1 ? outs[0] : concat(outs, 2), state };
}

/** Constant [n, n] masks: lower triangle including (or excluding) the diagonal, and its transpose. */
function triangle(n: number, kind: "lower" | "strictLower" | "upper"): Tensor {
  const m = new Float32Array(n * n);
  for (let i = 0; i < n; i++) {
    for (let j = 0; j < n; j++) {
      const on = kind === "lower" ? j <= i : kind === "strictLower" ? j < i : j >= i;
      m[i * n + j] = on ? 1 : 0;
    }
  }
  return tensor(m, [n, n]);
}

/**
 * (I + M)⁻¹ for strictly lower-triangular M [..., n, n], by recursive block
 * inversion, all diagonal blocks of one size at once (n is padded to a power of two with an identity
 * block, which leaves the leading n×n block of the inverse unchanged): with L = [[A, 0], [C, D]],
 * L⁻¹ = [[A⁻¹, 0], [−D⁻¹ C A⁻¹, D⁻¹]], from 1×1 blocks up to n×n in log₂ n steps. Same numbers
 * as forward substitution (transformers' loop) up to rounding; unlike a power series
 * (I − M + M² …) it stays accurate when the keys of a chunk are nearly parallel, where powers
 * of M grow combinatorially.
 */
function unitLowerInverse(m: Tensor): Tensor {
  const size = m.shape[m.rank - 1];
  const lead = m.shape.slice(0, -2);
  const n = 2 ** Math.ceil(Math.log2(size));
  if (n !== size) {
    const wide = concat([m, zeros([...lead, size, n - size])], lead.length + 1);
    const padded = concat([wide, zeros([...lead, n - size, n])], lead.length);
    const full = unitLowerInverse(padded);
    return narrow(narrow(full, lead.length, 0, size), lead.length + 1, 0, size);
  }
  let inv = broadcastTo(tensor(new Float32Array(n).fill(1), [n, 1, 1]), [...lead, n, 1, 1]);
  for (let s = 1; s < n; s *= 2) {
    const blocks = n / (2 * s);
    // The 2s×2s diagonal blocks of M: keep block row p = block column p, sum the others away.
    const pick = new Float32Array(blocks * blocks);
    for (let p = 0; p < blocks; p++) pick[p * blocks + p] = 1;
    const diag = sum(
      mul(reshape(m, [...lead, blocks, 2 * s, blocks, 2 * s]), tensor(pick, [blocks, 1, blocks, 1])),
      lead.length + 2,
    );
    const lower = narrow(narrow(diag, lead.length + 1, s, 2 * s), lead.length + 2, 0, s);
    const pairs = reshape(inv, [...lead, blocks, 2, s, s]);
    const aInv = reshape(narrow(pairs, lead.length + 1, 0, 1), [...lead, blocks, s, s]);
    const dInv = reshape(narrow(pairs, lead.length + 1, 1, 2), [...lead, blocks, s, s]);
    const corner = neg(matmul(dInv, matmul(lower, aInv)));
    const top = concat([aInv, zeros([...lead, blocks, s, s])], lead.length + 2);
    const bottom = concat([corner, dInv], lead.length + 2);
    inv = concat([top, bottom], lead.length + 1);
  }
  return reshape(inv, [...lead, n, n]);
}

/** Default tokens per chunk (transformers and flash-linear-attention use 64). */
export const DEFAULT_CHUNK_SIZE = 64;

/**
 * Chunked form (transformers torch_chunk_gated_delta_rule; the WY/UT representation of
 * Yang et al., "Gated Delta Networks"): inside a chunk the writes are solved at once with a
 * unit-lower-triangular inverse; the state is carried from chunk to chunk. Same maths as the
 * recurrent form; the sequence is zero-padded to a multiple of the chunk size (padded tokens
 * have β = 0 and g = 0, so they leave the state unchanged).
 */
export function gatedDeltaRuleChunked(x: GatedDeltaRuleInputs, chunkSize = DEFAULT_CHUNK_SIZE): GatedDeltaRuleOutput {
  const [B, H, T, dk, dv] = ruleShapes(x);
  if (!(Number.isInteger(chunkSize) && chunkSize >= 1))
    throw new GenerationError(`gated delta rule: chunkSize ${chunkSize} must be a positive integer`);
  const C = Math.min(chunkSize, Math.max(T, 1));
  const pad = (C - (T % C)) % C;
  const padT = (t: Tensor) =>
    pad === 0 ? t : concat([t, zeros(t.rank === 4 ? [B, H, pad, t.shape[3]] : [B, H, pad])], 2);
  const Tp = T + pad;
  const N = Tp / C;
  const chunks = (t: Tensor, d: number) => reshape(padT(t), [B, H, N, C, d]);
  const q = chunks(mul(x.q, 1 / Math.sqrt(dk)), dk);
  const k = chunks(x.k, dk);
  const v = chunks(x.v, dv);
  const beta = unsqueeze(reshape(padT(x.beta), [B, H, N, C]), -1);
  // Cumulative log decay inside each chunk: G_i = Σ_{j ≤ i} g_j (a product with the upper triangle).
  const G = reshape(matmul(reshape(padT(x.g), [B * H * N, C]), triangle(C, "upper")), [B, H, N, C]);
  const lower = triangle(C, "lower");
  // Decay between positions i ≥ j of a chunk, exp(G_i − G_j); masked before exp so j > i cannot overflow.
  const decay = mul(exp(mul(sub(unsqueeze(G, -1), unsqueeze(G, -2)), lower)), lower);
  const kBeta = mul(k, beta);
  const M = mul(mul(matmul(kBeta, k, { transB: true }), decay), triangle(C, "strictLower"));
  const inv = unitLowerInverse(M);
  const expG = unsqueeze(exp(G), -1);
  // Per chunk: U = what each token writes, W = how much it reads back of the incoming state.
  const U = matmul(inv, mul(v, beta));
  const W = matmul(inv, mul(kBeta, expG));
  const intra = mul(matmul(q, k, { transB: true }), decay);
  const qDecayed = mul(q, expG);
  const gLast = narrow(G, 3, C - 1, C);
  const kToEnd = mul(k, unsqueeze(exp(sub(gLast, G)), -1));
  // Chunk-major so each step takes a zero-copy view.
  const byChunk = (t: Tensor) => permute(t, [2, 0, 1, 3, 4]);
  const [Uc, Wc, intraC, qC, kC] = [U, W, intra, qDecayed, kToEnd].map(byChunk);
  const lastDecay = permute(reshape(exp(gLast), [B, H, N, 1, 1]), [2, 0, 1, 3, 4]);
  const at = (t: Tensor, n: number) => reshape(narrow(t, 0, n, n + 1), t.shape.slice(1));
  let state = x.initialState ?? zeros([B, H, dk, dv]);
  const outs: Tensor[] = [];
  for (let n = 0; n < N; n++) {
    const vNew = sub(at(Uc, n), matmul(at(Wc, n), state));
    outs.push(add(matmul(at(qC, n), state), matmul(at(intraC, n), vNew)));
    state = add(mul(state, at(lastDecay, n)), matmul(at(kC, n), vNew, { transA: true }));
  }
  const out = N === 1 ? outs[0] : concat(outs, 2);
  return { out: pad === 0 ? out : narrow(out, 2, 0, T), state };
}

/** x · rsqrt(Σx² + eps) over the last dim (transformers l2norm, eps 1e-6 as flash-linear-attention). */
export function l2Normalize(x: Tensor, eps = 1e-6): Tensor {
  return mul(x, rsqrt(add(sum(square(x), -1, true), eps)));
}

export interface GatedDeltaNetWeights {
  inProjQkv: Linear;
  inProjZ: Linear;
  inProjB: Linear;
  inProjA: Linear;
  outProj: Linear;
  /** [convDim, 1, kernel]. */
  conv1d: Tensor;
  /** [Hv]. */
  dtBias: Tensor;
  /** [Hv]. */
  aLog: Tensor;
  /** Gated RMSNorm weight [dv] (plain w, init 1). */
  norm: Tensor;
}

export class GatedDeltaNet {
  readonly dims: LinearAttentionConfig;
  /** Tokens per chunk of the chunked rule (tests use small ones to cover several chunks). */
  chunkSize = DEFAULT_CHUNK_SIZE;

  constructor(
    readonly config: DecoderConfig,
    readonly w: GatedDeltaNetWeights,
  ) {
    if (!config.linearAttention) throw new ModelConfigError("linear_attention layer without linear_* config fields");
    this.dims = config.linearAttention;
  }

  get convDim(): number {
    const { numKeyHeads, keyHeadDim, numValueHeads, valueHeadDim } = this.dims;
    return 2 * numKeyHeads * keyHeadDim + numValueHeads * valueHeadDim;
  }

  /** x [B, T, D] (already normed) → [B, T, D]. */
  forward(input: Tensor, ctx: LayerContext): Tensor {
    const [B, T] = input.shape;
    const { numKeyHeads: Hk, numValueHeads: Hv, keyHeadDim: dk, valueHeadDim: dv, convKernel: K } = this.dims;
    const keyDim = Hk * dk;
    const valueDim = Hv * dv;
    const cache = ctx.cache;
    const prev = cache?.layers[ctx.layerIndex] ?? null;
    if (prev !== null && prev.kind !== "linear_attention") {
      throw new GenerationError(`KVCache: layer ${ctx.layerIndex} holds "${prev.kind}" state, not linear_attention`);
    }
    const past = prev as LinearAttentionLayerCache | null;
    // Padded tokens are zeroed (transformers apply_mask_to_padding_states): with no bias anywhere
    // they then write nothing, so a left-padded row ends in the state of its unpadded self.
    const x = maskPadding(input, ctx, B, T);

    const mixed = this.w.inProjQkv.forward(x); // [B, T, convDim]
    const convIn = concat([past?.conv ?? zeros([B, K - 1, this.convDim]), mixed], 1);
    const taps = reshape(permute(reshape(this.w.conv1d, [this.convDim, K]), [1, 0]), [K, 1, this.convDim]);
    let conv: Tensor | null = null;
    for (let j = 0; j < K; j++) {
      const term = mul(narrow(convIn, 1, j, j + T), narrow(taps, 0, j, j + 1));
      conv = conv ? add(conv, term) : term;
    }
    const qkv = silu(conv as Tensor);

    const heads = (t: Tensor, n: number, d: number) => reshape(t, [B, T, n, d]);
    const groups = Hv / Hk;
    // Each q/k head serves `groups` consecutive value heads (repeat_interleave on the head axis).
    const toValueHeads = (t: Tensor) =>
      groups === 1 ? t : reshape(broadcastTo(unsqueeze(t, 3), [B, T, Hk, groups, dk]), [B, T, Hv, dk]);
    const headMajor = (t: Tensor) => permute(t, [0, 2, 1, 3]);
    const q = headMajor(toValueHeads(l2Normalize(heads(narrow(qkv, 2, 0, keyDim), Hk, dk))));
    const k = headMajor(toValueHeads(l2Normalize(heads(narrow(qkv, 2, keyDim, 2 * keyDim), Hk, dk))));
    const v = headMajor(heads(narrow(qkv, 2, 2 * keyDim, 2 * keyDim + valueDim), Hv, dv));

    const beta = permute(sigmoid(this.w.inProjB.forward(x)), [0, 2, 1]);
    const decayRate = neg(exp(this.w.aLog));
    const g = permute(mul(softplus(add(this.w.inProjA.forward(x), this.w.dtBias)), decayRate), [0, 2, 1]);

    const rule = { q, k, v, g, beta, initialState: past?.state ?? null };
    const { out, state } =
      T === 1 && past ? gatedDeltaRuleRecurrent(rule) : gatedDeltaRuleChunked(rule, this.chunkSize);
    if (cache) {
      const entry: LinearAttentionLayerCache = { kind: "linear_attention", conv: narrow(convIn, 1, T), state };
      cache.layers[ctx.layerIndex] = entry;
    }

    const z = heads(this.w.inProjZ.forward(x), Hv, dv);
    const o = mul(rmsNorm(permute(out, [0, 2, 1, 3]), this.w.norm, { eps: this.config.rmsNormEps }), silu(z));
    return this.w.outProj.forward(reshape(o, [B, T, valueDim]));
  }

  namedLinears(prefix: string): [string, Linear][] {
    return [
      [`${prefix}in_proj_qkv`, this.w.inProjQkv],
      [`${prefix}in_proj_z`, this.w.inProjZ],
      [`${prefix}in_proj_b`, this.w.inProjB],
      [`${prefix}in_proj_a`, this.w.inProjA],
      [`${prefix}out_proj`, this.w.outProj],
    ];
  }

  namedTensors(prefix: string): [string, Tensor][] {
    return [
      [`${prefix}conv1d.weight`, this.w.conv1d],
      [`${prefix}dt_bias`, this.w.dtBias],
      [`${prefix}A_log`, this.w.aLog],
      [`${prefix}norm.weight`, this.w.norm],
    ];
  }
}

/** Zeroes the rows of padded new tokens ([B, T] part of the key mask); x itself when none are padded. */
function maskPadding(x: Tensor, ctx: LayerContext, B: number, T: number): Tensor {
  const keyMask = ctx.keyMask;
  if (!keyMask) return x;
  const total = keyMask.length / B;
  const m = new Float32Array(B * T);
  let padded = false;
  for (let b = 0; b < B; b++) {
    for (let t = 0; t < T; t++) {
      m[b * T + t] = keyMask[b * total + total - T + t];
      if (m[b * T + t] === 0) padded = true;
    }
  }
  return padded ? mul(x, tensor(m, [B, T, 1])) : x;
}

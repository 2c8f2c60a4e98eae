// Fused neural-network ops: each has a dedicated forward and backward because fusing
// saves a pass or a large intermediate (softmax, norms, RoPE, SwiGLU, cross-entropy).
import { record } from "../autograd.js";
import { type RopeShape, kernel } from "../backend.js";
import { DTypeError, IndexError, ShapeError, fmtShape } from "../errors.js";
import { uniformFloats } from "../random.js";
import { normAxis, sizeOf } from "../shape.js";
import { Tensor } from "../tensor.js";
import { floatData } from "./elementwise.js";
import { transpose } from "./movement.js";

function lastAxisOp(name: string, x: Tensor, axis: number, fn: (t: Tensor) => Tensor): Tensor {
  const a = normAxis(name, axis, x.rank);
  if (a === x.rank - 1) return fn(x);
  return transpose(fn(transpose(x, a, -1)), a, -1);
}

/** Softmax along `axis` (default last). */
export function softmax(x: Tensor, axis = -1): Tensor {
  return lastAxisOp("softmax", x, axis, (t) => {
    const n = t.shape[t.rank - 1];
    const src = floatData("softmax", t);
    const y = new Float32Array(src.length);
    for (let o = 0; o < src.length; o += n) {
      let m = Number.NEGATIVE_INFINITY;
      for (let j = 0; j < n; j++) if (src[o + j] > m) m = src[o + j];
      let s = 0;
      for (let j = 0; j < n; j++) s += y[o + j] = Math.exp(src[o + j] - m);
      for (let j = 0; j < n; j++) y[o + j] /= s;
    }
    return record(new Tensor(y, t.shape), "softmax", [t], (g) => {
      const gd = g.data as Float32Array;
      const dx = new Float32Array(y.length);
      for (let o = 0; o < y.length; o += n) {
        let dot = 0;
        for (let j = 0; j < n; j++) dot += gd[o + j] * y[o + j];
        for (let j = 0; j < n; j++) dx[o + j] = y[o + j] * (gd[o + j] - dot);
      }
      return [new Tensor(dx, t.shape)];
    });
  });
}

/** log-softmax along `axis` (default last): x − logsumexp(x). */
export function logSoftmax(x: Tensor, axis = -1): Tensor {
  return lastAxisOp("logSoftmax", x, axis, (t) => {
    const n = t.shape[t.rank - 1];
    const src = floatData("logSoftmax", t);
    const y = new Float32Array(src.length);
    for (let o = 0; o < src.length; o += n) {
      let m = Number.NEGATIVE_INFINITY;
      for (let j = 0; j < n; j++) if (src[o + j] > m) m = src[o + j];
      let s = 0;
      for (let j = 0; j < n; j++) s += Math.exp(src[o + j] - m);
      const lse = m + Math.log(s);
      for (let j = 0; j < n; j++) y[o + j] = src[o + j] - lse;
    }
    return record(new Tensor(y, t.shape), "logSoftmax", [t], (g) => {
      const gd = g.data as Float32Array;
      const dx = new Float32Array(y.length);
      for (let o = 0; o < y.length; o += n) {
        let total = 0;
        for (let j = 0; j < n; j++) total += gd[o + j];
        for (let j = 0; j < n; j++) dx[o + j] = gd[o + j] - Math.exp(y[o + j]) * total;
      }
      return [new Tensor(dx, t.shape)];
    });
  });
}

export interface RmsNormOptions {
  eps?: number;
  /** Qwen3.5 / Gemma style: scale by (1 + w) with w initialised at 0. */
  zeroCentered?: boolean;
}

/** RMSNorm over the last dim: x / √(mean(x²) + eps) · w (transformers LlamaRMSNorm / Qwen3RMSNorm). */
export function rmsNorm(x: Tensor, weight: Tensor, options: RmsNormOptions = {}): Tensor {
  const dim = x.shape[x.rank - 1];
  if (weight.rank !== 1 || weight.shape[0] !== dim) {
    throw new ShapeError(`rmsNorm: weight ${fmtShape(weight.shape)} does not match last dim of ${fmtShape(x.shape)}`);
  }
  const eps = options.eps ?? 1e-6;
  const zc = options.zeroCentered ?? false;
  const xd = floatData("rmsNorm", x);
  const wd = floatData("rmsNorm", weight);
  const out = new Float32Array(xd.length);
  const rstd = new Float32Array(xd.length / dim);
  kernel("rmsNorm")(xd, wd, out, rstd, dim, eps, zc);
  return record(new Tensor(out, x.shape), "rmsNorm", [x, weight], (g) => {
    const dx = new Float32Array(xd.length);
    // A frozen norm weight (LoRA) needs no dw: the kernel then skips that sum.
    const dw = weight.requiresGrad ? new Float32Array(dim) : null;
    kernel("rmsNormBackward")(xd, wd, rstd, g.data as Float32Array, dx, dw, dim, zc);
    return [x.requiresGrad ? new Tensor(dx, x.shape) : null, dw ? new Tensor(dw, weight.shape) : null];
  });
}

export interface RopeOptions {
  /** Rotate only the first `rotaryDim` dims of each head (partial_rotary_factor · head_dim). Default all. */
  rotaryDim?: number;
}

interface RopeTables {
  positions: Int32Array;
  invFreq: Float32Array;
  invFreqCopy: Float32Array;
  cos: Float32Array;
  sin: Float32Array;
}

/** Recent cos/sin tables: every layer's q and k rotate by the same angles, so one table serves them all. */
const ropeTableCache: RopeTables[] = [];
const ROPE_TABLE_CACHE_SIZE = 4;

/**
 * cos/sin of position · invFreq[i] as [positions][half] f32 tables (the angle rounded to f32 first, as
 * transformers computes it in f32). A cached table is reused only for equal positions and the same,
 * unmodified invFreq array; the kernels only read the tables.
 */
function ropeTables(positions: Int32Array | readonly number[], invFreq: Float32Array): RopeTables {
  const same = (t: RopeTables) => {
    if (t.invFreq !== invFreq || t.positions.length !== positions.length) return false;
    for (let i = 0; i < invFreq.length; i++) if (t.invFreqCopy[i] !== invFreq[i]) return false;
    for (let i = 0; i < positions.length; i++) if (t.positions[i] !== positions[i]) return false;
    return true;
  };
  const hit = ropeTableCache.find(same);
  if (hit) return hit;
  const rows = positions.length;
  const half = invFreq.length;
  const cos = new Float32Array(rows * half);
  const sin = new Float32Array(rows * half);
  for (let r = 0; r < rows; r++) {
    for (let i = 0; i < half; i++) {
      const angle = Math.fround(positions[r] * invFreq[i]);
      cos[r * half + i] = Math.cos(angle);
      sin[r * half + i] = Math.sin(angle);
    }
  }
  // Positions that are not integers (or not exact in i32) are not cached: the copy would not compare equal.
  const posCopy = Int32Array.from(positions);
  const t = { positions: posCopy, invFreq, invFreqCopy: Float32Array.from(invFreq), cos, sin };
  if (posCopy.every((p, i) => p === positions[i])) {
    ropeTableCache.unshift(t);
    if (ropeTableCache.length > ROPE_TABLE_CACHE_SIZE) ropeTableCache.pop();
  }
  return t;
}

/**
 * Rotary embedding, rotate-half layout (transformers apply_rotary_pos_emb):
 * out = x·cos + rotate_half(x)·sin on the first rotaryDim dims, angle = position · invFreq[i].
 * x: [B, H, T, D]; positions: length T (shared) or B·T; invFreq: rotaryDim/2 frequencies.
 */
export function rope(
  x: Tensor,
  positions: Int32Array | readonly number[],
  invFreq: Float32Array,
  options: RopeOptions = {},
): Tensor {
  return ropeOp("rope", x, positions, invFreq, options, false);
}

/**
 * RoPE fused with the head permute of attention: x [B, T, H, D] (a projection split into heads) →
 * rope(permute(x, [0, 2, 1, 3])) [B, H, T, D] in one pass, without the permuted copy (and without
 * its copy back in the backward).
 */
export function ropeHeads(
  x: Tensor,
  positions: Int32Array | readonly number[],
  invFreq: Float32Array,
  options: RopeOptions = {},
): Tensor {
  return ropeOp("ropeHeads", x, positions, invFreq, options, true);
}

function ropeOp(
  name: string,
  x: Tensor,
  positions: Int32Array | readonly number[],
  invFreq: Float32Array,
  options: RopeOptions,
  headsLast: boolean,
): Tensor {
  if (x.rank !== 4)
    throw new ShapeError(`${name}: expected x [${headsLast ? "B, T, H, D" : "B, H, T, D"}], got ${fmtShape(x.shape)}`);
  const [B, d1, d2, D] = x.shape;
  const [H, T] = headsLast ? [d2, d1] : [d1, d2];
  const rot = options.rotaryDim ?? D;
  const half = rot / 2;
  if (!Number.isInteger(half) || rot > D || invFreq.length !== half) {
    throw new ShapeError(
      `${name}: rotaryDim ${rot} with head dim ${D} needs ${half} frequencies, got ${invFreq.length}`,
    );
  }
  const perBatch = positions.length === B * T;
  if (!perBatch && positions.length !== T) {
    throw new ShapeError(`${name}: ${positions.length} positions for T=${T} (B=${B}); pass T or B·T positions`);
  }
  const { cos, sin } = ropeTables(positions, invFreq);
  const shape: RopeShape = { batch: B, heads: H, seq: T, headDim: D, rotaryDim: rot, perBatch, headsLast };
  const out = new Float32Array(x.size);
  kernel("ropeForward")(floatData(name, x), cos, sin, out, shape);
  // The rotation is orthogonal: its transpose (angle −θ) carries the gradient back.
  return record(new Tensor(out, [B, H, T, D]), name, [x], (g) => {
    const dx = new Float32Array(x.size);
    kernel("ropeBackward")(g.data as Float32Array, cos, sin, dx, shape);
    return [new Tensor(dx, x.shape)];
  });
}

/** Inverse frequencies θ^(−2i/d) for RoPE (default rope_type). */
export function ropeInvFreq(rotaryDim: number, theta: number): Float32Array {
  const half = rotaryDim / 2;
  const out = new Float32Array(half);
  for (let i = 0; i < half; i++) out[i] = 1 / theta ** ((2 * i) / rotaryDim);
  return out;
}

/** SwiGLU: silu(gate) · up, fused (one pass forward, one backward). */
export function swiglu(gate: Tensor, up: Tensor): Tensor {
  if (gate.size !== up.size || gate.rank !== up.rank || gate.shape.some((d, i) => d !== up.shape[i])) {
    throw new ShapeError(`swiglu: gate ${fmtShape(gate.shape)} and up ${fmtShape(up.shape)} differ`);
  }
  const gd = floatData("swiglu", gate);
  const ud = floatData("swiglu", up);
  const out = new Float32Array(gd.length);
  // σ(gate) is kept for the backward, so the exponentials are computed once.
  const sig = new Float32Array(gd.length);
  kernel("swigluForward")(gd, ud, out, sig);
  return record(new Tensor(out, gate.shape), "swiglu", [gate, up], (g) => {
    const dgate = new Float32Array(out.length);
    const dup = new Float32Array(out.length);
    kernel("swigluBackward")(gd, ud, sig, g.data as Float32Array, dgate, dup);
    return [new Tensor(dgate, gate.shape), new Tensor(dup, up.shape)];
  });
}

export interface CrossEntropyOptions {
  /** Targets equal to this are skipped (torch / transformers default −100). */
  ignoreIndex?: number;
  /** "mean" over non-ignored targets (torch default), "sum", or "none" (per row, 0 where ignored). */
  reduction?: "mean" | "sum" | "none";
}

function checkTargets(
  op: string,
  logits: Tensor,
  targets: Tensor,
  ignoreIndex: number,
): { rows: number; vocab: number } {
  if (targets.dtype !== "i32") throw new DTypeError(`${op}: targets must be i32, got ${targets.dtype}`);
  const vocab = logits.shape[logits.rank - 1];
  const rows = logits.size / vocab;
  if (targets.size !== rows) {
    throw new ShapeError(
      `${op}: logits ${fmtShape(logits.shape)} give ${rows} rows, targets ${fmtShape(targets.shape)} have ${targets.size}`,
    );
  }
  const t = targets.data as Int32Array;
  for (let i = 0; i < t.length; i++) {
    if (t[i] !== ignoreIndex && (t[i] < 0 || t[i] >= vocab)) {
      throw new IndexError(`${op}: target ${t[i]} at row ${i} is outside [0, ${vocab}) (ignore index ${ignoreIndex})`);
    }
  }
  return { rows, vocab };
}

/**
 * Fused softmax cross-entropy over the last dim. The forward keeps only the row
 * logsumexp; the backward rebuilds softmax from it, so probabilities never exist twice.
 */
export function crossEntropy(logits: Tensor, targets: Tensor, options: CrossEntropyOptions = {}): Tensor {
  const ignoreIndex = options.ignoreIndex ?? -100;
  const reduction = options.reduction ?? "mean";
  const { rows, vocab } = checkTargets("crossEntropy", logits, targets, ignoreIndex);
  const ld = floatData("crossEntropy", logits);
  const td = targets.data as Int32Array;
  const loss = new Float32Array(rows);
  const lse = new Float32Array(rows);
  kernel("crossEntropyForward")(ld, td, loss, lse, rows, vocab, ignoreIndex);
  let count = 0;
  for (let i = 0; i < rows; i++) if (td[i] !== ignoreIndex) count++;
  let out: Tensor;
  if (reduction === "none") out = new Tensor(loss, targets.shape);
  else {
    let total = 0;
    for (let i = 0; i < rows; i++) total += loss[i];
    // torch: mean over zero targets is 0/0 = NaN.
    out = new Tensor(Float32Array.of(reduction === "sum" ? total : total / count), []);
  }
  return record(out, "crossEntropy", [logits], (g) => {
    const gd = g.data as Float32Array;
    const gradLoss = new Float32Array(rows);
    if (reduction === "none") gradLoss.set(gd);
    else gradLoss.fill(reduction === "sum" ? gd[0] : gd[0] / count);
    const dlogits = new Float32Array(ld.length);
    kernel("crossEntropyBackward")(ld, td, lse, gradLoss, dlogits, rows, vocab, ignoreIndex);
    return [new Tensor(dlogits, logits.shape)];
  });
}

/** log p(target) per row from logits, without materialising the log-softmax (0 where ignored). */
export function tokenLogProbs(logits: Tensor, targets: Tensor, ignoreIndex = -100): Tensor {
  const ce = crossEntropy(logits, targets, { ignoreIndex, reduction: "none" });
  const out = new Tensor(
    Float32Array.from(ce.data as Float32Array, (v) => -v),
    ce.shape,
  );
  return record(out, "tokenLogProbs", [ce], (g) => [
    new Tensor(
      Float32Array.from(g.data as Float32Array, (v) => -v),
      g.shape,
    ),
  ]);
}

function checkIds(op: string, ids: Tensor, rows: number): Int32Array {
  if (ids.dtype !== "i32") throw new DTypeError(`${op}: indices must be i32, got ${ids.dtype}`);
  const d = ids.data as Int32Array;
  for (let i = 0; i < d.length; i++) {
    if (d[i] < 0 || d[i] >= rows) throw new IndexError(`${op}: index ${d[i]} at position ${i} is outside [0, ${rows})`);
  }
  return d;
}

/** Rows of `weight` [V, d] at `ids` → [...ids.shape, d]. A bf16 table is widened row by row. */
export function embedding(weight: Tensor, ids: Tensor): Tensor {
  if (weight.rank !== 2) throw new ShapeError(`embedding: weight must be [V, d], got ${fmtShape(weight.shape)}`);
  const [V, d] = weight.shape;
  const idx = checkIds("embedding", ids, V);
  const out = new Float32Array(idx.length * d);
  if (weight.dtype === "f32") {
    const w = weight.data as Float32Array;
    for (let i = 0; i < idx.length; i++) out.set(w.subarray(idx[i] * d, (idx[i] + 1) * d), i * d);
  } else {
    for (let i = 0; i < idx.length; i++) {
      const row = new Tensor(weight.data.subarray(idx[i] * d, (idx[i] + 1) * d) as Uint16Array, [d], weight.dtype);
      out.set(row.toFloat32Array(), i * d);
    }
  }
  return record(new Tensor(out, [...ids.shape, d]), "embedding", [weight], (g) => [scatterAddRows(V, idx, g)]);
}

/** Σ of rows of `src` [N, d] into a fresh [rows, d] at `ids` (embedding backward). */
function scatterAddRows(rows: number, ids: Int32Array, src: Tensor): Tensor {
  const d = src.size / ids.length;
  const out = new Float32Array(rows * d);
  const s = src.data as Float32Array;
  for (let i = 0; i < ids.length; i++) {
    const o = ids[i] * d;
    const r = i * d;
    for (let j = 0; j < d; j++) out[o + j] += s[r + j];
  }
  return new Tensor(out, [rows, d]);
}

/** base + rows of `src` added at `ids` along dim 0 (index_add_): base [V, ...], src [N, ...]. */
export function scatterAdd(base: Tensor, ids: Tensor, src: Tensor): Tensor {
  const V = base.shape[0];
  const idx = checkIds("scatterAdd", ids, V);
  const rowSize = base.size / Math.max(V, 1);
  if (src.size !== idx.length * rowSize) {
    throw new ShapeError(`scatterAdd: src ${fmtShape(src.shape)} does not hold ${idx.length} rows of ${rowSize}`);
  }
  const out = Float32Array.from(floatData("scatterAdd", base));
  const s = floatData("scatterAdd", src);
  for (let i = 0; i < idx.length; i++)
    for (let j = 0; j < rowSize; j++) out[idx[i] * rowSize + j] += s[i * rowSize + j];
  return record(new Tensor(out, base.shape), "scatterAdd", [base, src], (g) => {
    const gd = g.data as Float32Array;
    const gs = new Float32Array(idx.length * rowSize);
    for (let i = 0; i < idx.length; i++) gs.set(gd.subarray(idx[i] * rowSize, (idx[i] + 1) * rowSize), i * rowSize);
    return [g, new Tensor(gs, src.shape)];
  });
}

/** torch.gather: out[..., j, ...] = x[..., index[..., j, ...], ...] along `axis`. */
export function gather(x: Tensor, axis: number, index: Tensor): Tensor {
  const a = normAxis("gather", axis, x.rank);
  if (index.dtype !== "i32") throw new DTypeError(`gather: index must be i32, got ${index.dtype}`);
  if (index.rank !== x.rank || index.shape.some((d, i) => i !== a && d !== x.shape[i])) {
    throw new ShapeError(
      `gather: index ${fmtShape(index.shape)} must match x ${fmtShape(x.shape)} except on axis ${axis}`,
    );
  }
  const outer = sizeOf(x.shape.slice(0, a));
  const inner = sizeOf(x.shape.slice(a + 1));
  const n = x.shape[a];
  const k = index.shape[a];
  const xd = floatData("gather", x);
  const id = index.data as Int32Array;
  const out = new Float32Array(index.size);
  for (let o = 0; o < outer; o++)
    for (let j = 0; j < k; j++)
      for (let i = 0; i < inner; i++) {
        const p = (o * k + j) * inner + i;
        const src = id[p];
        if (src < 0 || src >= n) throw new IndexError(`gather: index ${src} outside [0, ${n}) on axis ${axis}`);
        out[p] = xd[(o * n + src) * inner + i];
      }
  return record(new Tensor(out, index.shape), "gather", [x], (g) => {
    const gd = g.data as Float32Array;
    const dx = new Float32Array(x.size);
    for (let o = 0; o < outer; o++)
      for (let j = 0; j < k; j++)
        for (let i = 0; i < inner; i++) {
          const p = (o * k + j) * inner + i;
          dx[(o * n + id[p]) * inner + i] += gd[p];
        }
    return [new Tensor(dx, x.shape)];
  });
}

export interface DropoutOptions {
  seed: number;
  /** Counter offset: use a fresh range per call (e.g. step · size) for distinct masks. */
  offset?: number;
  training?: boolean;
}

/** Inverted dropout with a counter-based mask: same (seed, offset) ⇒ same mask on every backend. */
export function dropout(x: Tensor, p: number, options: DropoutOptions): Tensor {
  if (!(p >= 0 && p < 1)) throw new RangeError(`dropout: p must be in [0, 1), got ${p}`);
  if (options.training === false || p === 0) return x;
  const u = uniformFloats(options.seed, options.offset ?? 0, x.size, 0x0d0d);
  const scale = 1 / (1 - p);
  const mask = new Float32Array(x.size);
  for (let i = 0; i < mask.length; i++) mask[i] = u[i] >= p ? scale : 0;
  const xd = floatData("dropout", x);
  const out = new Float32Array(x.size);
  for (let i = 0; i < out.length; i++) out[i] = xd[i] * mask[i];
  return record(new Tensor(out, x.shape), "dropout", [x], (g) => {
    const gd = g.data as Float32Array;
    const dx = new Float32Array(gd.length);
    for (let i = 0; i < dx.length; i++) dx[i] = gd[i] * mask[i];
    return [new Tensor(dx, x.shape)];
  });
}

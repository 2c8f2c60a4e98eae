// Fused neural-network ops: each has a dedicated forward and backward because fusing
// saves a pass or a large intermediate (softmax, norms, RoPE, SwiGLU, cross-entropy).
import { record } from "../autograd.js";
import { type RopeShape, type SoftmaxMode, kernel } from "../backend.js";
import { DTypeError, IndexError, ShapeError, fmtShape } from "../errors.js";
import { uniformFloats } from "../random.js";
import { normAxis, sizeOf } from "../shape.js";
import { Tensor, argOf } from "../tensor.js";
import { add, compare, div, emptyF32, floatData, floatTensor, neg, outF32 } from "./elementwise.js";
import { transpose } from "./movement.js";
import { sum } from "./reduce.js";

const f32 = (t: Tensor): Float32Array => argOf(t) as Float32Array;
const i32 = (t: Tensor): Int32Array => argOf(t) as Int32Array;

function lastAxisOp(name: string, x: Tensor, axis: number, fn: (t: Tensor) => Tensor): Tensor {
  const a = normAxis(name, axis, x.rank);
  if (a === x.rank - 1) return fn(x);
  return transpose(fn(transpose(x, a, -1)), a, -1);
}

function softmaxOp(mode: SoftmaxMode, x: Tensor, axis: number): Tensor {
  return lastAxisOp(mode, x, axis, (t) => {
    const n = t.shape[t.rank - 1];
    const rows = n === 0 ? 0 : t.size / n;
    const src = floatTensor(mode, t);
    const y = emptyF32(t.shape);
    kernel("softmax")(mode, f32(src), f32(y), rows, n);
    return record(y, mode, [t], (g) => {
      const dx = emptyF32(t.shape);
      kernel("softmaxBackward")(mode, f32(y), f32(g), f32(dx), rows, n);
      return [dx];
    });
  });
}

/** Softmax along `axis` (default last). */
export function softmax(x: Tensor, axis = -1): Tensor {
  return softmaxOp("softmax", x, axis);
}

/** log-softmax along `axis` (default last): x − logsumexp(x). */
export function logSoftmax(x: Tensor, axis = -1): Tensor {
  return softmaxOp("logSoftmax", x, axis);
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
  const xf = floatTensor("rmsNorm", x);
  const wf = floatTensor("rmsNorm", weight);
  const out = emptyF32(x.shape);
  const rstd = emptyF32([dim === 0 ? 0 : x.size / dim]);
  kernel("rmsNorm")(f32(xf), f32(wf), f32(out), f32(rstd), dim, eps, zc);
  return record(
    out,
    "rmsNorm",
    [x, weight],
    (g) => {
      const dx = emptyF32(x.shape);
      // A frozen norm weight (LoRA) needs no dw: the kernel then skips that sum.
      const dw = weight.requiresGrad ? emptyF32(weight.shape) : null;
      kernel("rmsNormBackward")(f32(xf), f32(wf), f32(rstd), f32(g), f32(dx), dw ? f32(dw) : null, dim, zc);
      return [x.requiresGrad ? dx : null, dw];
    },
    undefined,
    [rstd, ...(xf === x ? [] : [xf]), ...(wf === weight ? [] : [wf])],
  );
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
  const out = emptyF32([B, H, T, D]);
  kernel("ropeForward")(floatData(name, x), cos, sin, f32(out), shape);
  // The rotation is orthogonal: its transpose (angle −θ) carries the gradient back.
  return record(out, name, [x], (g) => {
    const dx = emptyF32(x.shape);
    kernel("ropeBackward")(f32(g), cos, sin, f32(dx), shape);
    return [dx];
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
  const gf = floatTensor("swiglu", gate);
  const uf = floatTensor("swiglu", up);
  const out = emptyF32(gate.shape);
  // σ(gate) is kept for the backward, so the exponentials are computed once.
  const sig = emptyF32(gate.shape);
  kernel("swigluForward")(f32(gf), f32(uf), f32(out), f32(sig));
  return record(
    out,
    "swiglu",
    [gate, up],
    (g) => {
      const dgate = emptyF32(gate.shape);
      const dup = emptyF32(up.shape);
      kernel("swigluBackward")(f32(gf), f32(uf), f32(sig), f32(g), f32(dgate), f32(dup));
      return [dgate, dup];
    },
    undefined,
    [sig, ...(gf === gate ? [] : [gf]), ...(uf === up ? [] : [uf])],
  );
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
  // Device-resident targets are not read back here (that would wait for the device); kernels skip rows
  // whose target is out of range.
  if (!targets.storage.backend.hostVisible) return { rows, vocab };
  const t = targets.dataSync() as Int32Array;
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
  const lf = floatTensor("crossEntropy", logits);
  const loss = emptyF32(targets.shape);
  const lse = emptyF32([rows]);
  kernel("crossEntropyForward")(f32(lf), i32(targets), f32(loss), f32(lse), rows, vocab, ignoreIndex);
  // Counting and summing run as kernels too, so nothing waits for a device here.
  const count = reduction === "mean" ? sum(compare("ne", targets, ignoreIndex)) : null;
  let out: Tensor;
  if (reduction === "none") out = loss;
  else {
    const total = sum(loss);
    // torch: mean over zero targets is 0/0 = NaN.
    out = count ? div(total, count) : total;
  }
  return record(
    out,
    "crossEntropy",
    [logits],
    (g) => {
      const gradLoss = reduction === "none" ? g : add(outF32([rows]), count ? div(g, count) : g);
      const dlogits = emptyF32(logits.shape);
      kernel("crossEntropyBackward")(
        f32(lf),
        i32(targets),
        f32(lse),
        f32(gradLoss),
        f32(dlogits),
        rows,
        vocab,
        ignoreIndex,
      );
      return [dlogits];
    },
    [targets],
    [lse, ...(lf === logits ? [] : [lf]), ...(count ? [count] : [])],
  );
}

/**
 * log p(target) per row from logits, without materialising the log-softmax (0 where ignored).
 * Same values as `@kiln/losses`' `tokenLogProbs` (the one to train with: chunked, fused, accepts
 * `ChunkedLogits`); either takes the ignore index as a number or as `{ ignoreIndex }`.
 */
export function tokenLogProbs(
  logits: Tensor,
  targets: Tensor,
  ignoreIndexOrOptions: number | { ignoreIndex?: number } = -100,
): Tensor {
  const ignoreIndex =
    typeof ignoreIndexOrOptions === "number" ? ignoreIndexOrOptions : (ignoreIndexOrOptions.ignoreIndex ?? -100);
  return neg(crossEntropy(logits, targets, { ignoreIndex, reduction: "none" }));
}

function checkIds(op: string, ids: Tensor, rows: number): void {
  if (ids.dtype !== "i32") throw new DTypeError(`${op}: indices must be i32, got ${ids.dtype}`);
  if (!ids.storage.backend.hostVisible) return;
  const d = ids.dataSync() as Int32Array;
  for (let i = 0; i < d.length; i++) {
    if (d[i] < 0 || d[i] >= rows) throw new IndexError(`${op}: index ${d[i]} at position ${i} is outside [0, ${rows})`);
  }
}

/** Rows of `weight` [V, d] at `ids` → [...ids.shape, d]. A bf16/f16 table is widened row by row. */
export function embedding(weight: Tensor, ids: Tensor): Tensor {
  if (weight.rank !== 2) throw new ShapeError(`embedding: weight must be [V, d], got ${fmtShape(weight.shape)}`);
  if (weight.dtype === "i32") throw new DTypeError("embedding: weight must be a float tensor, got i32");
  const [V, d] = weight.shape;
  checkIds("embedding", ids, V);
  const out = emptyF32([...ids.shape, d]);
  kernel("gatherRows")(argOf(weight) as Float32Array, i32(ids), f32(out), {
    count: ids.size,
    rowLen: d,
    tableRows: V,
    dtype: weight.dtype,
  });
  return record(
    out,
    "embedding",
    [weight],
    (g) => {
      const dw = outF32([V, d]);
      kernel("scatterAddRows")(f32(g), i32(ids), f32(dw), ids.size, d);
      return [dw];
    },
    [ids],
  );
}

/** base + rows of `src` added at `ids` along dim 0 (index_add_): base [V, ...], src [N, ...]. */
export function scatterAdd(base: Tensor, ids: Tensor, src: Tensor): Tensor {
  const V = base.shape[0];
  checkIds("scatterAdd", ids, V);
  const rowSize = base.size / Math.max(V, 1);
  if (src.size !== ids.size * rowSize) {
    throw new ShapeError(`scatterAdd: src ${fmtShape(src.shape)} does not hold ${ids.size} rows of ${rowSize}`);
  }
  const baseF = floatTensor("scatterAdd", base);
  const out = baseF === base ? base.clone() : baseF;
  kernel("scatterAddRows")(floatData("scatterAdd", src), i32(ids), f32(out), ids.size, rowSize);
  return record(
    out,
    "scatterAdd",
    [base, src],
    (g) => {
      const gs = emptyF32(src.shape);
      kernel("gatherRows")(f32(g), i32(ids), f32(gs), { count: ids.size, rowLen: rowSize, tableRows: V, dtype: "f32" });
      return [g, gs];
    },
    [ids],
  );
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
  if (index.storage.backend.hostVisible) {
    const id = index.dataSync() as Int32Array;
    for (let p = 0; p < id.length; p++)
      if (id[p] < 0 || id[p] >= n) throw new IndexError(`gather: index ${id[p]} outside [0, ${n}) on axis ${axis}`);
  }
  const out = emptyF32(index.shape);
  kernel("gatherAxis")(floatData("gather", x), i32(index), f32(out), outer, n, k, inner);
  return record(
    out,
    "gather",
    [x],
    (g) => {
      const dx = outF32(x.shape);
      kernel("scatterAddAxis")(f32(g), i32(index), f32(dx), outer, n, k, inner);
      return [dx];
    },
    [index],
  );
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
  // The mask is drawn on the host (Philox) and uploaded; applying it is a backend multiply.
  const u = uniformFloats(options.seed, options.offset ?? 0, x.size, 0x0d0d);
  const scale = 1 / (1 - p);
  const values = new Float32Array(x.size);
  for (let i = 0; i < values.length; i++) values[i] = u[i] >= p ? scale : 0;
  const mask = Tensor.outputFrom(values, x.shape);
  const shape = { shape: [x.size], aStrides: [1], bStrides: [1] };
  const out = emptyF32(x.shape);
  kernel("binary")("mul", floatData("dropout", x), f32(mask), f32(out), shape);
  return record(
    out,
    "dropout",
    [x],
    (g) => {
      const dx = emptyF32(x.shape);
      kernel("binary")("mul", f32(g), f32(mask), f32(dx), shape);
      return [dx];
    },
    undefined,
    [mask],
  );
}

import type { AttentionShape, RaggedDecodeShape } from "../../kernel-contract.js";

// Tiled (flash-style) causal attention: one pass over keys with an online softmax, so
// memory beyond inputs/outputs is O(T) (the row logsumexp), never T×T. The backward
// recomputes the probabilities from the saved logsumexp (FlashAttention-2, Dao 2023).
// GQA: query head h reads kv head floor(h / (H / Hkv)), as transformers' repeat_kv.

function keyRange(i: number, shape: AttentionShape): number {
  // Queries are the last tq positions of tk keys: query i may see keys ≤ i + (tk − tq).
  return shape.causal ? Math.min(shape.tk, i + (shape.tk - shape.tq) + 1) : shape.tk;
}

/**
 * One query row over keys [0, end) of one kv head with an online softmax (double accumulation in acc):
 * out[qo..qo+d) and lse[row]; keys whose mask entry is 0 are skipped; a row that sees no key gets zeros
 * and lse −inf (the backward skips such rows).
 */
function attendRow(
  q: Float32Array,
  qo: number,
  k: Float32Array,
  v: Float32Array,
  kvBase: number,
  end: number,
  mask: Uint8Array | null,
  maskBase: number,
  d: number,
  scale: number,
  acc: Float64Array,
  out: Float32Array,
  lse: Float32Array,
  row: number,
): void {
  let m = Number.NEGATIVE_INFINITY;
  let l = 0;
  acc.fill(0);
  for (let j = 0; j < end; j++) {
    if (mask && mask[maskBase + j] === 0) continue;
    const ko = kvBase + j * d;
    let s = 0;
    for (let c = 0; c < d; c++) s += q[qo + c] * k[ko + c];
    s *= scale;
    if (s > m) {
      const correction = Math.exp(m - s);
      l *= correction;
      for (let c = 0; c < d; c++) acc[c] *= correction;
      m = s;
    }
    const p = Math.exp(s - m);
    l += p;
    for (let c = 0; c < d; c++) acc[c] += p * v[ko + c];
  }
  if (l === 0) {
    out.fill(0, qo, qo + d);
    lse[row] = Number.NEGATIVE_INFINITY;
    return;
  }
  for (let c = 0; c < d; c++) out[qo + c] = acc[c] / l;
  lse[row] = m + Math.log(l);
}

export function attentionForwardJs(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  keyMask: Uint8Array | null,
  out: Float32Array,
  lse: Float32Array,
  shape: AttentionShape,
): void {
  const { batch, heads, kvHeads, tq, tk, headDim: d, scale } = shape;
  const group = heads / kvHeads;
  const acc = new Float64Array(d);
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < heads; h++) {
      const kvh = Math.floor(h / group);
      const kvBase = (b * kvHeads + kvh) * tk * d;
      for (let i = 0; i < tq; i++) {
        const row = (b * heads + h) * tq + i;
        attendRow(q, row * d, k, v, kvBase, keyRange(i, shape), keyMask, b * tk, d, scale, acc, out, lse, row);
      }
    }
  }
}

export function attentionBackwardJs(
  q: Float32Array,
  k: Float32Array,
  v: Float32Array,
  keyMask: Uint8Array | null,
  out: Float32Array,
  lse: Float32Array,
  dOut: Float32Array,
  dq: Float32Array,
  dk: Float32Array,
  dv: Float32Array,
  shape: AttentionShape,
): void {
  const { batch, heads, kvHeads, tq, tk, headDim: d, scale } = shape;
  const group = heads / kvHeads;
  dq.fill(0);
  dk.fill(0);
  dv.fill(0);
  for (let b = 0; b < batch; b++) {
    for (let h = 0; h < heads; h++) {
      const kvh = Math.floor(h / group);
      const kvBase = (b * kvHeads + kvh) * tk * d;
      for (let i = 0; i < tq; i++) {
        const row = (b * heads + h) * tq + i;
        const L = lse[row];
        if (L === Number.NEGATIVE_INFINITY) continue;
        const qo = row * d;
        let D = 0;
        for (let c = 0; c < d; c++) D += dOut[qo + c] * out[qo + c];
        const end = keyRange(i, shape);
        for (let j = 0; j < end; j++) {
          if (keyMask && keyMask[b * tk + j] === 0) continue;
          const ko = kvBase + j * d;
          let s = 0;
          let dp = 0;
          for (let c = 0; c < d; c++) {
            s += q[qo + c] * k[ko + c];
            dp += dOut[qo + c] * v[ko + c];
          }
          const p = Math.exp(s * scale - L);
          const ds = p * (dp - D) * scale;
          for (let c = 0; c < d; c++) {
            dv[ko + c] += p * dOut[qo + c];
            dq[qo + c] += ds * k[ko + c];
            dk[ko + c] += ds * q[qo + c];
          }
        }
      }
    }
  }
}

/** attentionDecodeRagged: each sequence's query row over its own first lengths[b] keys (double accumulation). */
export function attentionDecodeRaggedJs(
  q: Float32Array,
  keys: readonly Float32Array[],
  values: readonly Float32Array[],
  out: Float32Array,
  lse: Float32Array,
  shape: RaggedDecodeShape,
): void {
  const { batch, heads, kvHeads, headDim: d, scale, lengths, capacities } = shape;
  const group = heads / kvHeads;
  const acc = new Float64Array(d);
  for (let b = 0; b < batch; b++) {
    const n = lengths[b];
    const k = keys[b];
    const v = values[b];
    for (let h = 0; h < heads; h++) {
      const kvBase = Math.floor(h / group) * capacities[b] * d;
      const row = b * heads + h;
      attendRow(q, row * d, k, v, kvBase, n, null, 0, d, scale, acc, out, lse, row);
    }
  }
}

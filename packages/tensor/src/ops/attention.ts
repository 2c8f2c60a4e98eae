import { record } from "../autograd.js";
import { type AttentionShape, kernel } from "../backend.js";
import { ShapeError, fmtShape } from "../errors.js";
import { Tensor, argOf } from "../tensor.js";
import { floatTensor } from "./elementwise.js";

export interface AttentionOptions {
  /** Causal mask; with tk > tq the queries are the last tq positions (KV-cache decode). Default true. */
  causal?: boolean;
  /** Key padding mask [B, tk]: nonzero keeps a key, 0 masks it (left or right padding). */
  keyMask?: Uint8Array | Tensor | null;
  /** Softmax scale, default 1/√headDim. */
  scale?: number;
}

/**
 * Scaled dot-product attention with GQA: q [B, H, tq, D], k and v [B, Hkv, tk, D] with
 * H a multiple of Hkv. Tiled forward/backward with O(T) extra memory (no T×T matrix).
 */
export function attention(q: Tensor, k: Tensor, v: Tensor, options: AttentionOptions = {}): Tensor {
  if (q.rank !== 4 || k.rank !== 4 || v.rank !== 4) {
    throw new ShapeError(
      `attention: q, k, v must be [B, H, T, D], got ${fmtShape(q.shape)}, ${fmtShape(k.shape)}, ${fmtShape(v.shape)}`,
    );
  }
  const [B, H, tq, D] = q.shape;
  const [Bk, Hkv, tk, Dk] = k.shape;
  if (Bk !== B || Dk !== D || v.shape.some((d, i) => d !== k.shape[i])) {
    throw new ShapeError(
      `attention: k ${fmtShape(k.shape)} / v ${fmtShape(v.shape)} do not match q ${fmtShape(q.shape)}`,
    );
  }
  if (H % Hkv !== 0) throw new ShapeError(`attention: ${H} query heads is not a multiple of ${Hkv} kv heads`);
  const causal = options.causal ?? true;
  if (causal && tk < tq)
    throw new ShapeError(`attention: causal with ${tq} queries needs at least as many keys, got ${tk}`);
  let mask: Uint8Array | null = null;
  if (options.keyMask) {
    const m = options.keyMask;
    const src = m instanceof Tensor ? m.toFloat32Array() : m;
    if (src.length !== B * tk)
      throw new ShapeError(`attention: keyMask has ${src.length} entries, expected B·tk = ${B * tk}`);
    mask = new Uint8Array(src.length);
    for (let i = 0; i < src.length; i++) mask[i] = src[i] !== 0 ? 1 : 0;
  }
  const shape: AttentionShape = {
    batch: B,
    heads: H,
    kvHeads: Hkv,
    tq,
    tk,
    headDim: D,
    scale: options.scale ?? 1 / Math.sqrt(D),
    causal,
  };
  const qf = floatTensor("attention", q);
  const kf = floatTensor("attention", k);
  const vf = floatTensor("attention", v);
  const out = Tensor.empty(q.shape);
  const lse = Tensor.empty([B * H * tq]);
  const f32 = (t: Tensor) => argOf(t) as Float32Array;
  kernel("attentionForward")(f32(qf), f32(kf), f32(vf), mask, f32(out), f32(lse), shape);
  return record(
    out,
    "attention",
    [q, k, v],
    (g) => {
      const dq = Tensor.empty(q.shape);
      const dk = Tensor.empty(k.shape);
      const dv = Tensor.empty(v.shape);
      kernel("attentionBackward")(
        f32(qf),
        f32(kf),
        f32(vf),
        mask,
        f32(out),
        f32(lse),
        f32(g),
        f32(dq),
        f32(dk),
        f32(dv),
        shape,
      );
      return [dq, dk, dv];
    },
    undefined,
    [lse, ...[qf, kf, vf].filter((t, i) => t !== [q, k, v][i])],
  );
}

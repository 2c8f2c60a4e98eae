import { isGradEnabled, record } from "../autograd.js";
import { type AttentionShape, activeStorage, hasKernel, kernel } from "../backend.js";
import { ShapeError, fmtShape } from "../errors.js";
import { Tensor, argOf, tidy } from "../tensor.js";
import { floatTensor } from "./elementwise.js";
import { zeros } from "./create.js";
import { concat, narrow } from "./movement.js";

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

/**
 * One sequence's cache for `raggedDecodeAttention`: keys and values [1, Hkv, capacity, D], positions
 * [start, length) attended (`start` default 0: the positions before it are padding, e.g. a left-padded row).
 */
export interface RaggedKV {
  keys: Tensor;
  values: Tensor;
  length: number;
  start?: number;
}

/**
 * Decode attention for a batch of unrelated sequences (a batching scheduler's decode step;
 * docs/ARCHITECTURE.md §Continuous batching): q [B, H, 1, D] holds one query row per sequence, and
 * `caches[b]` sequence b's own keys and values, read in place (nothing is gathered into a batch tensor), or
 * null for a padding row (output 0). Row b equals `attention` of that row alone over the first `length`
 * keys, whatever the other rows and the buffers' capacity. Inference only: it records no gradient.
 * A backend without the kernel on device memory (webgpu) runs one `attention` per sequence instead.
 */
export function raggedDecodeAttention(
  q: Tensor,
  caches: readonly (RaggedKV | null)[],
  options: { scale?: number } = {},
): Tensor {
  if (q.rank !== 4 || q.shape[2] !== 1)
    throw new ShapeError(`raggedDecodeAttention: q must be [B, H, 1, D], got ${fmtShape(q.shape)}`);
  const [B, H, , D] = q.shape;
  if (caches.length !== B)
    throw new ShapeError(`raggedDecodeAttention: ${caches.length} caches for a batch of ${B} query rows`);
  if (isGradEnabled() && q.requiresGrad)
    throw new ShapeError("raggedDecodeAttention: inference only (no gradient); call it under noGrad()");
  let Hkv = 0;
  for (const [b, c] of caches.entries()) {
    if (c === null) continue;
    const { keys, values, length } = c;
    if (
      keys.rank !== 4 ||
      keys.shape[0] !== 1 ||
      keys.shape[3] !== D ||
      values.shape.some((n, i) => n !== keys.shape[i])
    )
      throw new ShapeError(
        `raggedDecodeAttention: cache ${b} has keys ${fmtShape(keys.shape)} / values ${fmtShape(values.shape)}, expected [1, Hkv, capacity, ${D}] both`,
      );
    if (Hkv === 0) Hkv = keys.shape[1];
    if (keys.shape[1] !== Hkv)
      throw new ShapeError(`raggedDecodeAttention: cache ${b} has ${keys.shape[1]} kv heads, cache 0 has ${Hkv}`);
    if (!(Number.isInteger(length) && length >= 0 && length <= keys.shape[2]))
      throw new ShapeError(
        `raggedDecodeAttention: cache ${b} length ${length} is outside [0, capacity ${keys.shape[2]}]`,
      );
    const start = c.start ?? 0;
    if (!(Number.isInteger(start) && start >= 0 && start <= length))
      throw new ShapeError(`raggedDecodeAttention: cache ${b} start ${start} is outside [0, length ${length}]`);
  }
  if (Hkv === 0) return zeros(q.shape);
  if (H % Hkv !== 0)
    throw new ShapeError(`raggedDecodeAttention: ${H} query heads is not a multiple of ${Hkv} kv heads`);
  const scale = options.scale ?? 1 / Math.sqrt(D);
  // A row that starts past its buffer's first position is passed to the kernel as an offset view of its host
  // array; device buffers (webgpu) have no such view, so those rows go through the composed path.
  const offsetViews = caches.some((c) => (c?.start ?? 0) > 0);
  if (!hasKernel("attentionDecodeRagged") || (offsetViews && !q.storage.backend.hostVisible)) {
    const pieces = caches.map((c, b) => {
      const start = c?.start ?? 0;
      if (c === null || c.length === start) return zeros([1, H, 1, D]);
      const row = narrow(q, 0, b, b + 1);
      return attention(row, narrow(c.keys, 2, start, c.length), narrow(c.values, 2, start, c.length), { scale });
    });
    return concat(pieces, 0);
  }
  const qf = floatTensor("raggedDecodeAttention", q);
  const f32 = (t: Tensor) => argOf(floatTensor("raggedDecodeAttention", t)) as Float32Array;
  const keys: Float32Array[] = [];
  const values: Float32Array[] = [];
  const lengths: number[] = [];
  const capacities: number[] = [];
  for (const c of caches) {
    // A padded row's keys start `start` positions into its buffer: the kernel reads that offset view with the
    // buffer's head stride (capacity), so the leading padding is skipped without a copy.
    const skip = (c?.start ?? 0) * D;
    keys.push(c ? (skip ? f32(c.keys).subarray(skip) : f32(c.keys)) : (argOf(qf) as Float32Array));
    values.push(c ? (skip ? f32(c.values).subarray(skip) : f32(c.values)) : (argOf(qf) as Float32Array));
    lengths.push(c ? c.length - (c.start ?? 0) : 0);
    capacities.push(c?.keys.shape[2] ?? 0);
  }
  const out = Tensor.empty(q.shape);
  const lse = Tensor.empty([B * H]);
  try {
    kernel("attentionDecodeRagged")(
      argOf(qf) as Float32Array,
      keys,
      values,
      argOf(out) as Float32Array,
      argOf(lse) as Float32Array,
      {
        batch: B,
        heads: H,
        kvHeads: Hkv,
        headDim: D,
        scale,
        lengths,
        capacities,
      },
    );
  } finally {
    lse.dispose();
  }
  return out;
}

/**
 * One sequence's new rows in `raggedPrefillAttention`: rows [start, start + length) of q's T axis are its
 * newest `length` positions, already written to `cache`, whose `length` counts them (the last row sees them all;
 * every row skips positions before `cache.start`).
 */
export interface RaggedQuerySegment {
  start: number;
  length: number;
  cache: RaggedKV;
}

/**
 * Attention of a prefill forward that packs several sequences' prompt chunks along T (a batching
 * scheduler's prefill step; docs/ARCHITECTURE.md §Continuous batching): q [1, H, T, D]; each segment's
 * rows attend to their own sequence's cache alone, causally — row i of a segment sees the cache's first
 * `cache.length − length + 1 + i` positions. Rows of no segment are padding (output 0). Each segment is one
 * causal `attention` of its rows over its cache, read in place on host-memory backends (per kv head, a view
 * of the buffer: no copy of the cached keys), so its products run on the backend's tiled attention (BLAS on
 * native) — a prompt chunk of 128 rows over 4k cached keys is a GEMM, not 128 dot-product scans. A segment's
 * result is what `attention` gives that chunk alone over its cached keys: it depends on its own queries,
 * keys and values and on its shape (rows, keys), never on the other segments, where its rows sit in q, or
 * the buffers' capacity. (It is not row-by-row independent of the chunking: a GEMM's summation order may
 * follow the tile shape; the scheduler cuts a prompt at multiples of its chunk length in the sequence's own
 * positions, so a sequence's chunks are the same whatever shares its steps.) Inference only.
 */
export function raggedPrefillAttention(
  q: Tensor,
  segments: readonly RaggedQuerySegment[],
  options: { scale?: number } = {},
): Tensor {
  if (q.rank !== 4 || q.shape[0] !== 1)
    throw new ShapeError(`raggedPrefillAttention: q must be [1, H, T, D], got ${fmtShape(q.shape)}`);
  const [, H, T, D] = q.shape;
  const owner = new Int32Array(T).fill(-1);
  for (const [i, { start, length, cache }] of segments.entries()) {
    if (!(Number.isInteger(start) && Number.isInteger(length) && start >= 0 && length >= 1 && start + length <= T))
      throw new ShapeError(
        `raggedPrefillAttention: segment ${i} rows [${start}, ${start} + ${length}) are not a non-empty range of [0, ${T})`,
      );
    if (!(Number.isInteger(cache.length) && cache.length - (cache.start ?? 0) >= length))
      throw new ShapeError(
        `raggedPrefillAttention: segment ${i} has ${length} new rows but its cache holds ${cache.length - (cache.start ?? 0)} positions (it counts them)`,
      );
    for (let r = start; r < start + length; r++) {
      if (owner[r] >= 0)
        throw new ShapeError(`raggedPrefillAttention: segments ${owner[r]} and ${i} both claim row ${r}`);
      owner[r] = i;
    }
  }
  if (isGradEnabled() && q.requiresGrad)
    throw new ShapeError("raggedPrefillAttention: inference only (no gradient); call it under noGrad()");
  const scale = options.scale ?? 1 / Math.sqrt(D);
  const inPlace = activeStorage().hostVisible;
  return tidy(() => {
    const pieces: Tensor[] = [];
    let at = 0;
    for (const [i, s] of [...segments.entries()].sort(([, a], [, b]) => a.start - b.start)) {
      if (s.start > at) pieces.push(zeros([1, H, s.start - at, D]));
      const qs = narrow(q, 2, s.start, s.start + s.length);
      pieces.push(inPlace ? causalOverCache(qs, s.cache, scale, i) : causalOverCopies(qs, s.cache, scale, i));
      at = s.start + s.length;
    }
    if (at < T || pieces.length === 0) pieces.push(zeros([1, H, T - at, D]));
    return pieces.length === 1 ? pieces[0] : concat(pieces, 2);
  });
}

/** The cache's kv heads and positions [start, length), checked against q's heads H and head dim D. */
function cacheExtent(cache: RaggedKV, H: number, D: number, segment: number) {
  const { keys, values, length, start = 0 } = cache;
  if (
    keys.rank !== 4 ||
    keys.shape[0] !== 1 ||
    keys.shape[3] !== D ||
    values.rank !== 4 ||
    values.shape.some((n, i) => n !== keys.shape[i])
  )
    throw new ShapeError(
      `raggedPrefillAttention: segment ${segment} has keys ${fmtShape(keys.shape)} / values ${fmtShape(values.shape)}, expected [1, Hkv, capacity, ${D}] both`,
    );
  const [, Hkv, capacity] = keys.shape;
  if (length > capacity)
    throw new ShapeError(
      `raggedPrefillAttention: segment ${segment} cache length ${length} is outside [0, capacity ${capacity}]`,
    );
  if (!(Number.isInteger(start) && start >= 0 && start <= length))
    throw new ShapeError(`raggedPrefillAttention: segment ${segment} start ${start} is outside [0, length ${length}]`);
  if (H % Hkv !== 0)
    throw new ShapeError(`raggedPrefillAttention: ${H} query heads is not a multiple of ${Hkv} kv heads`);
  return { Hkv, capacity, start, keyCount: length - start };
}

/** Device memory (webgpu): the segment's keys and values copied out of the buffers, then `attention`. */
function causalOverCopies(qs: Tensor, cache: RaggedKV, scale: number, segment: number): Tensor {
  const { start } = cacheExtent(cache, qs.shape[1], qs.shape[3], segment);
  const [k, v] = [cache.keys, cache.values].map((t) => narrow(t, 2, start, cache.length));
  return attention(qs, k, v, { causal: true, scale });
}

/**
 * Host memory: qs [1, H, L, D] causal over the cache, one `attentionForward` per kv head on views of the
 * buffers (a head's positions are contiguous; heads sit `capacity` positions apart). Per kv head the shape is
 * { heads: H/Hkv, kvHeads: 1, tq: L, tk: keys }: the kernel runs each (batch, head) on its own, so this gives
 * the bits of one call over all heads of a contiguous copy — `attention(qs, narrow(keys), narrow(values))`.
 */
function causalOverCache(qs: Tensor, cache: RaggedKV, scale: number, segment: number): Tensor {
  const [, H, L, D] = qs.shape;
  const { Hkv, capacity, start, keyCount } = cacheExtent(cache, H, D, segment);
  const group = H / Hkv;
  const qf = floatTensor("raggedPrefillAttention", qs);
  const [kf, vf] = [cache.keys, cache.values].map((t) => floatTensor("raggedPrefillAttention", t));
  const out = Tensor.empty([1, H, L, D]);
  const lse = Tensor.empty([group * L]);
  const shape: AttentionShape = {
    batch: 1,
    heads: group,
    kvHeads: 1,
    tq: L,
    tk: keyCount,
    headDim: D,
    scale,
    causal: true,
  };
  try {
    for (let g = 0; g < Hkv; g++) {
      // Taken afresh per call: a kernel that grows a non-shared wasm memory detaches earlier views.
      const [qa, ka, va, oa, la] = [qf, kf, vf, out, lse].map((t) => argOf(t) as Float32Array);
      const rows = [g * group * L * D, (g + 1) * group * L * D] as const;
      const kv0 = (g * capacity + start) * D;
      kernel("attentionForward")(
        qa.subarray(...rows),
        ka.subarray(kv0, kv0 + keyCount * D),
        va.subarray(kv0, kv0 + keyCount * D),
        null,
        oa.subarray(...rows),
        la,
        shape,
      );
    }
  } finally {
    lse.dispose();
    for (const [t, from] of [
      [qf, qs],
      [kf, cache.keys],
      [vf, cache.values],
    ] as const)
      if (t !== from) t.dispose();
  }
  return out;
}

// Fused attention, FlashAttention-2 style (Dao 2023), as the js reference (src/backends/js/attention.ts):
// the forward streams key/value tiles through workgroup memory with an online softmax and keeps only
// the row logsumexp (O(T) extra memory); the backward recomputes probabilities from it, with dQ from
// one pass per query and dK/dV from one pass per key (no atomics). GQA: query head h reads kv head
// floor(h / (H / Hkv)). Causal: query i sees keys ≤ i + (tk − tq). Key mask: u8 per key, 0 = padding.
import type { AttentionShape, RaggedDecodeShape } from "../../../backend.js";
import { ShapeError } from "../../../errors.js";
import type { GpuArray, WebGPURuntime } from "../runtime.js";
import { gpuCopy, gpuFill } from "./generic.js";
import { loadElement } from "./wgsl.js";

const BQ = 64;

/** Head sizes share pipelines by bucket (private arrays need a constant size); loops run to the real D. */
function headBucket(d: number): number {
  return Math.max(16, 2 ** Math.ceil(Math.log2(d)));
}

function tileKeys(d: number): number {
  // Two tiles of BK × D f32 in workgroup memory stay within the 16 KiB every adapter offers.
  return Math.max(1, Math.min(32, Math.floor(16384 / (8 * d))));
}

const HEADER = (extra: string) => /* wgsl */ `
struct Params { batch: u32, heads: u32, kvHeads: u32, tq: u32, tk: u32, scale: f32, causal: u32, hasMask: u32, d: u32, o1: u32, o2: u32, o3: u32, o4: u32, o5: u32, o6: u32, o7: u32, o8: u32${extra} }
@group(0) @binding(0) var<uniform> p: Params;
${NEG_INF_DECL}
`;

// −∞ marks fully masked rows (as the js reference); a literal −∞ is not a valid WGSL f32 constant.
const NEG_INF = "bitcast<f32>(negInfBits)";
const NEG_INF_DECL = "var<private> negInfBits: u32 = 0xff800000u;";

/**
 * The forward and dQ kernels share one layout: a workgroup of BQ queries of one (batch, head) streams
 * BK-key tiles of K and V through workgroup memory. Declarations and entry point up to the query index i.
 */
function queryTileEntry(bk: number, d: number): string {
  return /* wgsl */ `const BK = ${bk}u;
const BQ = ${BQ}u;
var<workgroup> Ks: array<f32, ${bk * d}>;
var<workgroup> Vs: array<f32, ${bk * d}>;
${loadElement("maskAt", "MASK", "u8")}
@compute @workgroup_size(${BQ})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let D = p.d;
  let bh = wg.y;
  let b = bh / p.heads;
  let h = bh % p.heads;
  let kvh = h / (p.heads / p.kvHeads);
  let kvBase = (b * p.kvHeads + kvh) * p.tk * D;
  let i = wg.x * BQ + l.x;`;
}

// Causal: query i sees keys < i + shift + 1; `end` bounds the workgroup's last query, `myEnd` this one.
const QUERY_CAUSAL_BOUNDS = /* wgsl */ `  let shift = p.tk - p.tq;
  var end = p.tk;
  var myEnd = p.tk;
  if (p.causal != 0u) {
    end = min(p.tk, wg.x * BQ + BQ - 1u + shift + 1u);
    myEnd = min(p.tk, i + shift + 1u);
  }`;

// Inside `for (kt …)`: loads the tile of keys [kt, kt + BK) and opens the loop over its visible, unmasked keys
// (the caller writes the body and closes the loop with `}`, then the barrier).
const LOAD_KV_TILE_AND_VISIT_KEYS = /* wgsl */ `    for (var e = l.x; e < BK * D; e += BQ) {
      let j = kt + e / D;
      var kv = 0.0; var vv = 0.0;
      if (j < p.tk) { kv = K[p.o2 + kvBase + j * D + e % D]; vv = V[p.o3 + kvBase + j * D + e % D]; }
      Ks[e] = kv; Vs[e] = vv;
    }
    workgroupBarrier();
    for (var jj = 0u; jj < BK; jj++) {
      let j = kt + jj;
      if (!valid || j >= myEnd) { break; }
      if (p.hasMask != 0u && maskAt(p.o4 + b * p.tk + j) == 0.0) { continue; }`;

function forwardSource(d: number): string {
  const bk = tileKeys(d);
  return /* wgsl */ `${HEADER("")}
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> MASK: array<u32>;
@group(0) @binding(5) var<storage, read_write> O: array<f32>;
@group(0) @binding(6) var<storage, read_write> LSE: array<f32>;

${queryTileEntry(bk, d)}
  let valid = i < p.tq;
${QUERY_CAUSAL_BOUNDS}
  let qo = (bh * p.tq + min(i, p.tq - 1u)) * D;
  var q: array<f32, ${d}>;
  var acc: array<f32, ${d}>;
  for (var c = 0u; c < D; c++) { q[c] = Q[p.o1 + qo + c] * p.scale; acc[c] = 0.0; }
  var m = -3.0e38;
  var sum = 0.0;
  for (var kt = 0u; kt < end; kt += BK) {
${LOAD_KV_TILE_AND_VISIT_KEYS}
      var s = 0.0;
      for (var c = 0u; c < D; c++) { s = fma(q[c], Ks[jj * D + c], s); }
      if (s > m) {
        let corr = exp(m - s);
        sum *= corr;
        for (var c = 0u; c < D; c++) { acc[c] *= corr; }
        m = s;
      }
      let pr = exp(s - m);
      sum += pr;
      for (var c = 0u; c < D; c++) { acc[c] = fma(pr, Vs[jj * D + c], acc[c]); }
    }
    workgroupBarrier();
  }
  if (!valid) { return; }
  if (sum == 0.0) {
    for (var c = 0u; c < D; c++) { O[p.o5 + qo + c] = 0.0; }
    LSE[p.o6 + bh * p.tq + i] = ${NEG_INF};
    return;
  }
  let inv = 1.0 / sum;
  for (var c = 0u; c < D; c++) { O[p.o5 + qo + c] = acc[c] * inv; }
  LSE[p.o6 + bh * p.tq + i] = m + log(sum);
}
`;
}

function checkShape(shape: AttentionShape, q: GpuArray, k: GpuArray): void {
  const { batch, heads, kvHeads, tq, tk, headDim } = shape;
  if (heads % kvHeads !== 0)
    throw new ShapeError(`webgpu attention: heads ${heads} not a multiple of kvHeads ${kvHeads}`);
  if (tk < tq) throw new ShapeError(`webgpu attention: tk ${tk} < tq ${tq}`);
  if (q.length < batch * heads * tq * headDim || k.length < batch * kvHeads * tk * headDim)
    throw new ShapeError("webgpu attention: q/k/v smaller than the shape says");
}

function params(shape: AttentionShape, hasMask: boolean): [number[], string] {
  const { batch, heads, kvHeads, tq, tk, scale, causal, headDim } = shape;
  return [[batch, heads, kvHeads, tq, tk, scale, causal ? 1 : 0, hasMask ? 1 : 0, headDim], "uuuuufuuu"];
}

/**
 * Binds each operand whole (attention operands are per-layer activations, far below one binding) and
 * dispatches with the element offsets of the operands inside their windows appended to the params.
 */
function dispatchWhole(
  rt: WebGPURuntime,
  pipeline: GPUComputePipeline,
  head: [number[], string],
  arrays: GpuArray[],
  groups: [number, number?, number?],
  slots = 8,
): void {
  const windows = arrays.map((a) => rt.window(a));
  const offsets = windows.map((w) => w.elementOffset);
  while (offsets.length < slots) offsets.push(0);
  rt.dispatch(
    pipeline,
    [...head[0], ...offsets],
    head[1] + "i".repeat(slots),
    windows.map((w) => w.resource),
    groups,
  );
}

export function gpuAttentionForward(
  rt: WebGPURuntime,
  q: GpuArray,
  k: GpuArray,
  v: GpuArray,
  keyMask: GpuArray | null,
  out: GpuArray,
  lse: GpuArray,
  shape: AttentionShape,
): void {
  checkShape(shape, q, k);
  dispatchWhole(
    rt,
    rt.pipeline(forwardSource(headBucket(shape.headDim))),
    params(shape, keyMask !== null),
    [q, k, v, keyMask ?? rt.dummy, out, lse],
    [Math.ceil(shape.tq / BQ), shape.batch * shape.heads],
  );
}

// Per query row: LD[2r] = lse, LD[2r + 1] = Σ_c dOut·out (FlashAttention-2's D).
const PREP = /* wgsl */ `
struct Params { rows: u32, d: u32, o1: u32, o2: u32, o3: u32, o4: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> O: array<f32>;
@group(0) @binding(2) var<storage, read> DO: array<f32>;
@group(0) @binding(3) var<storage, read> LSE: array<f32>;
@group(0) @binding(4) var<storage, read_write> LD: array<f32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let r = gid.x + gid.y * nw.x * 64u;
  if (r >= p.rows) { return; }
  var s = 0.0;
  for (var c = 0u; c < p.d; c++) { s = fma(DO[p.o2 + r * p.d + c], O[p.o1 + r * p.d + c], s); }
  LD[p.o4 + 2u * r] = LSE[p.o3 + r];
  LD[p.o4 + 2u * r + 1u] = s;
}
`;

function dqSource(d: number): string {
  const bk = tileKeys(d);
  return /* wgsl */ `${HEADER("")}
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> MASK: array<u32>;
@group(0) @binding(5) var<storage, read> LD: array<f32>;
@group(0) @binding(6) var<storage, read> DO: array<f32>;
@group(0) @binding(7) var<storage, read_write> DQ: array<f32>;

${queryTileEntry(bk, d)}
  let row = bh * p.tq + min(i, p.tq - 1u);
  let L = LD[p.o5 + 2u * row];
  let Dr = LD[p.o5 + 2u * row + 1u];
  let valid = i < p.tq && bitcast<u32>(L) != 0xff800000u;
${QUERY_CAUSAL_BOUNDS}
  let qo = row * D;
  var q: array<f32, ${d}>;
  var dout: array<f32, ${d}>;
  var dq: array<f32, ${d}>;
  for (var c = 0u; c < D; c++) { q[c] = Q[p.o1 + qo + c]; dout[c] = DO[p.o6 + qo + c]; dq[c] = 0.0; }
  for (var kt = 0u; kt < end; kt += BK) {
${LOAD_KV_TILE_AND_VISIT_KEYS}
      var s = 0.0;
      var dp = 0.0;
      for (var c = 0u; c < D; c++) { s = fma(q[c], Ks[jj * D + c], s); dp = fma(dout[c], Vs[jj * D + c], dp); }
      let pr = exp(s * p.scale - L);
      let ds = pr * (dp - Dr) * p.scale;
      for (var c = 0u; c < D; c++) { dq[c] = fma(ds, Ks[jj * D + c], dq[c]); }
    }
    workgroupBarrier();
  }
  if (i >= p.tq) { return; }
  for (var c = 0u; c < D; c++) { DQ[p.o7 + qo + c] = dq[c]; }
}
`;
}

const BKV = 64;

function dkvSource(d: number): string {
  const bq = tileKeys(d);
  return /* wgsl */ `${HEADER("")}
@group(0) @binding(1) var<storage, read> Q: array<f32>;
@group(0) @binding(2) var<storage, read> K: array<f32>;
@group(0) @binding(3) var<storage, read> V: array<f32>;
@group(0) @binding(4) var<storage, read> MASK: array<u32>;
@group(0) @binding(5) var<storage, read> LD: array<f32>;
@group(0) @binding(6) var<storage, read> DO: array<f32>;
@group(0) @binding(7) var<storage, read_write> DK: array<f32>;
@group(0) @binding(8) var<storage, read_write> DV: array<f32>;

const TQ = ${bq}u;
const BKV = ${BKV}u;
var<workgroup> Qs: array<f32, ${bq * d}>;
var<workgroup> DOs: array<f32, ${bq * d}>;
var<workgroup> Ls: array<f32, ${2 * bq}>;
${loadElement("maskAt", "MASK", "u8")}
@compute @workgroup_size(${BKV})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let D = p.d;
  let bkv = wg.y;
  let b = bkv / p.kvHeads;
  let kvh = bkv % p.kvHeads;
  let group = p.heads / p.kvHeads;
  let j = wg.x * BKV + l.x;
  var valid = j < p.tk;
  if (valid && p.hasMask != 0u && maskAt(p.o4 + b * p.tk + j) == 0.0) { valid = false; }
  let ko = (bkv * p.tk + min(j, p.tk - 1u)) * D;
  let shift = p.tk - p.tq;
  // Causal: key j is seen by queries i ≥ j − shift; the workgroup starts at its first key's bound.
  var start = 0u;
  if (p.causal != 0u && wg.x * BKV > shift) { start = wg.x * BKV - shift; }
  var myStart = 0u;
  if (p.causal != 0u && j > shift) { myStart = j - shift; }
  var kr: array<f32, ${d}>;
  var vr: array<f32, ${d}>;
  var dk: array<f32, ${d}>;
  var dv: array<f32, ${d}>;
  for (var c = 0u; c < D; c++) { kr[c] = K[p.o2 + ko + c]; vr[c] = V[p.o3 + ko + c]; dk[c] = 0.0; dv[c] = 0.0; }
  for (var hh = 0u; hh < group; hh++) {
    let bh = b * p.heads + kvh * group + hh;
    for (var it = start; it < p.tq; it += TQ) {
      for (var e = l.x; e < TQ * D; e += BKV) {
        let i = it + e / D;
        var qv = 0.0; var dv0 = 0.0;
        if (i < p.tq) { qv = Q[p.o1 + (bh * p.tq + i) * D + e % D]; dv0 = DO[p.o6 + (bh * p.tq + i) * D + e % D]; }
        Qs[e] = qv; DOs[e] = dv0;
      }
      for (var e = l.x; e < 2u * TQ; e += BKV) {
        let i = it + e / 2u;
        var x = ${NEG_INF};
        if (i < p.tq) { x = LD[p.o5 + 2u * (bh * p.tq + i) + e % 2u]; }
        Ls[e] = x;
      }
      workgroupBarrier();
      for (var ii = 0u; ii < TQ; ii++) {
        let i = it + ii;
        if (!valid || i >= p.tq) { break; }
        if (i < myStart) { continue; }
        let L = Ls[2u * ii];
        if (bitcast<u32>(L) == 0xff800000u) { continue; }
        var s = 0.0;
        var dp = 0.0;
        for (var c = 0u; c < D; c++) { s = fma(Qs[ii * D + c], kr[c], s); dp = fma(DOs[ii * D + c], vr[c], dp); }
        let pr = exp(s * p.scale - L);
        let ds = pr * (dp - Ls[2u * ii + 1u]) * p.scale;
        for (var c = 0u; c < D; c++) {
          dv[c] = fma(pr, DOs[ii * D + c], dv[c]);
          dk[c] = fma(ds, Qs[ii * D + c], dk[c]);
        }
      }
      workgroupBarrier();
    }
  }
  if (j >= p.tk) { return; }
  for (var c = 0u; c < D; c++) { DK[p.o7 + ko + c] = dk[c]; DV[p.o8 + ko + c] = dv[c]; }
}
`;
}

export function gpuAttentionBackward(
  rt: WebGPURuntime,
  q: GpuArray,
  k: GpuArray,
  v: GpuArray,
  keyMask: GpuArray | null,
  out: GpuArray,
  lse: GpuArray,
  dOut: GpuArray,
  dq: GpuArray,
  dk: GpuArray,
  dv: GpuArray,
  shape: AttentionShape,
): void {
  checkShape(shape, q, k);
  const { batch, heads, kvHeads, tq, tk, headDim: d } = shape;
  const rows = batch * heads * tq;
  const ld = rt.alloc("f32", 2 * rows);
  dispatchWhole(rt, rt.pipeline(PREP), [[rows, d], "uu"], [out, dOut, lse, ld], [Math.ceil(rows / 64)], 4);
  const head = params(shape, keyMask !== null);
  const mask = keyMask ?? rt.dummy;
  dispatchWhole(
    rt,
    rt.pipeline(dqSource(headBucket(d))),
    head,
    [q, k, v, mask, ld, dOut, dq],
    [Math.ceil(tq / BQ), batch * heads],
  );
  dispatchWhole(
    rt,
    rt.pipeline(dkvSource(headBucket(d))),
    head,
    [q, k, v, mask, ld, dOut, dk, dv],
    [Math.ceil(tk / BKV), batch * kvHeads],
  );
  rt.release(ld);
}

/**
 * attentionDecodeRagged on the GPU, composed per sequence: its written keys and values are copied out of its
 * [Hkv][capacity][D] buffers and run through gpuAttentionForward with its query row alone (what the
 * scheduler did before the fused CPU kernel; every copy and dispatch is encoded into the same submission).
 */
export function gpuAttentionDecodeRagged(
  rt: WebGPURuntime,
  q: GpuArray,
  keys: readonly GpuArray[],
  values: readonly GpuArray[],
  out: GpuArray,
  lse: GpuArray,
  shape: RaggedDecodeShape,
): void {
  const { batch, heads: H, kvHeads: Hkv, headDim: d, scale, lengths, capacities } = shape;
  const temps: GpuArray[] = [];
  const take = (n: number) => {
    const a = rt.alloc("f32", n);
    temps.push(a);
    return a;
  };
  try {
    for (let b = 0; b < batch; b++) {
      const n = lengths[b];
      const rowOut = take(H * d);
      const rowLse = take(H);
      if (n === 0) gpuFill(rt, rowLse, H, Number.NEGATIVE_INFINITY, 0, "f32");
      else {
        const gather = (src: GpuArray) => {
          const dst = take(Hkv * n * d);
          gpuCopy(rt, src, dst, {
            shape: [Hkv, n * d],
            srcOffset: 0,
            srcStrides: [capacities[b] * d, 1],
            dstOffset: 0,
            dstStrides: [n * d, 1],
          });
          return dst;
        };
        const row = rt.copy(q, b * H * d, H * d);
        temps.push(row);
        gpuAttentionForward(rt, row, gather(keys[b]), gather(values[b]), null, rowOut, rowLse, {
          batch: 1,
          heads: H,
          kvHeads: Hkv,
          tq: 1,
          tk: n,
          headDim: d,
          scale,
          causal: false,
        });
      }
      rt.copyInto(rowOut, 0, out, b * H * d, H * d);
      rt.copyInto(rowLse, 0, lse, b * H, H);
    }
  } finally {
    for (const t of temps) rt.release(t);
  }
}

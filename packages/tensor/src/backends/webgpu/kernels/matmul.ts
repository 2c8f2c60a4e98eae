// Tiled batched GEMM: 64×64 output tiles per 16×16 workgroup (4×4 outputs per invocation, rows and
// columns strided by 16 so neighbouring invocations read neighbouring shared-memory words), K in
// steps of 16 through workgroup memory. Transposes are pipeline constants; B may be f32 or bf16/f16
// packed two per u32 word and widened on load. Arrays larger than one storage binding are reached by
// splitting the dispatch over batch, m, n and k (k chunks accumulate into the output).
import type { MatmulShape } from "../../../backend.js";
import { ShapeError } from "../../../errors.js";
import type { GpuArray, WebGPURuntime } from "../runtime.js";
import { loadElement } from "./wgsl.js";

/** Invocations per side of a workgroup, outputs per invocation per side, and the K step. */
export interface GemmConfig {
  wg: number;
  per: number;
  tk: number;
}
// 8×8 invocations × 8×8 outputs with K steps of 32: measured fastest on lavapipe (1024³: 0.5–0.8 vs 0.26–0.29
// GFLOP/s for 16×16 × 4×4 × 16, loaded machine); 16 KiB of workgroup memory fits every adapter.
export const GEMM_CONFIG: GemmConfig = { wg: 8, per: 8, tk: 32 };

function gemmSource(bType: "f32" | "bf16" | "f16", f16Math: boolean, cfg: GemmConfig): string {
  const { wg, per, tk } = cfg;
  const TILE = wg * per;
  const TILE_K = tk;
  const threads = wg * wg;
  const loads = (TILE * TILE_K) / threads;
  const bArray = bType === "f32" ? "array<f32>" : "array<u32>";
  const acc = f16Math ? "f16" : "f32";
  return /* wgsl */ `${f16Math ? "enable f16;" : ""}
struct Params { M: u32, N: u32, K: u32, strideA: u32, strideB: u32, strideO: u32,
  aOff: u32, bOff: u32, oOff: u32, b0: u32, m0: u32, m1: u32, n0: u32, n1: u32, k0: u32, k1: u32, accumulate: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> A: array<f32>;
@group(0) @binding(2) var<storage, read> B: ${bArray};
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
override TRANS_A: bool = false;
override TRANS_B: bool = false;
const TS = ${TILE}u;
const TK = ${TILE_K}u;
var<workgroup> As: array<${acc}, ${TILE * TILE_K}>;
var<workgroup> Bs: array<${acc}, ${TILE * TILE_K}>;
${loadElement("loadB", "B", bType)}

@compute @workgroup_size(${wg}, ${wg})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let batch = p.b0 + wg.z;
  let row0 = p.m0 + wg.y * TS;
  let col0 = p.n0 + wg.x * TS;
  let tid = lid.y * ${wg}u + lid.x;
  let aBase = p.aOff + batch * p.strideA;
  let bBase = p.bOff + batch * p.strideB;
  var acc: array<${acc}, ${per * per}>;
  for (var kt = p.k0; kt < p.k1; kt += TK) {
    for (var r = 0u; r < ${loads}u; r++) {
      let e = tid + r * ${threads}u;
      var mm: u32; var kk: u32;
      if (TRANS_A) { mm = e % TS; kk = e / TS; } else { kk = e % TK; mm = e / TK; }
      let gm = row0 + mm; let gk = kt + kk;
      var v = 0.0;
      if (gm < p.m1 && gk < p.k1) {
        if (TRANS_A) { v = A[aBase + gk * p.M + gm]; } else { v = A[aBase + gm * p.K + gk]; }
      }
      As[kk * TS + mm] = ${acc}(v);
      var nn: u32;
      if (TRANS_B) { kk = e % TK; nn = e / TK; } else { nn = e % TS; kk = e / TS; }
      let gn = col0 + nn; let gk2 = kt + kk;
      var w = 0.0;
      if (gn < p.n1 && gk2 < p.k1) {
        if (TRANS_B) { w = loadB(bBase + gn * p.K + gk2); } else { w = loadB(bBase + gk2 * p.N + gn); }
      }
      Bs[kk * TS + nn] = ${acc}(w);
    }
    workgroupBarrier();
    for (var kk = 0u; kk < TK; kk++) {
      var a: array<${acc}, ${per}>;
      var b: array<${acc}, ${per}>;
      for (var i = 0u; i < ${per}u; i++) { a[i] = As[kk * TS + lid.y + ${wg}u * i]; b[i] = Bs[kk * TS + lid.x + ${wg}u * i]; }
      for (var i = 0u; i < ${per}u; i++) {
        for (var j = 0u; j < ${per}u; j++) { acc[i * ${per}u + j] = fma(a[i], b[j], acc[i * ${per}u + j]); }
      }
    }
    workgroupBarrier();
  }
  let oBase = p.oOff + batch * p.strideO;
  for (var i = 0u; i < ${per}u; i++) {
    let gm = row0 + lid.y + ${wg}u * i;
    if (gm >= p.m1) { continue; }
    for (var j = 0u; j < ${per}u; j++) {
      let gn = col0 + lid.x + ${wg}u * j;
      if (gn >= p.n1) { continue; }
      let o = oBase + gm * p.N + gn;
      let v = f32(acc[i * ${per}u + j]);
      if (p.accumulate != 0u) { O[o] = O[o] + v; } else { O[o] = v; }
    }
  }
}
`;
}

interface Chunk {
  b0: number;
  b1: number;
  m0: number;
  m1: number;
  n0: number;
  n1: number;
  k0: number;
  k1: number;
}

export interface MatmulOptions {
  /** Multiply in f16 (adapter must have shader-f16); accumulation precision drops to f16 too. */
  f16Math?: boolean;
  /** Tile shape (benchmarks and tuning); default GEMM_CONFIG. */
  config?: GemmConfig;
}

/** out[b] (+)= op(A[b])·op(B[b]); B f32, or bf16/f16 as packed 16-bit words. */
export function gpuMatmul(
  rt: WebGPURuntime,
  a: GpuArray,
  b: GpuArray,
  out: GpuArray,
  shape: MatmulShape,
  options: MatmulOptions = {},
): void {
  const { batch, m, n, k } = shape;
  const transA = shape.transA ?? false;
  const transB = shape.transB ?? false;
  const sA = shape.batchStrideA ?? m * k;
  const sB = shape.batchStrideB ?? k * n;
  const sO = m * n;
  if (b.dtype !== "f32" && b.dtype !== "bf16" && b.dtype !== "f16")
    throw new ShapeError(`webgpu matmul: B must be f32, bf16 or f16, got ${b.dtype}`);
  if (out.length < batch * sO)
    throw new ShapeError(`webgpu matmul: out has ${out.length} elements, needs ${batch * sO}`);
  if (batch === 0 || m === 0 || n === 0) return;
  const f16Math = (options.f16Math ?? false) && rt.info.shaderF16;
  const cfg = options.config ?? GEMM_CONFIG;
  const TILE = cfg.wg * cfg.per;
  const TILE_K = cfg.tk;
  const pipeline = rt.pipeline(gemmSource(b.dtype, f16Math, cfg), { TRANS_A: transA ? 1 : 0, TRANS_B: transB ? 1 : 0 });
  if (k === 0) {
    if (!shape.accumulate) fillZeroRange(rt, out, batch * sO);
    return;
  }
  const spanA = (c: Chunk): [number, number] =>
    transA
      ? [c.b0 * sA + c.k0 * m + c.m0, (c.b1 - 1) * sA + (c.k1 - 1) * m + c.m1]
      : [c.b0 * sA + c.m0 * k + c.k0, (c.b1 - 1) * sA + (c.m1 - 1) * k + c.k1];
  const spanB = (c: Chunk): [number, number] =>
    transB
      ? [c.b0 * sB + c.n0 * k + c.k0, (c.b1 - 1) * sB + (c.n1 - 1) * k + c.k1]
      : [c.b0 * sB + c.k0 * n + c.n0, (c.b1 - 1) * sB + (c.k1 - 1) * n + c.n1];
  const spanO = (c: Chunk): [number, number] => [c.b0 * sO + c.m0 * n + c.n0, (c.b1 - 1) * sO + (c.m1 - 1) * n + c.n1];
  const limit = rt.maxBinding;
  const maxGroups = rt.info.limits.maxComputeWorkgroupsPerDimension;
  // Chunk sizes: start whole, halve the largest dimension of an operand whose window is too big.
  let bc = Math.min(batch, maxGroups);
  let mc = Math.min(m, maxGroups * TILE);
  let nc = Math.min(n, maxGroups * TILE);
  let kc = k;
  for (;;) {
    const c: Chunk = { b0: 0, b1: bc, m0: 0, m1: mc, n0: 0, n1: nc, k0: 0, k1: kc };
    const fits = (span: [number, number], arr: GpuArray) => rt.windowBytes(arr, span[0], span[1]) <= limit;
    const okA = fits(spanA(c), a);
    const okB = fits(spanB(c), b);
    const okO = fits(spanO(c), out);
    if (okA && okB && okO) break;
    if (bc > 1) bc = Math.ceil(bc / 2);
    else if (!okO) {
      if (mc >= nc && mc > 1) mc = Math.ceil(mc / 2);
      else if (nc > 1) nc = Math.ceil(nc / 2);
      else throw new ShapeError("webgpu matmul: a single output element does not fit a binding");
    } else if (!okA) {
      if (mc > 1 && (mc >= kc || kc <= TILE_K)) mc = Math.ceil(mc / 2);
      else kc = Math.max(TILE_K, Math.ceil(kc / 2 / TILE_K) * TILE_K);
    } else {
      if (nc > 1 && (nc >= kc || kc <= TILE_K)) nc = Math.ceil(nc / 2);
      else kc = Math.max(TILE_K, Math.ceil(kc / 2 / TILE_K) * TILE_K);
    }
  }
  for (let b0 = 0; b0 < batch; b0 += bc)
    for (let m0 = 0; m0 < m; m0 += mc)
      for (let n0 = 0; n0 < n; n0 += nc)
        for (let k0 = 0; k0 < k; k0 += kc) {
          const c: Chunk = {
            b0,
            b1: Math.min(batch, b0 + bc),
            m0,
            m1: Math.min(m, m0 + mc),
            n0,
            n1: Math.min(n, n0 + nc),
            k0,
            k1: Math.min(k, k0 + kc),
          };
          const wa = rt.window(a, ...spanA(c));
          const wb = rt.window(b, ...spanB(c));
          const wo = rt.window(out, ...spanO(c));
          const accumulate = k0 > 0 || shape.accumulate ? 1 : 0;
          rt.dispatch(
            pipeline,
            [
              m,
              n,
              k,
              sA,
              sB,
              sO,
              wa.elementOffset,
              wb.elementOffset,
              wo.elementOffset,
              c.b0,
              c.m0,
              c.m1,
              c.n0,
              c.n1,
              c.k0,
              c.k1,
              accumulate,
            ],
            "uuuuuuiiiuuuuuuuu",
            [wa.resource, wb.resource, wo.resource],
            [Math.ceil((c.n1 - c.n0) / TILE), Math.ceil((c.m1 - c.m0) / TILE), c.b1 - c.b0],
          );
        }
}

const FILL_SOURCE = /* wgsl */ `
struct Params { off: u32, n: u32, value: f32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> O: array<f32>;
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = gid.x + gid.y * nw.x * 256u;
  if (i < p.n) { O[p.off + i] = p.value; }
}
`;

/** out[0..n) = value (f32), chunked over bindings. */
export function fillZeroRange(rt: WebGPURuntime, out: GpuArray, n: number, value = 0): void {
  const pipeline = rt.pipeline(FILL_SOURCE);
  const step = Math.floor((rt.maxBinding - 512) / 4);
  for (let s = 0; s < n; s += step) {
    const e = Math.min(n, s + step);
    const w = rt.window(out, s, e);
    rt.dispatch(pipeline, [w.elementOffset + s, e - s, value], "iuf", [w.resource], grid(rt, e - s, 256));
  }
}

/** Workgroup counts for `n` invocations of a 1-D kernel, folded into y past the per-dimension limit. */
export function grid(rt: WebGPURuntime, n: number, wg: number): [number, number] {
  const groups = Math.ceil(n / wg);
  const max = rt.info.limits.maxComputeWorkgroupsPerDimension;
  if (groups <= max) return [groups, 1];
  const y = Math.ceil(groups / max);
  return [Math.ceil(groups / y), y];
}

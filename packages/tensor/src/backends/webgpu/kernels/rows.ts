// Row-wise and elementwise kernels: RMSNorm (fwd/bwd), RoPE (fwd/bwd), SwiGLU (fwd/bwd), AdamW.
// Semantics follow the js reference kernels (src/backends/js); the kernel contract is docs/ARCHITECTURE.md §Kernels.
import type { AdamWStep, RopeShape } from "../../../backend.js";
import { ShapeError } from "../../../errors.js";
import type { GpuArray, WebGPURuntime } from "../runtime.js";
import { distinctFrom, ELEMENTWISE_WG, grid1d, launchElementwise, launchRows } from "./launch.js";
import { kernelHeader } from "./wgsl.js";

const ROW_WG = 128;
const EW_WG = ELEMENTWISE_WG;

/** Entry point of a one-invocation-per-element kernel (launchElementwise): opens main and defines i. */
const ELEMENT_ENTRY = /* wgsl */ `const WG = ${EW_WG}u;
@compute @workgroup_size(${EW_WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let i = p.row0 + gid.x + gid.y * nw.x * WG;
  if (i >= p.rowEnd) { return; }`;

/** Tree reduction of `red` (ROW_WG values) into red[0]; every invocation must call it. */
const REDUCE_SUM = /* wgsl */ `
var<workgroup> red: array<f32, ${ROW_WG}>;
fn reduceSum(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = ${ROW_WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = red[lid] + red[lid + s]; }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
fn reduceMax(v: f32, lid: u32) -> f32 {
  red[lid] = v;
  workgroupBarrier();
  for (var s = ${ROW_WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { red[lid] = max(red[lid], red[lid + s]); }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}
`;
export { REDUCE_SUM, ROW_WG };

/** Row of a one-workgroup-per-row dispatch (rows fold into y past 65,535 workgroups). */
export const ROW_OF_GROUP = "p.row0 + wg.x + wg.y * nw.x";
/** Entry point of a one-workgroup-per-row kernel (ROW_WG invocations): opens main and defines row and lid. */
export const ROW_ENTRY = /* wgsl */ `@compute @workgroup_size(${ROW_WG})
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(num_workgroups) nw: vec3u, @builtin(local_invocation_id) l: vec3u) {
  let row = ${ROW_OF_GROUP};
  if (row >= p.rowEnd) { return; }
  let lid = l.x;`;
export const rowGroups = (rt: WebGPURuntime) => (r0: number, r1: number) => grid1d(rt, r1 - r0, 1);

const RMSNORM = /* wgsl */ `${kernelHeader("dim: u32, eps: f32, zeroCentered: u32", [
  { name: "X", type: "f32" },
  { name: "W", type: "f32" },
  { name: "O", type: "f32", write: true },
  { name: "R", type: "f32", write: true },
])}${REDUCE_SUM}
${ROW_ENTRY}
  let xo = p.off0 + row * p.dim;
  var ss = 0.0;
  for (var i = lid; i < p.dim; i += ${ROW_WG}u) { let v = X[xo + i]; ss = fma(v, v, ss); }
  let s = 1.0 / sqrt(reduceSum(ss, lid) / f32(p.dim) + p.eps);
  if (lid == 0u) { R[p.off3 + row] = s; }
  let oo = p.off2 + row * p.dim;
  for (var i = lid; i < p.dim; i += ${ROW_WG}u) {
    var w = W[p.off1 + i];
    if (p.zeroCentered != 0u) { w = 1.0 + w; }
    O[oo + i] = X[xo + i] * s * w;
  }
}
`;

export function gpuRmsNorm(
  rt: WebGPURuntime,
  x: GpuArray,
  w: GpuArray,
  out: GpuArray,
  rstd: GpuArray,
  dim: number,
  eps: number,
  zeroCentered: boolean,
): void {
  const rows = x.length / dim;
  if (!Number.isInteger(rows)) throw new ShapeError(`webgpu rmsNorm: ${x.length} elements are not rows of ${dim}`);
  launchRows(rt, RMSNORM, {
    rows,
    operands: [
      { array: x, perRow: dim },
      { array: w, perRow: 0 },
      { array: out, perRow: dim },
      { array: rstd, perRow: 1 },
    ],
    params: [dim, eps, zeroCentered ? 1 : 0],
    types: "ufu",
    groups: rowGroups(rt),
  });
}

const RMSNORM_BWD_DX = /* wgsl */ `${kernelHeader("dim: u32, zeroCentered: u32", [
  { name: "X", type: "f32" },
  { name: "W", type: "f32" },
  { name: "R", type: "f32" },
  { name: "G", type: "f32" },
  { name: "DX", type: "f32", write: true },
])}${REDUCE_SUM}
${ROW_ENTRY}
  let xo = p.off0 + row * p.dim;
  let go = p.off3 + row * p.dim;
  let s = R[p.off2 + row];
  var dot = 0.0;
  for (var i = lid; i < p.dim; i += ${ROW_WG}u) {
    var w = W[p.off1 + i];
    if (p.zeroCentered != 0u) { w = 1.0 + w; }
    dot += G[go + i] * w * X[xo + i] * s;
  }
  let mean = reduceSum(dot, lid) / f32(p.dim);
  let dxo = p.off4 + row * p.dim;
  for (var i = lid; i < p.dim; i += ${ROW_WG}u) {
    var w = W[p.off1 + i];
    if (p.zeroCentered != 0u) { w = 1.0 + w; }
    DX[dxo + i] = s * (G[go + i] * w - X[xo + i] * s * mean);
  }
}
`;

// dw[i] = Σ_rows g·x·rstd: one invocation per column walks the chunk's rows (first chunk overwrites).
const RMSNORM_BWD_DW = /* wgsl */ `${kernelHeader("dim: u32, accumulate: u32", [
  { name: "X", type: "f32" },
  { name: "R", type: "f32" },
  { name: "G", type: "f32" },
  { name: "DW", type: "f32", write: true },
])}
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let i = gid.x;
  if (i >= p.dim) { return; }
  var acc = 0.0;
  for (var r = p.row0; r < p.rowEnd; r++) {
    acc += G[p.off2 + r * p.dim + i] * X[p.off0 + r * p.dim + i] * R[p.off1 + r];
  }
  if (p.accumulate != 0u) { acc += DW[p.off3 + i]; }
  DW[p.off3 + i] = acc;
}
`;

export function gpuRmsNormBackward(
  rt: WebGPURuntime,
  x: GpuArray,
  w: GpuArray,
  rstd: GpuArray,
  g: GpuArray,
  dx: GpuArray,
  dw: GpuArray | null,
  dim: number,
  zeroCentered: boolean,
): void {
  const rows = x.length / dim;
  const [gIn, freeG] = distinctFrom(rt, g, [dx]);
  launchRows(rt, RMSNORM_BWD_DX, {
    rows,
    operands: [
      { array: x, perRow: dim },
      { array: w, perRow: 0 },
      { array: rstd, perRow: 1 },
      { array: gIn, perRow: dim },
      { array: dx, perRow: dim },
    ],
    params: [dim, zeroCentered ? 1 : 0],
    types: "uu",
    groups: rowGroups(rt),
  });
  if (dw) {
    // Chunks beyond the first add to what the previous chunk wrote.
    let first = true;
    const pipeline = rt.pipeline(RMSNORM_BWD_DW);
    const rowsPerChunk = Math.max(1, Math.floor((rt.maxBinding - 1024) / (dim * 4)));
    for (let r0 = 0; r0 < rows; r0 += rowsPerChunk) {
      const r1 = Math.min(rows, r0 + rowsPerChunk);
      const wx = rt.window(x, r0 * dim, r1 * dim);
      const wr = rt.window(rstd, r0, r1);
      const wg = rt.window(gIn, r0 * dim, r1 * dim);
      const wd = rt.window(dw);
      rt.dispatch(
        pipeline,
        [r0, r1, wx.elementOffset, wr.elementOffset, wg.elementOffset, wd.elementOffset, dim, first ? 0 : 1],
        "uuiiiiuu",
        [wx.resource, wr.resource, wg.resource, wd.resource],
        [Math.ceil(dim / 64)],
      );
      first = false;
    }
  }
  freeG();
}

// One invocation per (row, j < D − half): j < half rotates the pair (j, j + half); j ≥ half copies
// dimension j + half (past rotaryDim). Rows are the B·H·T head rows in [B][H][T] order.
const ROPE = /* wgsl */ `${kernelHeader(
  "heads: u32, seq: u32, headDim: u32, half: u32, perBatch: u32, srcBthd: u32, dstBthd: u32, sign: f32",
  [
    { name: "S", type: "f32" },
    { name: "C", type: "f32" },
    { name: "SN", type: "f32" },
    { name: "D", type: "f32", write: true },
  ],
)}
const WG = ${EW_WG}u;
@compute @workgroup_size(${EW_WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {
  let per = p.headDim - p.half;
  let idx = gid.x + gid.y * nw.x * WG;
  let total = (p.rowEnd - p.row0) * per;
  if (idx >= total) { return; }
  let row = p.row0 + idx / per;
  let j = idx % per;
  let t = row % p.seq;
  let bh = row / p.seq;
  let h = bh % p.heads;
  let b = bh / p.heads;
  let bhtd = row * p.headDim;
  let bthd = ((b * p.seq + t) * p.heads + h) * p.headDim;
  var o = bhtd; if (p.srcBthd != 0u) { o = bthd; }
  var q = bhtd; if (p.dstBthd != 0u) { q = bthd; }
  if (j < p.half) {
    var r = t; if (p.perBatch != 0u) { r = b * p.seq + t; }
    let c = C[p.off1 + r * p.half + j];
    let s = p.sign * SN[p.off2 + r * p.half + j];
    let x1 = S[p.off0 + o + j];
    let x2 = S[p.off0 + o + j + p.half];
    D[p.off3 + q + j] = x1 * c - x2 * s;
    D[p.off3 + q + j + p.half] = x2 * c + x1 * s;
  } else {
    D[p.off3 + q + j + p.half] = S[p.off0 + o + j + p.half];
  }
}
`;

function rope(
  rt: WebGPURuntime,
  src: GpuArray,
  cos: GpuArray,
  sin: GpuArray,
  dst: GpuArray,
  shape: RopeShape,
  sign: 1 | -1,
) {
  const { batch: B, heads: H, seq: T, headDim: D, rotaryDim, perBatch } = shape;
  if (rotaryDim % 2 !== 0 || rotaryDim > D)
    throw new ShapeError(`webgpu rope: rotaryDim ${rotaryDim} must be even and ≤ headDim ${D}`);
  const half = rotaryDim >> 1;
  const rows = B * H * T;
  const per = D - half;
  const [s, free] = distinctFrom(rt, src, [dst]);
  // Chunks are rows of the [B][H][T] side; the permuted side is bound whole.
  const srcBthd = shape.headsLast === true && sign === 1;
  const dstBthd = shape.headsLast === true && sign === -1;
  launchRows(rt, ROPE, {
    rows,
    operands: [
      { array: s, perRow: srcBthd ? 0 : D },
      { array: cos, perRow: 0 },
      { array: sin, perRow: 0 },
      { array: dst, perRow: dstBthd ? 0 : D },
    ],
    params: [H, T, D, half, perBatch ? 1 : 0, srcBthd ? 1 : 0, dstBthd ? 1 : 0, sign],
    types: "uuuuuuuf",
    groups: (r0, r1) => grid1d(rt, (r1 - r0) * per, EW_WG),
  });
  free();
}

export function gpuRopeForward(
  rt: WebGPURuntime,
  x: GpuArray,
  cos: GpuArray,
  sin: GpuArray,
  out: GpuArray,
  shape: RopeShape,
): void {
  rope(rt, x, cos, sin, out, shape, 1);
}
export function gpuRopeBackward(
  rt: WebGPURuntime,
  dOut: GpuArray,
  cos: GpuArray,
  sin: GpuArray,
  dx: GpuArray,
  shape: RopeShape,
): void {
  rope(rt, dOut, cos, sin, dx, shape, -1);
}

const SWIGLU_FWD = /* wgsl */ `${kernelHeader("", [
  { name: "G", type: "f32" },
  { name: "U", type: "f32" },
  { name: "O", type: "f32", write: true },
  { name: "SG", type: "f32", write: true },
])}
${ELEMENT_ENTRY}
  let g = G[p.off0 + i];
  let s = 1.0 / (1.0 + exp(-g));
  SG[p.off3 + i] = s;
  O[p.off2 + i] = g * s * U[p.off1 + i];
}
`;

const SWIGLU_BWD = /* wgsl */ `${kernelHeader("", [
  { name: "G", type: "f32" },
  { name: "U", type: "f32" },
  { name: "SG", type: "f32" },
  { name: "DO", type: "f32" },
  { name: "DG", type: "f32", write: true },
  { name: "DU", type: "f32", write: true },
])}
${ELEMENT_ENTRY}
  let g = G[p.off0 + i];
  let u = U[p.off1 + i];
  let s = SG[p.off2 + i];
  let d = DO[p.off3 + i];
  DU[p.off5 + i] = d * g * s;
  DG[p.off4 + i] = d * u * s * (1.0 + g * (1.0 - s));
}
`;

export function gpuSwigluForward(rt: WebGPURuntime, gate: GpuArray, up: GpuArray, out: GpuArray, sig: GpuArray): void {
  const [g, fg] = distinctFrom(rt, gate, [out, sig]);
  const [u, fu] = distinctFrom(rt, up, [out, sig]);
  launchElementwise(rt, SWIGLU_FWD, gate.length, [g, u, out, sig]);
  fg();
  fu();
}

export function gpuSwigluBackward(
  rt: WebGPURuntime,
  gate: GpuArray,
  up: GpuArray,
  sig: GpuArray,
  dOut: GpuArray,
  dGate: GpuArray,
  dUp: GpuArray,
): void {
  const frees: (() => void)[] = [];
  const reads = [gate, up, sig, dOut].map((a) => {
    const [c, f] = distinctFrom(rt, a, [dGate, dUp]);
    frees.push(f);
    return c;
  });
  launchElementwise(rt, SWIGLU_BWD, gate.length, [...reads, dGate, dUp]);
  for (const f of frees) f();
}

const ADAMW = /* wgsl */ `${kernelHeader("beta1: f32, beta2: f32, eps: f32, stepSize: f32, bc2Sqrt: f32, decay: f32", [
  { name: "P", type: "f32", write: true },
  { name: "G", type: "f32" },
  { name: "M", type: "f32", write: true },
  { name: "V", type: "f32", write: true },
])}
${ELEMENT_ENTRY}
  let g = G[p.off1 + i];
  let m = M[p.off2 + i] + (g - M[p.off2 + i]) * (1.0 - p.beta1);
  let v = V[p.off3 + i] * p.beta2 + (1.0 - p.beta2) * g * g;
  M[p.off2 + i] = m;
  V[p.off3 + i] = v;
  let w = P[p.off0 + i] * p.decay;
  P[p.off0 + i] = w - (p.stepSize * m) / (sqrt(v) / p.bc2Sqrt + p.eps);
}
`;

export function gpuAdamwUpdate(
  rt: WebGPURuntime,
  param: GpuArray,
  grad: GpuArray,
  m: GpuArray,
  v: GpuArray,
  h: AdamWStep,
): void {
  launchElementwise(
    rt,
    ADAMW,
    param.length,
    [param, grad, m, v],
    [h.beta1, h.beta2, h.eps, h.stepSize, h.bc2Sqrt, h.decay],
    "ffffff",
  );
}

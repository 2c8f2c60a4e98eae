// The generic kernels of `Kernels` (elementwise, broadcast binary, reductions, softmax, strided copy,
// gathers and scatters, cast, fill) in WGSL. Semantics follow src/backends/js/generic.ts; f32 math on the
// device may differ from the js reference (double, rounded once) by a few ulp. 16-bit outputs (bf16/f16)
// share u32 words, so they are written with atomicAnd/atomicOr on the element's half: neighbours written
// by other invocations stay intact.
import type {
  BinaryOp,
  BinaryShape,
  CopyShape,
  GatherRowsShape,
  ReduceOp,
  SoftmaxMode,
  UnaryOp,
} from "../../../backend.js";
import type { DType } from "../../../dtype.js";
import { ShapeError } from "../../../errors.js";
import type { GpuArray, WebGPURuntime } from "../runtime.js";
import { ELEMENTWISE_WG, grid1d, launchElementwise, launchRows } from "./launch.js";
import { REDUCE_SUM, ROW_ENTRY, ROW_WG, rowGroups } from "./rows.js";
import { kernelHeader } from "./wgsl.js";

const WG = ELEMENTWISE_WG;
const MAX_RANK = 8;

const FLOAT_BITS = /* wgsl */ `
var<private> posInfBits: u32 = 0x7f800000u;
var<private> negInfBits: u32 = 0xff800000u;
fn isNan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
fn posInf() -> f32 { return bitcast<f32>(posInfBits); }
fn negInf() -> f32 { return bitcast<f32>(negInfBits); }
`;

// Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), enough for f32 GELU.
const ERF = /* wgsl */ `
fn erfApprox(x: f32) -> f32 {
  let s = sign(x);
  let a = abs(x);
  let t = 1.0 / (1.0 + 0.3275911 * a);
  let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-a * a);
  return s * y;
}
fn tanhSafe(x: f32) -> f32 { return tanh(clamp(x, -15.0, 15.0)); }
fn powf(u: f32, v: f32) -> f32 {
  if (v == 0.0) { return 1.0; }
  if (v == 2.0) { return u * u; }
  if (v == 1.0) { return u; }
  if (u == 0.0) { if (v > 0.0) { return 0.0; } return posInf(); }
  if (u < 0.0) {
    if (floor(v) != v) { return bitcast<f32>(0x7fc00000u + 0u * posInfBits); }
    let r = exp2(v * log2(-u));
    if (abs(v % 2.0) == 1.0) { return -r; }
    return r;
  }
  return exp2(v * log2(u));
}
`;

function unaryExpr(op: UnaryOp): string {
  switch (op) {
    case "neg":
      return "-x";
    case "exp":
      return "exp(x)";
    case "log":
      return "log(x)";
    case "sqrt":
      return "sqrt(x)";
    case "rsqrt":
      return "1.0 / sqrt(x)";
    case "tanh":
      return "tanhSafe(x)";
    case "sigmoid":
      return "1.0 / (1.0 + exp(-x))";
    case "silu":
      return "x / (1.0 + exp(-x))";
    case "gelu":
      return "0.5 * x * (1.0 + erfApprox(x * 0.7071067811865476))";
    case "geluTanh":
      return "0.5 * x * (1.0 + tanhSafe(0.7978845608028654 * (x + 0.044715 * x * x * x)))";
    case "relu":
      return "select(0.0, x, x > 0.0)";
    case "softplus":
      return "select(select(log(1.0 + exp(x)), exp(x), x < -15.0), x, x > 20.0)";
    case "abs":
      return "abs(x)";
    case "sin":
      return "sin(x)";
    case "cos":
      return "cos(x)";
  }
}

/** d(op)/dx as an expression of x and y = op(x). */
function unaryDerivative(op: UnaryOp): string {
  switch (op) {
    case "neg":
      return "-1.0";
    case "exp":
      return "y";
    case "log":
      return "1.0 / x";
    case "sqrt":
      return "0.5 / y";
    case "rsqrt":
      return "-0.5 * y * y * y";
    case "tanh":
      return "1.0 - y * y";
    case "sigmoid":
      return "y * (1.0 - y)";
    case "silu":
      return "(1.0 / (1.0 + exp(-x))) * (1.0 + x * (1.0 - 1.0 / (1.0 + exp(-x))))";
    case "gelu":
      return "0.5 * (1.0 + erfApprox(x * 0.7071067811865476)) + x * 0.3989422804014327 * exp(-0.5 * x * x)";
    case "geluTanh":
      return "geluTanhGrad(x)";
    case "relu":
      return "select(0.0, 1.0, x > 0.0)";
    case "softplus":
      return "select(1.0 / (1.0 + exp(-x)), 1.0, x > 20.0)";
    case "abs":
      return "sign(x)";
    case "sin":
      return "cos(x)";
    case "cos":
      return "-sin(x)";
  }
}

const GELU_TANH_GRAD = /* wgsl */ `
fn geluTanhGrad(x: f32) -> f32 {
  let t = tanhSafe(0.7978845608028654 * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * 0.7978845608028654 * (1.0 + 3.0 * 0.044715 * x * x);
}
`;

function binaryExpr(op: BinaryOp, u: string, v: string): string {
  switch (op) {
    case "add":
      return `${u} + ${v}`;
    case "sub":
      return `${u} - ${v}`;
    case "mul":
      return `${u} * ${v}`;
    case "div":
      return `${u} / ${v}`;
    case "pow":
      return `powf(${u}, ${v})`;
    case "maximum":
      return `select(${v}, ${u}, ${u} >= ${v})`;
    case "minimum":
      return `select(${v}, ${u}, ${u} <= ${v})`;
    case "eq":
      return `select(0.0, 1.0, ${u} == ${v})`;
    case "ne":
      return `select(0.0, 1.0, ${u} != ${v})`;
    case "lt":
      return `select(0.0, 1.0, ${u} < ${v})`;
    case "le":
      return `select(0.0, 1.0, ${u} <= ${v})`;
    case "gt":
      return `select(0.0, 1.0, ${u} > ${v})`;
    case "ge":
      return `select(0.0, 1.0, ${u} >= ${v})`;
  }
}

const PRELUDE = FLOAT_BITS + ERF + GELU_TANH_GRAD;
const FLAT = "let i = p.row0 + gid.x + gid.y * nw.x * WGX; if (i >= p.rowEnd) { return; }";
const ENTRY = `const WGX = ${WG}u;
@compute @workgroup_size(${WG})
fn main(@builtin(global_invocation_id) gid: vec3u, @builtin(num_workgroups) nw: vec3u) {`;

/** Every binding read_write: in-place calls (out = x) bind one buffer twice, which WebGPU allows only for writable storage. */
const rw = (names: string[]) => names.map((name) => ({ name, type: "f32", write: true }));

export function gpuUnary(rt: WebGPURuntime, op: UnaryOp, x: GpuArray, out: GpuArray, n: number): void {
  const code = `${kernelHeader("", rw(["X", "O"]))}${PRELUDE}${ENTRY}
  ${FLAT}
  let x = X[p.off0 + i];
  O[p.off1 + i] = ${unaryExpr(op)};
}`;
  launchElementwise(rt, code, n, [x, out]);
}

export function gpuUnaryBackward(
  rt: WebGPURuntime,
  op: UnaryOp,
  x: GpuArray,
  y: GpuArray,
  g: GpuArray,
  dx: GpuArray,
  n: number,
): void {
  const code = `${kernelHeader("", rw(["X", "Y", "G", "DX"]))}${PRELUDE}${ENTRY}
  ${FLAT}
  let x = X[p.off0 + i];
  let y = Y[p.off1 + i];
  DX[p.off3 + i] = (${unaryDerivative(op)}) * G[p.off2 + i];
}`;
  launchElementwise(rt, code, n, [x, y, g, dx]);
}

export function gpuBinaryScalar(
  rt: WebGPURuntime,
  op: BinaryOp,
  x: GpuArray,
  s: number,
  out: GpuArray,
  n: number,
  scalarLeft: boolean,
): void {
  // Scalar right operand: maximum/minimum compare strictly (js: x > s ? x : s).
  let expr = scalarLeft ? binaryExpr(op, "p.s", "x") : binaryExpr(op, "x", "p.s");
  if (!scalarLeft && op === "maximum") expr = "select(p.s, x, x > p.s)";
  if (!scalarLeft && op === "minimum") expr = "select(p.s, x, x < p.s)";
  const code = `${kernelHeader("s: f32", rw(["X", "O"]))}${PRELUDE}${ENTRY}
  ${FLAT}
  let x = X[p.off0 + i];
  O[p.off1 + i] = ${expr};
}`;
  launchElementwise(rt, code, n, [x, out], [s], "f");
}

function contiguousStrides(shape: readonly number[], strides: readonly number[]): boolean {
  let expect = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] !== 1 && strides[d] !== expect) return false;
    expect *= shape[d];
  }
  return true;
}

/** Uniform words for up to MAX_RANK dims: shape, then one stride list per operand, each padded to 8. */
function metaWords(shape: readonly number[], ...strides: (readonly number[])[]): number[] {
  if (shape.length > MAX_RANK) throw new ShapeError(`webgpu: rank ${shape.length} exceeds ${MAX_RANK}`);
  const pad = (xs: readonly number[]) => [...xs, ...new Array(MAX_RANK - xs.length).fill(0)];
  return [...pad(shape), ...strides.flatMap(pad)];
}

/** WGSL: index `i` of the row-major output → element offsets along the stride lists (meta vec4 pairs). */
function stridedIndex(lists: number): string {
  const vars = Array.from({ length: lists }, (_, l) => `var o${l} = 0u;`).join(" ");
  const adds = Array.from({ length: lists }, (_, l) => `o${l} += c * p.dims[${2 * (l + 1)}u + d / 4u][d % 4u];`).join(
    " ",
  );
  return `${vars}
  var rest = i;
  for (var dd = 0u; dd < p.rank; dd++) {
    let d = p.rank - 1u - dd;
    let extent = p.dims[d / 4u][d % 4u];
    let c = rest % extent;
    rest = rest / extent;
    ${adds}
  }`;
}

export function gpuBinary(
  rt: WebGPURuntime,
  op: BinaryOp,
  a: GpuArray,
  b: GpuArray,
  out: GpuArray,
  s: BinaryShape,
): void {
  const n = s.shape.reduce((x, y) => x * y, 1);
  if (n === 0) return;
  if (contiguousStrides(s.shape, s.aStrides) && contiguousStrides(s.shape, s.bStrides)) {
    const code = `${kernelHeader("", rw(["A", "B", "O"]))}${PRELUDE}${ENTRY}
  ${FLAT}
  let u = A[p.off0 + i];
  let v = B[p.off1 + i];
  O[p.off2 + i] = ${binaryExpr(op, "u", "v")};
}`;
    launchElementwise(rt, code, n, [a, b, out]);
    return;
  }
  const code = `struct Params { row0: u32, rowEnd: u32, off0: u32, off1: u32, off2: u32, rank: u32, pad0: u32, pad1: u32, dims: array<vec4u, 6> }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> A: array<f32>;
@group(0) @binding(2) var<storage, read_write> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
${PRELUDE}${ENTRY}
  ${FLAT}
  ${stridedIndex(2)}
  let u = A[p.off0 + o0];
  let v = B[p.off1 + o1];
  O[p.off2 + i] = ${binaryExpr(op, "u", "v")};
}`;
  const wa = rt.window(a);
  const wb = rt.window(b);
  const wo = rt.window(out, 0, n);
  rt.dispatch(
    rt.pipeline(code),
    [
      0,
      n,
      wa.elementOffset,
      wb.elementOffset,
      wo.elementOffset,
      s.shape.length,
      0,
      0,
      ...metaWords(s.shape, s.aStrides, s.bStrides),
    ],
    `uuiiiuuu${"u".repeat(24)}`,
    [wa.resource, wb.resource, wo.resource],
    grid1d(rt, n, WG),
  );
}

export function gpuWhere(rt: WebGPURuntime, c: GpuArray, a: GpuArray, b: GpuArray, out: GpuArray, n: number): void {
  const code = `${kernelHeader("", rw(["C", "A", "B", "O"]))}${ENTRY}
  ${FLAT}
  O[p.off3 + i] = select(B[p.off2 + i], A[p.off1 + i], C[p.off0 + i] != 0.0);
}`;
  launchElementwise(rt, code, n, [c, a, b, out]);
}

export function gpuClamp(rt: WebGPURuntime, x: GpuArray, out: GpuArray, n: number, lo: number, hi: number): void {
  const code = `${kernelHeader("lo: f32, hi: f32", rw(["X", "O"]))}${ENTRY}
  ${FLAT}
  let x = X[p.off0 + i];
  O[p.off1 + i] = select(select(x, p.hi, x > p.hi), p.lo, x < p.lo);
}`;
  launchElementwise(rt, code, n, [x, out], [lo, hi], "ff");
}

/** Reduction over the last axis: one workgroup per row of n elements of x, one output element per row. */
function launchRowReduction(
  rt: WebGPURuntime,
  code: string,
  x: GpuArray,
  out: GpuArray,
  rows: number,
  n: number,
): void {
  launchRows(rt, code, {
    rows,
    operands: [
      { array: x, perRow: n },
      { array: out, perRow: 1 },
    ],
    params: [n],
    types: "u",
    groups: rowGroups(rt),
  });
}

/** Reduction over a middle axis ([outer, n, inner] → [outer, inner]): one invocation per output element. */
function dispatchStridedReduction(
  rt: WebGPURuntime,
  code: string,
  x: GpuArray,
  out: GpuArray,
  outer: number,
  n: number,
  inner: number,
): void {
  const wx = rt.window(x);
  const wo = rt.window(out, 0, outer * inner);
  rt.dispatch(
    rt.pipeline(code),
    [0, outer * inner, wx.elementOffset, wo.elementOffset, n, inner],
    "uuiiuu",
    [wx.resource, wo.resource],
    grid1d(rt, outer * inner, WG),
  );
}

function reduceStep(op: ReduceOp, acc: string, v: string): string {
  if (op === "sum") return `${acc} = ${acc} + ${v};`;
  const cmp = op === "max" ? ">" : "<";
  return `if (${v} ${cmp} ${acc} || isNan(${v})) { ${acc} = ${v}; }`;
}

export function gpuReduce(
  rt: WebGPURuntime,
  op: ReduceOp,
  x: GpuArray,
  out: GpuArray,
  outer: number,
  n: number,
  inner: number,
): void {
  const init = op === "sum" ? "0.0" : op === "max" ? "negInf()" : "posInf()";
  if (outer * inner === 0) return;
  if (inner === 1) {
    // One workgroup per row: strided partials, then a tree (NaN-propagating for max/min).
    const combine =
      op === "sum"
        ? "red[lid] = red[lid] + red[lid + s];"
        : `let v = red[lid + s]; if (v ${op === "max" ? ">" : "<"} red[lid] || isNan(v)) { if (!isNan(red[lid])) { red[lid] = v; } }`;
    const code = `${kernelHeader("n: u32", [
      { name: "X", type: "f32" },
      { name: "O", type: "f32", write: true },
    ])}${FLOAT_BITS}
var<workgroup> red: array<f32, ${ROW_WG}>;
${ROW_ENTRY}
  var acc = ${init};
  for (var j = lid; j < p.n; j += ${ROW_WG}u) { let v = X[p.off0 + row * p.n + j]; ${reduceStep(op, "acc", "v")} }
  red[lid] = acc;
  workgroupBarrier();
  for (var s = ${ROW_WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) { ${combine} }
    workgroupBarrier();
  }
  if (lid == 0u) { O[p.off1 + row] = red[0]; }
}`;
    launchRowReduction(rt, code, x, out, outer, n);
    return;
  }
  const code = `${kernelHeader("n: u32, inner: u32", [
    { name: "X", type: "f32" },
    { name: "O", type: "f32", write: true },
  ])}${FLOAT_BITS}${ENTRY}
  ${FLAT}
  let o = i / p.inner;
  let ii = i % p.inner;
  var acc = ${init};
  for (var j = 0u; j < p.n; j++) { let v = X[p.off0 + (o * p.n + j) * p.inner + ii]; ${reduceStep(op, "acc", "v")} }
  O[p.off1 + i] = acc;
}`;
  dispatchStridedReduction(rt, code, x, out, outer, n, inner);
}

export function gpuArgmax(
  rt: WebGPURuntime,
  x: GpuArray,
  out: GpuArray,
  outer: number,
  n: number,
  inner: number,
): void {
  if (outer * inner === 0) return;
  // WGSL: does v at index j beat bv at bj? Larger, or the first NaN; ties keep the lower index. Used by the
  // per-invocation scan and the workgroup combine, so both order candidates the same way.
  const better = (v: string, bv: string, j: string, bj: string) =>
    `(${v} > ${bv} && !isNan(${bv})) || (isNan(${v}) && !isNan(${bv})) || ((${v} == ${bv} || (isNan(${v}) && isNan(${bv}))) && ${j} < ${bj})`;
  if (inner === 1) {
    const code = `${kernelHeader("n: u32", [
      { name: "X", type: "f32" },
      { name: "O", type: "i32", write: true },
    ])}${FLOAT_BITS}
var<workgroup> rv: array<f32, ${ROW_WG}>;
var<workgroup> rj: array<u32, ${ROW_WG}>;
${ROW_ENTRY}
  var bv = negInf();
  var bj = 0xffffffffu;
  for (var j = lid; j < p.n; j += ${ROW_WG}u) {
    let v = X[p.off0 + row * p.n + j];
    if (bj == 0xffffffffu || ${better("v", "bv", "j", "bj")}) { bv = v; bj = j; }
  }
  rv[lid] = bv; rj[lid] = bj;
  workgroupBarrier();
  for (var s = ${ROW_WG / 2}u; s > 0u; s >>= 1u) {
    if (lid < s) {
      let v = rv[lid + s]; let j = rj[lid + s];
      let bv2 = rv[lid]; let bj2 = rj[lid];
      if (j != 0xffffffffu && (bj2 == 0xffffffffu || (${better("v", "bv2", "j", "bj2")}))) {
        rv[lid] = v; rj[lid] = j;
      }
    }
    workgroupBarrier();
  }
  if (lid == 0u) { O[p.off1 + row] = select(i32(rj[0]), 0, rj[0] == 0xffffffffu); }
}`;
    launchRowReduction(rt, code, x, out, outer, n);
    return;
  }
  const code = `${kernelHeader("n: u32, inner: u32", [
    { name: "X", type: "f32" },
    { name: "O", type: "i32", write: true },
  ])}${FLOAT_BITS}${ENTRY}
  ${FLAT}
  let o = i / p.inner;
  let ii = i % p.inner;
  var bv = negInf();
  var bj = 0u;
  for (var j = 0u; j < p.n; j++) {
    let v = X[p.off0 + (o * p.n + j) * p.inner + ii];
    if (v > bv || (isNan(v) && !isNan(bv))) { bv = v; bj = j; if (isNan(v)) { break; } }
  }
  O[p.off1 + i] = i32(bj);
}`;
  dispatchStridedReduction(rt, code, x, out, outer, n, inner);
}

export function gpuSoftmax(
  rt: WebGPURuntime,
  mode: SoftmaxMode,
  x: GpuArray,
  out: GpuArray,
  rows: number,
  n: number,
): void {
  const write =
    mode === "softmax"
      ? "O[p.off1 + row * p.n + j] = exp(X[p.off0 + row * p.n + j] - mx) / s;"
      : "O[p.off1 + row * p.n + j] = X[p.off0 + row * p.n + j] - (mx + log(s));";
  const code = `${kernelHeader("n: u32", rw(["X", "O"]))}${REDUCE_SUM}
${ROW_ENTRY}
  var mx = -3.0e38;
  for (var j = lid; j < p.n; j += ${ROW_WG}u) { mx = max(mx, X[p.off0 + row * p.n + j]); }
  mx = reduceMax(mx, lid);
  var s = 0.0;
  for (var j = lid; j < p.n; j += ${ROW_WG}u) { s += exp(X[p.off0 + row * p.n + j] - mx); }
  s = reduceSum(s, lid);
  for (var j = lid; j < p.n; j += ${ROW_WG}u) { ${write} }
}`;
  launchRows(rt, code, {
    rows,
    operands: [
      { array: x, perRow: n },
      { array: out, perRow: n },
    ],
    params: [n],
    types: "u",
    groups: rowGroups(rt),
  });
}

export function gpuSoftmaxBackward(
  rt: WebGPURuntime,
  mode: SoftmaxMode,
  y: GpuArray,
  g: GpuArray,
  dx: GpuArray,
  rows: number,
  n: number,
): void {
  const part = mode === "softmax" ? "G[go + j] * Y[yo + j]" : "G[go + j]";
  const write = mode === "softmax" ? "Y[yo + j] * (G[go + j] - t)" : "G[go + j] - exp(Y[yo + j]) * t";
  const code = `${kernelHeader("n: u32", rw(["Y", "G", "DX"]))}${REDUCE_SUM}
${ROW_ENTRY}
  let yo = p.off0 + row * p.n;
  let go = p.off1 + row * p.n;
  var acc = 0.0;
  for (var j = lid; j < p.n; j += ${ROW_WG}u) { acc += ${part}; }
  let t = reduceSum(acc, lid);
  for (var j = lid; j < p.n; j += ${ROW_WG}u) { DX[p.off2 + row * p.n + j] = ${write}; }
}`;
  launchRows(rt, code, {
    rows,
    operands: [
      { array: y, perRow: n },
      { array: g, perRow: n },
      { array: dx, perRow: n },
    ],
    params: [n],
    types: "u",
    groups: rowGroups(rt),
  });
}

const is16 = (d: GpuArray["dtype"]) => d === "bf16" || d === "f16";

/** WGSL: read 16-bit element `i` of u32 array `A`, and store 16 bits into element `i` of atomic array `O`. */
const LOAD16 = /* wgsl */ `
fn load16(i: u32) -> u32 { return (X[i >> 1u] >> ((i & 1u) * 16u)) & 0xffffu; }
`;
const STORE16 = /* wgsl */ `
fn store16(i: u32, bits: u32) {
  let shift = (i & 1u) * 16u;
  atomicAnd(&O[i >> 1u], ~(0xffffu << shift));
  atomicOr(&O[i >> 1u], (bits & 0xffffu) << shift);
}
`;

export function gpuCopy(rt: WebGPURuntime, x: GpuArray, out: GpuArray, s: CopyShape): void {
  const n = s.shape.reduce((a, b) => a * b, 1);
  if (n === 0) return;
  const half = is16(x.dtype);
  const body = half
    ? "store16(p.off1 + p.dstOffset + o1, load16(p.off0 + p.srcOffset + o0));"
    : "O[p.off1 + p.dstOffset + o1] = X[p.off0 + p.srcOffset + o0];";
  const code = `struct Params { row0: u32, rowEnd: u32, off0: u32, off1: u32, rank: u32, srcOffset: u32, dstOffset: u32, pad: u32, dims: array<vec4u, 6> }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> O: array<${half ? "atomic<u32>" : "u32"}>;
${half ? LOAD16 + STORE16 : ""}${ENTRY}
  ${FLAT}
  ${s.shape.length === 0 ? "let o0 = 0u; let o1 = 0u;" : stridedIndex(2)}
  ${body}
}`;
  const wx = rt.window(x);
  const wo = rt.window(out);
  rt.dispatch(
    rt.pipeline(code),
    [
      0,
      n,
      wx.elementOffset,
      wo.elementOffset,
      s.shape.length,
      s.srcOffset,
      s.dstOffset,
      0,
      ...metaWords(s.shape, s.srcStrides, s.dstStrides),
    ],
    `uuiiuuuu${"u".repeat(24)}`,
    [wx.resource, wo.resource],
    grid1d(rt, n, WG),
  );
}

/** WGSL converting f32 to bf16/f16 bits with round-to-nearest-even (dtype.ts semantics). */
const NARROW = /* wgsl */ `
fn toBf16(v: f32) -> u32 {
  let b = bitcast<u32>(v);
  if ((b & 0x7fffffffu) > 0x7f800000u) { return ((b >> 16u) | 0x40u) & 0xffffu; }
  return ((b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u) & 0xffffu;
}
fn toF16(v: f32) -> u32 {
  let x = bitcast<u32>(v);
  let sgn = (x >> 16u) & 0x8000u;
  let ex = (x >> 23u) & 0xffu;
  var mant = x & 0x7fffffu;
  if (ex == 0xffu) { if (mant != 0u) { return sgn | 0x7c00u | 0x200u | (mant >> 13u); } return sgn | 0x7c00u; }
  let e = i32(ex) - 127 + 15;
  if (e >= 0x1f) { return sgn | 0x7c00u; }
  if (e <= 0) {
    if (e < -10) { return sgn; }
    mant = mant | 0x800000u;
    let shift = u32(14 - e);
    let halfway = 1u << (shift - 1u);
    let rest = mant & ((1u << shift) - 1u);
    var o = mant >> shift;
    if (rest > halfway || (rest == halfway && (o & 1u) == 1u)) { o += 1u; }
    return sgn | o;
  }
  var o = (u32(e) << 10u) | (mant >> 13u);
  let rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (o & 1u) == 1u)) { o += 1u; }
  return sgn | o;
}
fn fromF16(h: u32) -> f32 { return unpack2x16float(h)[0]; }
`;

export function gpuCast(rt: WebGPURuntime, x: GpuArray, out: GpuArray, n: number, from: DType, to: DType): void {
  if (n === 0) return;
  const read = is16(from)
    ? from === "bf16"
      ? "bitcast<f32>(load16(p.off0 + i) << 16u)"
      : "fromF16(load16(p.off0 + i))"
    : from === "i32"
      ? "f32(bitcast<i32>(X[p.off0 + i]))"
      : "bitcast<f32>(X[p.off0 + i])";
  let write: string;
  if (from === to) write = is16(to) ? "store16(p.off1 + i, load16(p.off0 + i));" : "O[p.off1 + i] = X[p.off0 + i];";
  else if (to === "f32") write = `O[p.off1 + i] = bitcast<u32>(${read});`;
  else if (to === "i32") write = `O[p.off1 + i] = bitcast<u32>(i32(trunc(${read})));`;
  else write = `store16(p.off1 + i, ${to === "bf16" ? "toBf16" : "toF16"}(${read}));`;
  const atomicOut = is16(to);
  const code = `struct Params { row0: u32, rowEnd: u32, off0: u32, off1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> O: array<${atomicOut ? "atomic<u32>" : "u32"}>;
${LOAD16}${atomicOut ? STORE16 : ""}${NARROW}${ENTRY}
  ${FLAT}
  ${write}
}`;
  launchElementwise(rt, code, n, [x, out]);
}

export function gpuFill(rt: WebGPURuntime, out: GpuArray, n: number, value: number, step: number, dtype: DType): void {
  if (n === 0) return;
  const intExact = dtype === "i32" && Number.isInteger(value) && Number.isInteger(step);
  let write: string;
  if (dtype === "f32") write = "O[p.off0 + i] = bitcast<u32>(p.value + f32(i) * p.step);";
  else if (dtype === "i32")
    write = intExact
      ? "O[p.off0 + i] = bitcast<u32>(p.ivalue + i32(i) * p.istep);"
      : "O[p.off0 + i] = bitcast<u32>(i32(trunc(p.value + f32(i) * p.step)));";
  else write = `store16(p.off0 + i, ${dtype === "bf16" ? "toBf16" : "toF16"}(p.value + f32(i) * p.step));`;
  const half = is16(dtype);
  const code = `struct Params { row0: u32, rowEnd: u32, off0: u32, value: f32, step: f32, ivalue: i32, istep: i32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> O: array<${half ? "atomic<u32>" : "u32"}>;
${half ? STORE16 : ""}${NARROW}${ENTRY}
  ${FLAT}
  ${write}
}`;
  launchElementwise(rt, code, n, [out], [value, step, intExact ? value : 0, intExact ? step : 0], "ffii");
}

/**
 * Embedding rows. The table may exceed one binding (a 151,936 × 1,024 f32 embedding is 622 MB): it is bound
 * in windows of whole rows, and each dispatch writes the output rows whose id falls in its window.
 */
export function gpuGatherRows(
  rt: WebGPURuntime,
  table: GpuArray,
  ids: GpuArray,
  out: GpuArray,
  s: GatherRowsShape,
): void {
  const { count, rowLen: d, tableRows } = s;
  if (count * d === 0) return;
  const load =
    s.dtype === "f32"
      ? "bitcast<f32>(T[p.off0 + e])"
      : s.dtype === "bf16"
        ? "bitcast<f32>(((T[(p.off0 + e) >> 1u] >> (((p.off0 + e) & 1u) * 16u)) & 0xffffu) << 16u)"
        : "unpack2x16float((T[(p.off0 + e) >> 1u] >> (((p.off0 + e) & 1u) * 16u)) & 0xffffu)[0]";
  const code = `struct Params { off0: u32, off1: u32, off2: u32, count: u32, d: u32, t0: u32, t1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> T: array<u32>;
@group(0) @binding(2) var<storage, read> IDS: array<i32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
${ENTRY}
  let i = gid.x + gid.y * nw.x * WGX;
  if (i >= p.count * p.d) { return; }
  let r = i / p.d;
  let id = u32(IDS[p.off1 + r]);
  if (id < p.t0 || id >= p.t1) { return; }
  let e = id * p.d + i % p.d;
  O[p.off2 + i] = ${load};
}`;
  const pipeline = rt.pipeline(code);
  const bytesPerRow = (d * (s.dtype === "f32" ? 4 : 2)) | 0;
  const rowsPerWindow = Math.max(1, Math.floor((rt.maxBinding - 1024) / bytesPerRow));
  const wi = rt.window(ids, 0, count);
  const wo = rt.window(out, 0, count * d);
  for (let t0 = 0; t0 < tableRows; t0 += rowsPerWindow) {
    const t1 = Math.min(tableRows, t0 + rowsPerWindow);
    const wt = rt.window(table, t0 * d, t1 * d);
    rt.dispatch(
      pipeline,
      [wt.elementOffset, wi.elementOffset, wo.elementOffset, count, d, t0, t1],
      "iiiuuuu",
      [wt.resource, wi.resource, wo.resource],
      grid1d(rt, count * d, WG),
    );
  }
}

/** out[ids[i]] += src[i] in order of i: one invocation per column walks the ids, so repeats accumulate deterministically. */
export function gpuScatterAddRows(
  rt: WebGPURuntime,
  src: GpuArray,
  ids: GpuArray,
  out: GpuArray,
  count: number,
  d: number,
): void {
  if (count * d === 0) return;
  const code = `struct Params { off0: u32, off1: u32, off2: u32, count: u32, d: u32, t0: u32, t1: u32 }
@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> S: array<f32>;
@group(0) @binding(2) var<storage, read> IDS: array<i32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
${ENTRY}
  let j = gid.x + gid.y * nw.x * WGX;
  if (j >= p.d) { return; }
  for (var i = 0u; i < p.count; i++) {
    let id = u32(IDS[p.off1 + i]);
    if (id < p.t0 || id >= p.t1) { continue; }
    let o = p.off2 + id * p.d + j;
    O[o] = O[o] + S[p.off0 + i * p.d + j];
  }
}`;
  const pipeline = rt.pipeline(code);
  const outRows = Math.ceil(out.length / d);
  const rowsPerWindow = Math.max(1, Math.floor((rt.maxBinding - 1024) / (d * 4)));
  const ws = rt.window(src, 0, count * d);
  const wi = rt.window(ids, 0, count);
  for (let t0 = 0; t0 < outRows; t0 += rowsPerWindow) {
    const t1 = Math.min(outRows, t0 + rowsPerWindow);
    const wo = rt.window(out, t0 * d, t1 * d);
    rt.dispatch(
      pipeline,
      [ws.elementOffset, wi.elementOffset, wo.elementOffset, count, d, t0, t1],
      "iiiuuuu",
      [ws.resource, wi.resource, wo.resource],
      grid1d(rt, d, WG),
    );
  }
}

export function gpuGatherAxis(
  rt: WebGPURuntime,
  x: GpuArray,
  index: GpuArray,
  out: GpuArray,
  outer: number,
  n: number,
  k: number,
  inner: number,
): void {
  const total = outer * k * inner;
  if (total === 0) return;
  const code = `${kernelHeader("n: u32, k: u32, inner: u32", [
    { name: "X", type: "f32" },
    { name: "IX", type: "i32" },
    { name: "O", type: "f32", write: true },
  ])}${ENTRY}
  ${FLAT}
  let ii = i % p.inner;
  let o = i / (p.k * p.inner);
  O[p.off2 + i] = X[p.off0 + (o * p.n + u32(IX[p.off1 + i])) * p.inner + ii];
}`;
  const wx = rt.window(x);
  const wi = rt.window(index, 0, total);
  const wo = rt.window(out, 0, total);
  rt.dispatch(
    rt.pipeline(code),
    [0, total, wx.elementOffset, wi.elementOffset, wo.elementOffset, n, k, inner],
    "uuiiiuuu",
    [wx.resource, wi.resource, wo.resource],
    grid1d(rt, total, WG),
  );
}

export function gpuScatterAddAxis(
  rt: WebGPURuntime,
  g: GpuArray,
  index: GpuArray,
  dx: GpuArray,
  outer: number,
  n: number,
  k: number,
  inner: number,
): void {
  const lanes = outer * inner;
  if (lanes * k === 0) return;
  // One invocation per (o, i) walks j in order: repeated indices accumulate in the reference's order.
  const code = `${kernelHeader("n: u32, k: u32, inner: u32", [
    { name: "G", type: "f32" },
    { name: "IX", type: "i32" },
    { name: "DX", type: "f32", write: true },
  ])}${ENTRY}
  ${FLAT}
  let o = i / p.inner;
  let ii = i % p.inner;
  for (var j = 0u; j < p.k; j++) {
    let q = (o * p.k + j) * p.inner + ii;
    let d = p.off2 + (o * p.n + u32(IX[p.off1 + q])) * p.inner + ii;
    DX[d] = DX[d] + G[p.off0 + q];
  }
}`;
  const wg = rt.window(g, 0, outer * k * inner);
  const wi = rt.window(index, 0, outer * k * inner);
  const wd = rt.window(dx);
  rt.dispatch(
    rt.pipeline(code),
    [0, lanes, wg.elementOffset, wi.elementOffset, wd.elementOffset, n, k, inner],
    "uuiiiuuu",
    [wg.resource, wi.resource, wd.resource],
    grid1d(rt, lanes, WG),
  );
}

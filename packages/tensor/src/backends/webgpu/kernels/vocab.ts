// Kernels over rows of the vocabulary: cross-entropy (fwd/bwd), softmax rows, KL rows. One workgroup
// per row strides over the vocabulary; row chunks keep each logits window within one binding, so a
// 256 × 151,936 f32 logits array (155 MB) runs in two dispatches. Sums are f32 (the js reference
// sums in f64; parity tolerances account for it).
import type { KlRowsShape } from "../../../backend.js";
import type { GpuArray, WebGPURuntime } from "../runtime.js";
import { distinctFrom, grid1d, launchRows } from "./launch.js";
import { REDUCE_SUM, ROW_ENTRY, ROW_WG, rowGroups } from "./rows.js";
import { kernelHeader } from "./wgsl.js";

const NEG_BIG = "-3.0e38";

// Row o = off0 + row · vocab of L: mx = its max and s = Σ exp(L − mx), both reduced over the workgroup.
const ROW_MAX_AND_SUM_EXP = /* wgsl */ `  let o = p.off0 + row * p.vocab;
  var mx = ${NEG_BIG};
  for (var j = lid; j < p.vocab; j += ${ROW_WG}u) { mx = max(mx, L[o + j]); }
  mx = reduceMax(mx, lid);
  var s = 0.0;
  for (var j = lid; j < p.vocab; j += ${ROW_WG}u) { s += exp(L[o + j] - mx); }
  s = reduceSum(s, lid);`;

const CE_FWD = /* wgsl */ `${kernelHeader("vocab: u32, ignoreIndex: i32", [
  { name: "L", type: "f32" },
  { name: "T", type: "i32" },
  { name: "LOSS", type: "f32", write: true },
  { name: "LSE", type: "f32", write: true },
])}${REDUCE_SUM}
${ROW_ENTRY}
${ROW_MAX_AND_SUM_EXP}
  if (lid == 0u) {
    let lse = mx + log(s);
    LSE[p.off3 + row] = lse;
    let t = T[p.off1 + row];
    if (t == p.ignoreIndex) { LOSS[p.off2 + row] = 0.0; } else { LOSS[p.off2 + row] = lse - L[o + u32(t)]; }
  }
}
`;

export function gpuCrossEntropyForward(
  rt: WebGPURuntime,
  logits: GpuArray,
  targets: GpuArray,
  loss: GpuArray,
  lse: GpuArray,
  rows: number,
  vocab: number,
  ignoreIndex: number,
): void {
  launchRows(rt, CE_FWD, {
    rows,
    operands: [
      { array: logits, perRow: vocab },
      { array: targets, perRow: 1 },
      { array: loss, perRow: 1 },
      { array: lse, perRow: 1 },
    ],
    params: [vocab, ignoreIndex],
    types: "ui",
    groups: rowGroups(rt),
  });
}

// Invocations over (row, j): x covers the vocabulary in blocks of 256, y the chunk's rows.
const CE_BWD = /* wgsl */ `${kernelHeader("vocab: u32, ignoreIndex: i32", [
  { name: "L", type: "f32" },
  { name: "T", type: "i32" },
  { name: "LSE", type: "f32" },
  { name: "GL", type: "f32" },
  { name: "DL", type: "f32", write: true },
])}
@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let j = gid.x;
  let row = p.row0 + gid.y;
  if (j >= p.vocab || row >= p.rowEnd) { return; }
  let o = row * p.vocab + j;
  let t = T[p.off1 + row];
  if (t == p.ignoreIndex) { DL[p.off4 + o] = 0.0; return; }
  let g = GL[p.off3 + row];
  var d = exp(L[p.off0 + o] - LSE[p.off2 + row]) * g;
  if (i32(j) == t) { d -= g; }
  DL[p.off4 + o] = d;
}
`;

export function gpuCrossEntropyBackward(
  rt: WebGPURuntime,
  logits: GpuArray,
  targets: GpuArray,
  lse: GpuArray,
  gradLoss: GpuArray,
  dlogits: GpuArray,
  rows: number,
  vocab: number,
  ignoreIndex: number,
): void {
  const [l, free] = distinctFrom(rt, logits, [dlogits]);
  launchRows(rt, CE_BWD, {
    rows,
    operands: [
      { array: l, perRow: vocab },
      { array: targets, perRow: 1 },
      { array: lse, perRow: 1 },
      { array: gradLoss, perRow: 1 },
      { array: dlogits, perRow: vocab },
    ],
    params: [vocab, ignoreIndex],
    types: "ui",
    groups: (r0, r1) => [Math.ceil(vocab / 256), r1 - r0],
    maxRowsPerChunk: rt.info.limits.maxComputeWorkgroupsPerDimension,
  });
  free();
}

function softmaxSource(inPlace: boolean): string {
  const bindings = inPlace
    ? [
        { name: "L", type: "f32", write: true },
        { name: "LSE", type: "f32", write: true },
        { name: "RS", type: "f32" },
      ]
    : [
        { name: "L", type: "f32" },
        { name: "LSE", type: "f32", write: true },
        { name: "RS", type: "f32" },
        { name: "PR", type: "f32", write: true },
      ];
  const out = inPlace ? "L[o + j]" : "PR[p.off3 + row * p.vocab + j]";
  return /* wgsl */ `${kernelHeader("vocab: u32, hasScale: u32", bindings)}${REDUCE_SUM}
${ROW_ENTRY}
${ROW_MAX_AND_SUM_EXP}
  if (lid == 0u) { LSE[p.off1 + row] = mx + log(s); }
  var scale = 1.0;
  if (p.hasScale != 0u) { scale = RS[p.off2 + row]; }
  let inv = scale / s;
  for (var j = lid; j < p.vocab; j += ${ROW_WG}u) { ${out} = exp(L[o + j] - mx) * inv; }
}
`;
}

export function gpuSoftmaxRows(
  rt: WebGPURuntime,
  logits: GpuArray,
  probs: GpuArray,
  lse: GpuArray,
  rows: number,
  vocab: number,
  rowScale?: GpuArray | null,
): void {
  const inPlace = logits.buffer === probs.buffer && logits.offset === probs.offset;
  const scale = rowScale ?? rt.dummy;
  const [l, free] = inPlace ? [logits, () => {}] : distinctFrom(rt, logits, [probs]);
  const operands = [
    { array: l, perRow: vocab },
    { array: lse, perRow: 1 },
    { array: scale, perRow: rowScale ? 1 : 0 },
  ];
  if (!inPlace) operands.push({ array: probs, perRow: vocab });
  launchRows(rt, softmaxSource(inPlace), {
    rows,
    operands,
    params: [vocab, rowScale ? 1 : 0],
    types: "uu",
    groups: rowGroups(rt),
  });
  free();
}

// One workgroup per row: maxima, sums, KL, then (optionally) the gradient direction; see
// Kernels.klDivergenceRows. Teacher rows are bound whole (they may be gathered by teacherRows).
const KL = /* wgsl */ `${kernelHeader(
  "vocab: u32, scale: f32, reverse: u32, hasTeacherRows: u32, hasGrad: u32, hasGradScale: u32",
  [
    { name: "S", type: "f32" },
    { name: "TE", type: "f32" },
    { name: "TR", type: "i32" },
    { name: "GR", type: "f32", write: true },
    { name: "LOSS", type: "f32", write: true },
    { name: "LS", type: "f32", write: true },
    { name: "LT", type: "f32", write: true },
    { name: "GS", type: "f32" },
  ],
)}${REDUCE_SUM}
${ROW_ENTRY}
  let c = p.scale;
  let os = p.off0 + row * p.vocab;
  var trow = row;
  if (p.hasTeacherRows != 0u) { trow = u32(TR[p.off2 + row]); }
  let ot = p.off1 + trow * p.vocab;
  var ms = ${NEG_BIG};
  var mt = ${NEG_BIG};
  for (var j = lid; j < p.vocab; j += ${ROW_WG}u) { ms = max(ms, S[os + j] * c); mt = max(mt, TE[ot + j] * c); }
  ms = reduceMax(ms, lid);
  mt = reduceMax(mt, lid);
  var ss = 0.0;
  var st = 0.0;
  for (var j = lid; j < p.vocab; j += ${ROW_WG}u) { ss += exp(S[os + j] * c - ms); st += exp(TE[ot + j] * c - mt); }
  let ls = ms + log(reduceSum(ss, lid));
  let lt = mt + log(reduceSum(st, lid));
  var kl = 0.0;
  for (var j = lid; j < p.vocab; j += ${ROW_WG}u) {
    let s = S[os + j] * c - ls;
    let q = TE[ot + j] * c - lt;
    if (p.reverse != 0u) { kl += exp(s) * (s - q); } else { kl += exp(q) * (q - s); }
  }
  kl = reduceSum(kl, lid);
  if (lid == 0u) { LOSS[p.off4 + row] = kl; LS[p.off5 + row] = ls; LT[p.off6 + row] = lt; }
  if (p.hasGrad == 0u) { return; }
  var g = 1.0;
  if (p.hasGradScale != 0u) { g = GS[p.off7 + row]; }
  let og = p.off3 + row * p.vocab;
  for (var j = lid; j < p.vocab; j += ${ROW_WG}u) {
    let s = S[os + j] * c - ls;
    let q = TE[ot + j] * c - lt;
    if (p.reverse != 0u) { GR[og + j] = g * exp(s) * (s - q - kl); } else { GR[og + j] = g * (exp(s) - exp(q)); }
  }
}
`;

export function gpuKlDivergenceRows(
  rt: WebGPURuntime,
  student: GpuArray,
  teacher: GpuArray,
  teacherRows: GpuArray | null,
  grad: GpuArray | null,
  loss: GpuArray,
  lseS: GpuArray,
  lseT: GpuArray,
  shape: KlRowsShape,
  gradRowScale?: GpuArray | null,
): void {
  const { rows, vocab, scale, reverse } = shape;
  const writes = [grad, loss, lseS, lseT].filter((a): a is GpuArray => a !== null);
  const [s, fs] = distinctFrom(rt, student, writes);
  const [t, ft] = distinctFrom(rt, teacher, writes);
  // The placeholder must not alias an output either: give absent outputs their own scratch.
  const gradArr = grad ?? rt.alloc("f32", 1);
  launchRows(rt, KL, {
    rows,
    operands: [
      { array: s, perRow: vocab },
      { array: t, perRow: 0 },
      { array: teacherRows ?? rt.dummy, perRow: 0 },
      { array: gradArr, perRow: grad ? vocab : 0 },
      { array: loss, perRow: 1 },
      { array: lseS, perRow: 1 },
      { array: lseT, perRow: 1 },
      { array: gradRowScale ?? rt.dummy, perRow: gradRowScale ? 1 : 0 },
    ],
    params: [vocab, scale, reverse ? 1 : 0, teacherRows ? 1 : 0, grad ? 1 : 0, gradRowScale ? 1 : 0],
    types: "ufuuuu",
    groups: rowGroups(rt),
  });
  if (!grad) rt.release(gradArr);
  fs();
  ft();
}

export { grid1d };

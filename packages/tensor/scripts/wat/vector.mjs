// Vector helpers shared by the GEMV path and attention: dot products and axpy over f32 or bf16
// (bf16 widened by `bits << 16`). Dot products keep two v128 accumulators so the adds of
// consecutive steps do not wait on each other.
import { add, forLoop, get, i32, mul, set } from "./dsl.mjs";

const hsum = (v) =>
  `(f32.add (f32.add (f32x4.extract_lane 0 ${v}) (f32x4.extract_lane 1 ${v})) (f32.add (f32x4.extract_lane 2 ${v}) (f32x4.extract_lane 3 ${v})))`;

/** (name, element bytes, v128 load of 4 elements at addr, scalar load at addr) per element type of y. */
const TYPES = [
  ["", 4, (addr, off = 0) => `(v128.load offset=${off * 4} ${addr})`, (addr) => `(f32.load ${addr})`],
  [
    "_bf16",
    2,
    (addr, off = 0) => `(i32x4.shl (v128.load16x4_u offset=${off * 2} ${addr}) (i32.const 16))`,
    (addr) => `(f32.reinterpret_i32 (i32.shl (i32.load16_u ${addr}) (i32.const 16)))`,
  ],
];

export function vectorWat() {
  const out = [];
  for (const [suffix, es, vload, sload] of TYPES) {
    out.push(`
(func $dot${suffix} (param $x i32) (param $y i32) (param $dim i32) (result f32)
  ;; Σ x[j]·y[j], x f32, y ${suffix ? "bf16" : "f32"}
  (local $j i32) (local $d8 i32) (local $d4 i32) (local $acc0 v128) (local $acc1 v128) (local $s f32)
  ${set("d8", `(i32.and ${get("dim")} (i32.const -8))`)}
  ${set("d4", `(i32.and ${get("dim")} (i32.const -4))`)}
  ${forLoop(
    "j",
    i32(0),
    get("d8"),
    i32(8),
    `(local.set $acc0 (f32x4.add (local.get $acc0) (f32x4.mul (v128.load ${add(get("x"), mul(get("j"), i32(4)))}) ${vload(add(get("y"), mul(get("j"), i32(es))))})))
    (local.set $acc1 (f32x4.add (local.get $acc1) (f32x4.mul (v128.load offset=16 ${add(get("x"), mul(get("j"), i32(4)))}) ${vload(add(get("y"), mul(get("j"), i32(es))), 4)})))`,
  )}
  ${forLoop("j", get("d8"), get("d4"), i32(4), `(local.set $acc0 (f32x4.add (local.get $acc0) (f32x4.mul (v128.load ${add(get("x"), mul(get("j"), i32(4)))}) ${vload(add(get("y"), mul(get("j"), i32(es))))})))`)}
  ${set("s", hsum("(f32x4.add (local.get $acc0) (local.get $acc1))"))}
  ${forLoop("j", get("d4"), get("dim"), i32(1), `(local.set $s (f32.add (local.get $s) (f32.mul (f32.load ${add(get("x"), mul(get("j"), i32(4)))}) ${sload(add(get("y"), mul(get("j"), i32(es))))})))`)}
  (local.get $s))
(func $axpy${suffix} (param $y i32) (param $x i32) (param $alpha f32) (param $dim i32)
  ;; y[j] += alpha·x[j], y f32, x ${suffix ? "bf16" : "f32"}
  (local $j i32) (local $d4 i32) (local $av v128) (local $p i32)
  ${set("d4", `(i32.and ${get("dim")} (i32.const -4))`)}
  ${set("av", "(f32x4.splat (local.get $alpha))")}
  ${forLoop("j", i32(0), get("d4"), i32(4), `${set("p", add(get("y"), mul(get("j"), i32(4))))} (v128.store (local.get $p) (f32x4.add (v128.load (local.get $p)) (f32x4.mul (local.get $av) ${vload(add(get("x"), mul(get("j"), i32(es))))})))`)}
  ${forLoop("j", get("d4"), get("dim"), i32(1), `${set("p", add(get("y"), mul(get("j"), i32(4))))} (f32.store (local.get $p) (f32.add (f32.load (local.get $p)) (f32.mul (local.get $alpha) ${sload(add(get("x"), mul(get("j"), i32(es))))})))`)})`);
    out.push(dot4(suffix, es, vload, sload));
  }
  return out.join("\n");
}

/**
 * Four dot products at once, x·y_r for the rows y_r = y + r·stride (bytes), r < 4, written to dst[0..3]
 * (added to what is there when `acc`). Each row's sum is formed exactly as `$dot` forms it (two v128
 * accumulators over blocks of 8, the 4-wide tail into the first, lanes summed, then the scalar tail), so
 * results are bit-identical to four `$dot` calls; but each x vector is loaded once for four rows and the
 * eight accumulator chains are independent, which is what a decode step's matrix-vector products are
 * bound by (docs/ARCHITECTURE.md §Kernels).
 */
function dot4(suffix, es, vload, sload) {
  const R = [0, 1, 2, 3];
  const row = (r) => `(local.get $y${r})`;
  const xAt = (off = 0) => `(v128.load offset=${off * 4} ${add(get("x"), mul(get("j"), i32(4)))})`;
  const yAt = (r, off = 0) => vload(add(row(r), mul(get("j"), i32(es))), off);
  const step8 = R.map(
    (r) => `(local.set $a${r} (f32x4.add (local.get $a${r}) (f32x4.mul (local.get $xv0) ${yAt(r)})))
    (local.set $b${r} (f32x4.add (local.get $b${r}) (f32x4.mul (local.get $xv1) ${yAt(r, 4)})))`,
  ).join("\n    ");
  const step4 = R.map(
    (r) => `(local.set $a${r} (f32x4.add (local.get $a${r}) (f32x4.mul (local.get $xv0) ${yAt(r)})))`,
  ).join("\n    ");
  const tail = R.map(
    (r) =>
      `(local.set $s${r} (f32.add (local.get $s${r}) (f32.mul (f32.load ${add(get("x"), mul(get("j"), i32(4)))}) ${sload(add(row(r), mul(get("j"), i32(es))))})))`,
  ).join("\n    ");
  const store = R.map(
    (r) => `(f32.store offset=${r * 4} (local.get $dst) (if (result f32) (local.get $acc)
      (then (f32.add (f32.load offset=${r * 4} (local.get $dst)) (local.get $s${r}))) (else (local.get $s${r}))))`,
  ).join("\n  ");
  return `
(func $dot4${suffix} (param $x i32) (param $y i32) (param $stride i32) (param $dim i32) (param $dst i32) (param $acc i32)
  ;; dst[r] (+)= Σ x[j]·y_r[j] for r < 4, x f32, y ${suffix ? "bf16" : "f32"} rows \`stride\` bytes apart
  (local $j i32) (local $d8 i32) (local $d4 i32) (local $xv0 v128) (local $xv1 v128)
  ${R.map((r) => `(local $y${r} i32) (local $a${r} v128) (local $b${r} v128) (local $s${r} f32)`).join(" ")}
  ${R.map((r) => set(`y${r}`, r === 0 ? get("y") : add(get("y"), mul(get("stride"), i32(r))))).join(" ")}
  ${set("d8", `(i32.and ${get("dim")} (i32.const -8))`)}
  ${set("d4", `(i32.and ${get("dim")} (i32.const -4))`)}
  ${forLoop(
    "j",
    i32(0),
    get("d8"),
    i32(8),
    `(local.set $xv0 ${xAt()})
    (local.set $xv1 ${xAt(4)})
    ${step8}`,
  )}
  ${forLoop(
    "j",
    get("d8"),
    get("d4"),
    i32(4),
    `(local.set $xv0 ${xAt()})
    ${step4}`,
  )}
  ${R.map((r) => set(`s${r}`, hsum(`(f32x4.add (local.get $a${r}) (local.get $b${r}))`))).join("\n  ")}
  ${forLoop("j", get("d4"), get("dim"), i32(1), tail)}
  ${store})`;
}

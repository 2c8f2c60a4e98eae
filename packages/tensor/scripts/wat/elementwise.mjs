// Memory-bound helpers on resident arrays: zero fill (memory.fill: a byte-wise Uint8Array fill on a
// SharedArrayBuffer runs at ~2 GB/s in V8, memory.fill at memset speed), the contiguous/row-broadcast
// binary arithmetic of the `binary` kernel, the strided copy of the `copy` kernel (rank ≤ 4 after
// merging dims; contiguous runs with memory.copy) and bf16 ↔ f32 conversion (round to nearest even,
// NaN kept quiet, exactly dtype.ts's f32ToBf16Bits).
import { add, forLoop, get, i32, mul, set } from "./dsl.mjs";

/** Binary op codes of `binary2d` (in this order). add/sub/mul/div are IEEE single ops on both sides. */
export const BINARY_OPS = ["add", "sub", "mul", "div"];

const VOPS = ["f32x4.add", "f32x4.sub", "f32x4.mul", "f32x4.div"];
const SOPS = ["f32.add", "f32.sub", "f32.mul", "f32.div"];
const at4 = (base, j) => add(get(base), mul(get(j), i32(4)));

/** One inner loop of binary2d for op `o` and inner strides (as, bs) ∈ {0, 1}². */
function binaryInner(o, as, bs) {
  const va = as ? `(v128.load ${at4("pa", "j")})` : "(local.get $sa)";
  const vb = bs ? `(v128.load ${at4("pb", "j")})` : "(local.get $sb)";
  const sa = as ? `(f32.load ${at4("pa", "j")})` : "(f32x4.extract_lane 0 (local.get $sa))";
  const sb = bs ? `(f32.load ${at4("pb", "j")})` : "(f32x4.extract_lane 0 (local.get $sb))";
  return `${forLoop("j", i32(0), get("v4"), i32(4), `(v128.store ${at4("po", "j")} (${VOPS[o]} ${va} ${vb}))`)}
    ${forLoop("j", get("v4"), get("inner"), i32(1), `(f32.store ${at4("po", "j")} (${SOPS[o]} ${sa} ${sb}))`)}`;
}

export function elementwiseWat() {
  // Dispatch on (op, as, bs) once per row: 4 ops × 4 stride patterns.
  const cases = [];
  for (let o = 0; o < 4; o++)
    for (let as = 0; as < 2; as++)
      for (let bs = 0; bs < 2; bs++)
        cases.push(
          `(if (i32.eq (local.get $sel) (i32.const ${o * 4 + as * 2 + bs})) (then ${binaryInner(o, as, bs)}))`,
        );
  return `
(func (export "zero_fill") (param $ptr i32) (param $bytes i32)
  (memory.fill (local.get $ptr) (i32.const 0) (local.get $bytes)))
(func (export "binary2d") (param $op i32) (param $a i32) (param $b i32) (param $out i32) (param $outer i32) (param $inner i32)
  (param $aso i32) (param $asi i32) (param $bso i32) (param $bsi i32) (param $r0 i32) (param $r1 i32)
  ;; out[r·inner + j] = a[r·aso + j·asi] ∘ b[r·bso + j·bsi] for rows [r0, r1); asi, bsi ∈ {0, 1}
  (local $r i32) (local $j i32) (local $v4 i32) (local $pa i32) (local $pb i32) (local $po i32) (local $sel i32)
  (local $sa v128) (local $sb v128)
  ${set("v4", `(i32.and ${get("inner")} (i32.const -4))`)}
  ${set("sel", `(i32.add (i32.mul ${get("op")} (i32.const 4)) (i32.add (i32.mul ${get("asi")} (i32.const 2)) ${get("bsi")}))`)}
  ${forLoop(
    "r",
    get("r0"),
    get("r1"),
    i32(1),
    `${set("pa", add(get("a"), mul(mul(get("r"), get("aso")), i32(4))))}
    ${set("pb", add(get("b"), mul(mul(get("r"), get("bso")), i32(4))))}
    ${set("po", add(get("out"), mul(mul(get("r"), get("inner")), i32(4))))}
    ${set("sa", "(f32x4.splat (f32.load (local.get $pa)))")}
    ${set("sb", "(f32x4.splat (f32.load (local.get $pb)))")}
    ${cases.join("\n    ")}`,
  )})
(func (export "copy4d") (param $src i32) (param $dst i32) (param $es i32)
  (param $n0 i32) (param $n1 i32) (param $n2 i32) (param $n3 i32)
  (param $s0 i32) (param $s1 i32) (param $s2 i32) (param $s3 i32)
  (param $d0 i32) (param $d1 i32) (param $d2 i32) (param $d3 i32)
  ;; dst[Σ i·d] = src[Σ i·s] over [n0][n1][n2][n3] (addresses in bytes: strides already times es; es 4 or 2)
  (local $i0 i32) (local $i1 i32) (local $i2 i32) (local $i3 i32) (local $ps i32) (local $pd i32) (local $run i32)
  ${set("run", `(i32.and (i32.eq ${get("s3")} ${get("es")}) (i32.eq ${get("d3")} ${get("es")}))`)}
  ${forLoop(
    "i0",
    i32(0),
    get("n0"),
    i32(1),
    forLoop(
      "i1",
      i32(0),
      get("n1"),
      i32(1),
      forLoop(
        "i2",
        i32(0),
        get("n2"),
        i32(1),
        `${set("ps", add(get("src"), add(mul(get("i0"), get("s0")), add(mul(get("i1"), get("s1")), mul(get("i2"), get("s2"))))))}
        ${set("pd", add(get("dst"), add(mul(get("i0"), get("d0")), add(mul(get("i1"), get("d1")), mul(get("i2"), get("d2"))))))}
        (if (local.get $run)
          (then (memory.copy (local.get $pd) (local.get $ps) (i32.mul (local.get $n3) (local.get $es))))
          (else (if (i32.eq (local.get $es) (i32.const 4))
            (then ${forLoop("i3", i32(0), get("n3"), i32(1), `(i32.store ${add(get("pd"), mul(get("i3"), get("d3")))} (i32.load ${add(get("ps"), mul(get("i3"), get("s3")))}))`)})
            (else ${forLoop("i3", i32(0), get("n3"), i32(1), `(i32.store16 ${add(get("pd"), mul(get("i3"), get("d3")))} (i32.load16_u ${add(get("ps"), mul(get("i3"), get("s3")))}))`)}))))`,
      ),
    ),
  )})
(func (export "bf16_widen") (param $src i32) (param $dst i32) (param $i0 i32) (param $i1 i32)
  ;; dst[i] = f32(bits src[i] << 16)
  (local $j i32) (local $v8 i32) (local $w v128)
  ${set("v8", `(i32.add ${get("i0")} (i32.and (i32.sub ${get("i1")} ${get("i0")}) (i32.const -8)))`)}
  ${forLoop(
    "j",
    get("i0"),
    get("v8"),
    i32(8),
    `${set("w", `(v128.load ${add(get("src"), mul(get("j"), i32(2)))})`)}
    (v128.store ${at4("dst", "j")} (i32x4.shl (i32x4.extend_low_i16x8_u (local.get $w)) (i32.const 16)))
    (v128.store offset=16 ${at4("dst", "j")} (i32x4.shl (i32x4.extend_high_i16x8_u (local.get $w)) (i32.const 16)))`,
  )}
  ${forLoop("j", get("v8"), get("i1"), i32(1), `(i32.store ${at4("dst", "j")} (i32.shl (i32.load16_u ${add(get("src"), mul(get("j"), i32(2)))}) (i32.const 16)))`)})
(func (export "bf16_round") (param $src i32) (param $dst i32) (param $i0 i32) (param $i1 i32)
  ;; dst[i] = bf16 bits of src[i], round to nearest even; NaN → (bits >> 16) | 0x40
  (local $j i32) (local $v8 i32) (local $lo v128) (local $hi v128) (local $u i32)
  ${set("v8", `(i32.add ${get("i0")} (i32.and (i32.sub ${get("i1")} ${get("i0")}) (i32.const -8)))`)}
  ${forLoop(
    "j",
    get("i0"),
    get("v8"),
    i32(8),
    `${set("lo", bf16Round4(`(v128.load ${at4("src", "j")})`))}
    ${set("hi", bf16Round4(`(v128.load offset=16 ${at4("src", "j")})`))}
    (v128.store ${add(get("dst"), mul(get("j"), i32(2)))} (i16x8.narrow_i32x4_u (local.get $lo) (local.get $hi)))`,
  )}
  ${forLoop(
    "j",
    get("v8"),
    get("i1"),
    i32(1),
    `${set("u", `(i32.load ${at4("src", "j")})`)}
    (i32.store16 ${add(get("dst"), mul(get("j"), i32(2)))}
      (select
        (i32.or (i32.shr_u (local.get $u) (i32.const 16)) (i32.const 64))
        (i32.shr_u (i32.add (local.get $u) (i32.add (i32.const 32767) (i32.and (i32.shr_u (local.get $u) (i32.const 16)) (i32.const 1)))) (i32.const 16))
        (i32.gt_u (i32.and (local.get $u) (i32.const 2147483647)) (i32.const 2139095040))))`,
  )})`;
}

/** Four f32 → bf16 bits (in the low 16 bits of each i32 lane, ≤ 0xffff so narrow_u keeps them). */
function bf16Round4(v) {
  // rounded = (u + 0x7fff + ((u >> 16) & 1)) >> 16; nan = (u >> 16) | 0x40 where |u| > 0x7f800000
  return `(block (result v128)
      (local.set $hi ${v})
      (v128.bitselect
        (v128.or (i32x4.shr_u (local.get $hi) (i32.const 16)) (i32x4.splat (i32.const 64)))
        (i32x4.shr_u (i32x4.add (local.get $hi) (i32x4.add (i32x4.splat (i32.const 32767))
          (v128.and (i32x4.shr_u (local.get $hi) (i32.const 16)) (i32x4.splat (i32.const 1))))) (i32.const 16))
        (i32x4.gt_s (v128.and (local.get $hi) (i32x4.splat (i32.const 2147483647))) (i32x4.splat (i32.const 2139095040)))))`;
}

// RMSNorm rows: y = x · rstd · (w or 1 + w), rstd = 1 / sqrt(mean(x²) + eps)
// (Zhang & Sennrich 2019; the "1 + w" zero-centred weight is Gemma/Qwen3.5's variant).
import { add, forLoop, get, i32, mul, set } from "./dsl.mjs";

export function rmsNormWat() {
  return `
(func (export "rmsnorm") (param $x i32) (param $w i32) (param $out i32) (param $rstd i32) (param $dim i32)
  (param $eps f32) (param $zc i32) (param $row0 i32) (param $row1 i32)
  (local $row i32) (local $xr i32) (local $or i32) (local $j i32) (local $d4 i32) (local $acc v128) (local $s f32)
  (local $r f32) (local $rv v128) (local $off v128) (local $v f32)
  ${set("d4", `(i32.and ${get("dim")} (i32.const -4))`)}
  ${set("off", `(f32x4.splat (select (f32.const 1) (f32.const 0) ${get("zc")}))`)}
  ${forLoop(
    "row",
    get("row0"),
    get("row1"),
    i32(1),
    `${set("xr", add(get("x"), mul(mul(get("row"), get("dim")), i32(4))))}
    ${set("or", add(get("out"), mul(mul(get("row"), get("dim")), i32(4))))}
    ${set("acc", "(v128.const i32x4 0 0 0 0)")}
    ${forLoop("j", i32(0), get("d4"), i32(4), `(local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (local.tee $rv (v128.load ${add(get("xr"), mul(get("j"), i32(4)))})) (local.get $rv))))`)}
    ${set("s", "(f32.add (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc))) (f32.add (f32x4.extract_lane 2 (local.get $acc)) (f32x4.extract_lane 3 (local.get $acc))))")}
    ${forLoop("j", get("d4"), get("dim"), i32(1), `(local.set $v (f32.load ${add(get("xr"), mul(get("j"), i32(4)))})) (local.set $s (f32.add (local.get $s) (f32.mul (local.get $v) (local.get $v))))`)}
    ${set("r", "(f32.div (f32.const 1) (f32.sqrt (f32.add (f32.div (local.get $s) (f32.convert_i32_u (local.get $dim))) (local.get $eps))))")}
    (f32.store ${add(get("rstd"), mul(get("row"), i32(4)))} (local.get $r))
    ${set("rv", "(f32x4.splat (local.get $r))")}
    ${forLoop(
      "j",
      i32(0),
      get("d4"),
      i32(4),
      `(v128.store ${add(get("or"), mul(get("j"), i32(4)))}
        (f32x4.mul (f32x4.mul (v128.load ${add(get("xr"), mul(get("j"), i32(4)))}) (local.get $rv))
          (f32x4.add (v128.load ${add(get("w"), mul(get("j"), i32(4)))}) (local.get $off))))`,
    )}
    ${forLoop(
      "j",
      get("d4"),
      get("dim"),
      i32(1),
      `(f32.store ${add(get("or"), mul(get("j"), i32(4)))}
        (f32.mul (f32.mul (f32.load ${add(get("xr"), mul(get("j"), i32(4)))}) (local.get $r))
          (f32.add (f32.load ${add(get("w"), mul(get("j"), i32(4)))}) (f32x4.extract_lane 0 (local.get $off)))))`,
    )}`,
  )})`;
}

// RMSNorm backward rows: with x̂ = x·rstd and w' = w (or 1 + w),
//   dx = rstd·(g·w' − x̂·mean(g·w'·x̂)),   dw += g·x̂ (into this thread's partial row when hasDw).
// mean(g·w'·x̂) = rstd·Σ g·w'·x / dim, so the first pass needs no x̂ for the sum.
export function rmsNormBackwardWat() {
  const at = (base, j) => add(get(base), mul(get(j), i32(4)));
  return `
(func (export "rmsnorm_bwd") (param $x i32) (param $w i32) (param $rstd i32) (param $g i32) (param $dx i32)
  (param $dw i32) (param $dim i32) (param $zc i32) (param $hasDw i32) (param $row0 i32) (param $row1 i32)
  (local $row i32) (local $xr i32) (local $gr i32) (local $dr i32) (local $j i32) (local $d4 i32)
  (local $acc v128) (local $off v128) (local $sv v128) (local $xv v128) (local $gv v128) (local $mv v128)
  (local $s f32) (local $dot f32) (local $m f32) (local $xs f32) (local $gs f32) (local $offs f32)
  ${set("d4", `(i32.and ${get("dim")} (i32.const -4))`)}
  ${set("offs", `(select (f32.const 1) (f32.const 0) ${get("zc")})`)}
  ${set("off", "(f32x4.splat (local.get $offs))")}
  ${forLoop(
    "row",
    get("row0"),
    get("row1"),
    i32(1),
    `${set("xr", add(get("x"), mul(mul(get("row"), get("dim")), i32(4))))}
    ${set("gr", add(get("g"), mul(mul(get("row"), get("dim")), i32(4))))}
    ${set("dr", add(get("dx"), mul(mul(get("row"), get("dim")), i32(4))))}
    ${set("s", `(f32.load ${add(get("rstd"), mul(get("row"), i32(4)))})`)}
    ${set("sv", "(f32x4.splat (local.get $s))")}
    ${set("acc", "(v128.const i32x4 0 0 0 0)")}
    ${forLoop(
      "j",
      i32(0),
      get("d4"),
      i32(4),
      `${set("xv", `(v128.load ${at("xr", "j")})`)}
      ${set("gv", `(v128.load ${at("gr", "j")})`)}
      ${set("acc", `(f32x4.add (local.get $acc) (f32x4.mul (f32x4.mul (local.get $gv) (f32x4.add (v128.load ${at("w", "j")}) (local.get $off))) (local.get $xv)))`)}
      (if (local.get $hasDw) (then
        (v128.store ${at("dw", "j")} (f32x4.add (v128.load ${at("dw", "j")}) (f32x4.mul (local.get $gv) (f32x4.mul (local.get $xv) (local.get $sv)))))))`,
    )}
    ${set("dot", "(f32.add (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc))) (f32.add (f32x4.extract_lane 2 (local.get $acc)) (f32x4.extract_lane 3 (local.get $acc))))")}
    ${forLoop(
      "j",
      get("d4"),
      get("dim"),
      i32(1),
      `${set("xs", `(f32.load ${at("xr", "j")})`)}
      ${set("gs", `(f32.load ${at("gr", "j")})`)}
      ${set("dot", `(f32.add (local.get $dot) (f32.mul (f32.mul (local.get $gs) (f32.add (f32.load ${at("w", "j")}) (local.get $offs))) (local.get $xs)))`)}
      (if (local.get $hasDw) (then
        (f32.store ${at("dw", "j")} (f32.add (f32.load ${at("dw", "j")}) (f32.mul (local.get $gs) (f32.mul (local.get $xs) (local.get $s)))))))`,
    )}
    ;; dx = rstd·g·w' − x·m with m = rstd² · mean(g·w'·x̂) = rstd³ · Σ g·w'·x / dim
    ${set("m", "(f32.div (f32.mul (f32.mul (f32.mul (local.get $dot) (local.get $s)) (local.get $s)) (local.get $s)) (f32.convert_i32_u (local.get $dim)))")}
    ${set("mv", "(f32x4.splat (local.get $m))")}
    ${forLoop(
      "j",
      i32(0),
      get("d4"),
      i32(4),
      `(v128.store ${at("dr", "j")} (f32x4.sub
        (f32x4.mul (local.get $sv) (f32x4.mul (v128.load ${at("gr", "j")}) (f32x4.add (v128.load ${at("w", "j")}) (local.get $off))))
        (f32x4.mul (v128.load ${at("xr", "j")}) (local.get $mv))))`,
    )}
    ${forLoop(
      "j",
      get("d4"),
      get("dim"),
      i32(1),
      `(f32.store ${at("dr", "j")} (f32.sub
        (f32.mul (local.get $s) (f32.mul (f32.load ${at("gr", "j")}) (f32.add (f32.load ${at("w", "j")}) (local.get $offs))))
        (f32.mul (f32.load ${at("xr", "j")}) (local.get $m))))`,
    )}`,
  )})`;
}

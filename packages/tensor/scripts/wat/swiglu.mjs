// SwiGLU over an element range [i0, i1): out = silu(g)·u with s = σ(g) saved for the backward,
// and the backward dg = dout·u·s·(1 + g·(1 − s)), du = dout·g·s (Shazeer 2020, "GLU Variants").
// σ uses $vexp, so one exp per element on four lanes; the tail past the last full vector is scalar.
import { add, forLoop, get, i32, mul, set } from "./dsl.mjs";
import { VEXP_LOOP_LOCALS, vexpLoop } from "./vexp.mjs";

const ONE4 = "(f32x4.splat (f32.const 1))";
const at = (base, j) => add(get(base), mul(get(j), i32(4)));

export function swigluWat() {
  return `
(func (export "swiglu_fwd") (param $g i32) (param $u i32) (param $out i32) (param $sig i32) (param $i0 i32) (param $i1 i32)
  (local $j i32) (local $v4 i32) (local $gv v128) (local $sv v128) (local $gs f32) (local $ss f32) ${VEXP_LOOP_LOCALS}
  ${set("v4", `(i32.add ${get("i0")} (i32.and (i32.sub ${get("i1")} ${get("i0")}) (i32.const -4)))`)}
  ${vexpLoop(
    "j",
    get("i0"),
    get("v4"),
    (o) => `(f32x4.neg (v128.load offset=${o} ${at("g", "j")}))`,
    (e, o) => `${set("gv", `(v128.load offset=${o} ${at("g", "j")})`)}
    ${set("sv", `(f32x4.div ${ONE4} (f32x4.add ${ONE4} ${e}))`)}
    (v128.store offset=${o} ${at("sig", "j")} (local.get $sv))
    (v128.store offset=${o} ${at("out", "j")} (f32x4.mul (f32x4.mul (local.get $gv) (local.get $sv)) (v128.load offset=${o} ${at("u", "j")})))`,
  )}
  ${forLoop(
    "j",
    get("v4"),
    get("i1"),
    i32(1),
    `${set("gs", `(f32.load ${at("g", "j")})`)}
    ${set("ss", "(f32.div (f32.const 1) (f32.add (f32.const 1) (call $exp1 (f32.neg (local.get $gs)))))")}
    (f32.store ${at("sig", "j")} (local.get $ss))
    (f32.store ${at("out", "j")} (f32.mul (f32.mul (local.get $gs) (local.get $ss)) (f32.load ${at("u", "j")})))`,
  )})
(func (export "swiglu_bwd") (param $g i32) (param $u i32) (param $sig i32) (param $dout i32) (param $dg i32) (param $du i32)
  (param $i0 i32) (param $i1 i32)
  (local $j i32) (local $v4 i32) (local $gv v128) (local $sv v128) (local $dv v128) (local $gs f32) (local $ss f32) (local $ds f32)
  ${set("v4", `(i32.add ${get("i0")} (i32.and (i32.sub ${get("i1")} ${get("i0")}) (i32.const -4)))`)}
  ${forLoop(
    "j",
    get("i0"),
    get("v4"),
    i32(4),
    `${set("gv", `(v128.load ${at("g", "j")})`)}
    ${set("sv", `(v128.load ${at("sig", "j")})`)}
    ${set("dv", `(v128.load ${at("dout", "j")})`)}
    (v128.store ${at("du", "j")} (f32x4.mul (local.get $dv) (f32x4.mul (local.get $gv) (local.get $sv))))
    (v128.store ${at("dg", "j")} (f32x4.mul (f32x4.mul (local.get $dv) (v128.load ${at("u", "j")}))
      (f32x4.mul (local.get $sv) (f32x4.add ${ONE4} (f32x4.mul (local.get $gv) (f32x4.sub ${ONE4} (local.get $sv)))))))`,
  )}
  ${forLoop(
    "j",
    get("v4"),
    get("i1"),
    i32(1),
    `${set("gs", `(f32.load ${at("g", "j")})`)}
    ${set("ss", `(f32.load ${at("sig", "j")})`)}
    ${set("ds", `(f32.load ${at("dout", "j")})`)}
    (f32.store ${at("du", "j")} (f32.mul (local.get $ds) (f32.mul (local.get $gs) (local.get $ss))))
    (f32.store ${at("dg", "j")} (f32.mul (f32.mul (local.get $ds) (f32.load ${at("u", "j")}))
      (f32.mul (local.get $ss) (f32.add (f32.const 1) (f32.mul (local.get $gs) (f32.sub (f32.const 1) (local.get $ss)))))))`,
  )})`;
}

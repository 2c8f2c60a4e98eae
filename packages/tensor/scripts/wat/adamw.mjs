// AdamW update over an element range [i0, i1), exactly torch.optim.AdamW's single-tensor step in f32:
// p ← p·(1 − lr·wd); m ← m + (g − m)(1 − β1); v ← β2·v + (1 − β2)·g²; p ← p − (lr/bc1)·m / (√v/√bc2 + eps).
import { add, forLoop, get, i32, mul, set } from "./dsl.mjs";

const at = (base, j) => add(get(base), mul(get(j), i32(4)));
const splat = (n) => `(f32x4.splat (local.get $${n}))`;

export function adamwWat() {
  const body = (L, S, F) => `${set("gv", L("g"))}
    ${set("mv", `(${F}.add ${L("m")} (${F}.mul (${F}.sub (local.get $gv) ${L("m")}) ${S("omb1")}))`)}
    ${set("vv", `(${F}.add (${F}.mul ${L("v")} ${S("b2")}) (${F}.mul ${S("omb2")} (${F}.mul (local.get $gv) (local.get $gv))))`)}
    ${S.store("m", "(local.get $mv)")}
    ${S.store("v", "(local.get $vv)")}
    ${S.store(
      "p",
      `(${F}.sub (${F}.mul ${L("p")} ${S("decay")})
        (${F}.div (${F}.mul ${S("step")} (local.get $mv)) (${F}.add (${F}.div (${F}.sqrt (local.get $vv)) ${S("bc2s")}) ${S("eps")})))`,
    )}`;
  const vL = (b) => `(v128.load ${at(b, "j")})`;
  const vS = Object.assign((n) => splat(n), { store: (b, x) => `(v128.store ${at(b, "j")} ${x})` });
  const sL = (b) => `(f32.load ${at(b, "j")})`;
  const sS = Object.assign((n) => `(local.get $${n})`, { store: (b, x) => `(f32.store ${at(b, "j")} ${x})` });
  return `
(func (export "adamw") (param $p i32) (param $g i32) (param $m i32) (param $v i32) (param $i0 i32) (param $i1 i32)
  (param $b1 f32) (param $b2 f32) (param $eps f32) (param $step f32) (param $bc2s f32) (param $decay f32)
  (local $j i32) (local $v4 i32) (local $omb1 f32) (local $omb2 f32)
  (local $gv v128) (local $mv v128) (local $vv v128) (local $gs f32) (local $ms f32) (local $vs f32)
  ${set("omb1", "(f32.sub (f32.const 1) (local.get $b1))")}
  ${set("omb2", "(f32.sub (f32.const 1) (local.get $b2))")}
  ${set("v4", `(i32.add ${get("i0")} (i32.and (i32.sub ${get("i1")} ${get("i0")}) (i32.const -4)))`)}
  ${forLoop("j", get("i0"), get("v4"), i32(4), body(vL, vS, "f32x4"))}
  ${forLoop(
    "j",
    get("v4"),
    get("i1"),
    i32(1),
    body(sL, sS, "f32").replaceAll("$gv", "$gs").replaceAll("$mv", "$ms").replaceAll("$vv", "$vs"),
  )})`;
}

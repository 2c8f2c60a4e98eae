// Fused scaled-dot-product attention, one query row at a time (no T x T matrix is materialised):
//   forward   s_j = scale·q_i·k_j (j ≤ i + tk − tq when causal), p = softmax(s), o_i = Σ_j p_j v_j,
//             lse_i = log Σ_j exp(s_j) saved for the backward;
//   backward  p_j = exp(s_j − lse_i), D_i = do_i·o_i, dp_j = do_i·v_j, ds_j = p_j (dp_j − D_i),
//             dq_i = scale Σ_j ds_j k_j, dk_j += scale ds_j q_i, dv_j += p_j do_i
// (the FlashAttention-2 backward identities, Dao 2023, §2.2 / Alg. 2, done row by row).
// Grouped-query attention: query head h reads kv head h / (heads / kvHeads). Layouts are
// q/o/do/dq [B][H][tq][dim], k/v/dk/dv [B][KVH][tk][dim], lse [B][H][tq].
// Forward work units are (b, h) query heads; backward units are (b, kvh) kv heads, so the dk/dv
// sums of one kv head stay on one thread.
import { add, forLoop, get, i32, mul, set, sub } from "./dsl.mjs";

const hsum = (v) =>
  `(f32.add (f32.add (f32x4.extract_lane 0 ${v}) (f32x4.extract_lane 1 ${v})) (f32.add (f32x4.extract_lane 2 ${v}) (f32x4.extract_lane 3 ${v})))`;

function helpers() {
  return `
(func $dot (param $x i32) (param $y i32) (param $dim i32) (result f32)
  (local $j i32) (local $d4 i32) (local $acc v128) (local $s f32)
  ${set("d4", `(i32.and ${get("dim")} (i32.const -4))`)}
  ${forLoop("j", i32(0), get("d4"), i32(4), `(local.set $acc (f32x4.add (local.get $acc) (f32x4.mul (v128.load ${add(get("x"), mul(get("j"), i32(4)))}) (v128.load ${add(get("y"), mul(get("j"), i32(4)))}))))`)}
  ${set("s", hsum(get("acc")))}
  ${forLoop("j", get("d4"), get("dim"), i32(1), `(local.set $s (f32.add (local.get $s) (f32.mul (f32.load ${add(get("x"), mul(get("j"), i32(4)))}) (f32.load ${add(get("y"), mul(get("j"), i32(4)))}))))`)}
  (local.get $s))
(func $axpy (param $y i32) (param $x i32) (param $alpha f32) (param $dim i32)
  (local $j i32) (local $d4 i32) (local $av v128) (local $p i32)
  ${set("d4", `(i32.and ${get("dim")} (i32.const -4))`)}
  ${set("av", "(f32x4.splat (local.get $alpha))")}
  ${forLoop("j", i32(0), get("d4"), i32(4), `${set("p", add(get("y"), mul(get("j"), i32(4))))} (v128.store (local.get $p) (f32x4.add (v128.load (local.get $p)) (f32x4.mul (local.get $av) (v128.load ${add(get("x"), mul(get("j"), i32(4)))}))))`)}
  ${forLoop("j", get("d4"), get("dim"), i32(1), `${set("p", add(get("y"), mul(get("j"), i32(4))))} (f32.store (local.get $p) (f32.add (f32.load (local.get $p)) (f32.mul (local.get $alpha) (f32.load ${add(get("x"), mul(get("j"), i32(4)))}))))`)})
(func $jmax (param $i i32) (param $tq i32) (param $tk i32) (param $causal i32) (result i32)
  (local $lim i32)
  (if (i32.eqz (local.get $causal)) (then (return (local.get $tk))))
  ;; keys visible to query i: j <= i + tk - tq (signed; the query block is aligned to the end of the keys)
  ${set("lim", add(get("i"), add(sub(get("tk"), get("tq")), i32(1))))}
  (select (i32.const 0) (select (local.get $tk) (local.get $lim) (i32.gt_s (local.get $lim) (local.get $tk)))
    (i32.lt_s (local.get $lim) (i32.const 0))))`;
}

function forward() {
  return `
(func (export "attn_fwd") (param $q i32) (param $k i32) (param $v i32) (param $out i32) (param $lse i32)
  (param $heads i32) (param $kvHeads i32) (param $tq i32) (param $tk i32) (param $dim i32) (param $causal i32)
  (param $scale f32) (param $s i32) (param $unit0 i32) (param $unit1 i32)
  (local $u i32) (local $b i32) (local $h i32) (local $kvh i32) (local $qh i32) (local $kh i32) (local $vh i32)
  (local $oh i32) (local $i i32) (local $j i32) (local $jm i32) (local $j4 i32) (local $qi i32) (local $oi i32)
  (local $mx f32) (local $x f32) (local $sum f32) (local $vm v128) (local $acc v128) (local $p i32) (local $rd i32)
  (local $group i32)
  ${set("rd", mul(get("dim"), i32(4)))}
  ${set("group", `(i32.div_u ${get("heads")} ${get("kvHeads")})`)}
  ${forLoop(
    "u",
    get("unit0"),
    get("unit1"),
    i32(1),
    `${set("b", `(i32.div_u ${get("u")} ${get("heads")})`)}
    ${set("h", sub(get("u"), mul(get("b"), get("heads"))))}
    ${set("kvh", add(mul(get("b"), get("kvHeads")), `(i32.div_u ${get("h")} ${get("group")})`))}
    ${set("qh", add(get("q"), mul(mul(get("u"), get("tq")), get("rd"))))}
    ${set("oh", add(get("out"), mul(mul(get("u"), get("tq")), get("rd"))))}
    ${set("kh", add(get("k"), mul(mul(get("kvh"), get("tk")), get("rd"))))}
    ${set("vh", add(get("v"), mul(mul(get("kvh"), get("tk")), get("rd"))))}
    ${forLoop(
      "i",
      i32(0),
      get("tq"),
      i32(1),
      `${set("qi", add(get("qh"), mul(get("i"), get("rd"))))}
      ${set("oi", add(get("oh"), mul(get("i"), get("rd"))))}
      (memory.fill (local.get $oi) (i32.const 0) (local.get $rd))
      ${set("jm", `(call $jmax ${get("i")} ${get("tq")} ${get("tk")} ${get("causal")})`)}
      ${set("mx", "(f32.const -inf)")}
      ${forLoop(
        "j",
        i32(0),
        get("jm"),
        i32(1),
        `${set("x", `(f32.mul (call $dot ${get("qi")} ${add(get("kh"), mul(get("j"), get("rd")))} ${get("dim")}) (local.get $scale))`)}
        (f32.store ${add(get("s"), mul(get("j"), i32(4)))} (local.get $x))
        ${set("mx", "(f32.max (local.get $mx) (local.get $x))")}`,
      )}
      ;; p_j = exp(s_j - max) in place, summed
      ${set("vm", "(f32x4.splat (local.get $mx))")}
      ${set("acc", "(v128.const i32x4 0 0 0 0)")}
      ${set("j4", `(i32.and ${get("jm")} (i32.const -4))`)}
      ${forLoop("j", i32(0), get("j4"), i32(4), `${set("p", add(get("s"), mul(get("j"), i32(4))))} (v128.store (local.get $p) (call $vexp (f32x4.sub (v128.load (local.get $p)) (local.get $vm)))) (local.set $acc (f32x4.add (local.get $acc) (v128.load (local.get $p))))`)}
      ${set("sum", hsum(get("acc")))}
      ${forLoop("j", get("j4"), get("jm"), i32(1), `${set("p", add(get("s"), mul(get("j"), i32(4))))} (f32.store (local.get $p) (call $exp1 (f32.sub (f32.load (local.get $p)) (local.get $mx)))) (local.set $sum (f32.add (local.get $sum) (f32.load (local.get $p))))`)}
      ${forLoop("j", i32(0), get("jm"), i32(1), `(call $axpy ${get("oi")} ${add(get("vh"), mul(get("j"), get("rd")))} (f32.div (f32.load ${add(get("s"), mul(get("j"), i32(4)))}) (local.get $sum)) ${get("dim")})`)}
      (f32.store ${add(get("lse"), mul(add(mul(get("u"), get("tq")), get("i")), i32(4)))}
        (if (result f32) (local.get $jm)
          (then (f32.add (local.get $mx) (f32.demote_f64 (call $log (f64.promote_f32 (local.get $sum))))))
          (else (f32.const -inf))))`,
    )}`,
  )})`;
}

function backward() {
  return `
(func (export "attn_bwd") (param $q i32) (param $k i32) (param $v i32) (param $out i32) (param $dout i32)
  (param $lse i32) (param $dq i32) (param $dk i32) (param $dv i32) (param $heads i32) (param $kvHeads i32)
  (param $tq i32) (param $tk i32) (param $dim i32) (param $causal i32) (param $scale f32) (param $unit0 i32)
  (param $unit1 i32)
  (local $u i32) (local $b i32) (local $g i32) (local $h i32) (local $hq i32) (local $group i32) (local $rd i32)
  (local $kh i32) (local $vh i32) (local $dkh i32) (local $dvh i32) (local $i i32) (local $j i32) (local $jm i32)
  (local $row i32) (local $qi i32) (local $oi i32) (local $doi i32) (local $dqi i32) (local $l f32) (local $dd f32)
  (local $p f32) (local $ds f32) (local $kj i32)
  ${set("rd", mul(get("dim"), i32(4)))}
  ${set("group", `(i32.div_u ${get("heads")} ${get("kvHeads")})`)}
  ${forLoop(
    "u",
    get("unit0"),
    get("unit1"),
    i32(1),
    `${set("b", `(i32.div_u ${get("u")} ${get("kvHeads")})`)}
    ${set("g", sub(get("u"), mul(get("b"), get("kvHeads"))))}
    ${set("kh", add(get("k"), mul(mul(get("u"), get("tk")), get("rd"))))}
    ${set("vh", add(get("v"), mul(mul(get("u"), get("tk")), get("rd"))))}
    ${set("dkh", add(get("dk"), mul(mul(get("u"), get("tk")), get("rd"))))}
    ${set("dvh", add(get("dv"), mul(mul(get("u"), get("tk")), get("rd"))))}
    (memory.fill (local.get $dkh) (i32.const 0) ${mul(get("tk"), get("rd"))})
    (memory.fill (local.get $dvh) (i32.const 0) ${mul(get("tk"), get("rd"))})
    ${forLoop(
      "h",
      i32(0),
      get("group"),
      i32(1),
      `${set("hq", add(mul(get("b"), get("heads")), add(mul(get("g"), get("group")), get("h"))))}
      ${forLoop(
        "i",
        i32(0),
        get("tq"),
        i32(1),
        `${set("row", add(mul(get("hq"), get("tq")), get("i")))}
        ${set("qi", add(get("q"), mul(get("row"), get("rd"))))}
        ${set("oi", add(get("out"), mul(get("row"), get("rd"))))}
        ${set("doi", add(get("dout"), mul(get("row"), get("rd"))))}
        ${set("dqi", add(get("dq"), mul(get("row"), get("rd"))))}
        (memory.fill (local.get $dqi) (i32.const 0) (local.get $rd))
        ${set("l", `(f32.load ${add(get("lse"), mul(get("row"), i32(4)))})`)}
        ${set("dd", `(call $dot ${get("doi")} ${get("oi")} ${get("dim")})`)}
        ${set("jm", `(call $jmax ${get("i")} ${get("tq")} ${get("tk")} ${get("causal")})`)}
        ${forLoop(
          "j",
          i32(0),
          get("jm"),
          i32(1),
          `${set("kj", add(get("kh"), mul(get("j"), get("rd"))))}
          ${set("p", `(call $exp1 (f32.sub (f32.mul (call $dot ${get("qi")} ${get("kj")} ${get("dim")}) (local.get $scale)) (local.get $l)))`)}
          ${set("ds", `(f32.mul (f32.mul (local.get $p) (f32.sub (call $dot ${get("doi")} ${add(get("vh"), mul(get("j"), get("rd")))} ${get("dim")}) (local.get $dd))) (local.get $scale))`)}
          (call $axpy ${get("dqi")} ${get("kj")} ${get("ds")} ${get("dim")})
          (call $axpy ${add(get("dkh"), mul(get("j"), get("rd")))} ${get("qi")} ${get("ds")} ${get("dim")})
          (call $axpy ${add(get("dvh"), mul(get("j"), get("rd")))} ${get("doi")} ${get("p")} ${get("dim")})`,
        )}`,
      )}`,
    )}`,
  )})`;
}

export function attentionWat() {
  return [helpers(), forward(), backward()].join("\n");
}

// Softmax pieces of attention whose products run elsewhere (the native backend's BLAS, see
// src/backends/attention-gemm.ts): per tile of score rows S [rows][end] (query rows i0.., keys 0..end),
//   attn_tile_softmax  S ← softmax(scale·S) over the visible keys (j < vis0 + r when causal), zeros past them,
//                      lse[r] = max + log Σ exp (−inf and a zero row when no key is visible);
//   attn_tile_probs    S ← exp(scale·S − lse[r]) over the visible keys, zeros past them (the backward's P);
//   attn_tile_dscores  dP ← P ⊙ (dP − rowsum(dO ⊙ O))·scale (FlashAttention-2's dS).
// The row helpers ($scaled_max, $scaled_exp_sum, $scale_row, $dot) are attention.mjs's and vector.mjs's.
import { add, forLoop, get, i32, mul, set, sub } from "./dsl.mjs";

const f32At = (base, idx) => add(base, mul(idx, i32(4)));
/** vis = clamp(vis0 + r, 0, end) */
const visible = `(local.set $vis (select (i32.const 0) (select (local.get $end) (i32.add (local.get $vis0) (local.get $r))
      (i32.gt_s (i32.add (local.get $vis0) (local.get $r)) (local.get $end))) (i32.lt_s (i32.add (local.get $vis0) (local.get $r)) (i32.const 0))))`;

export function attentionTilesWat() {
  return `
(func (export "attn_tile_softmax") (param $S i32) (param $rows i32) (param $end i32) (param $scale f32) (param $vis0 i32) (param $lse i32)
  (local $r i32) (local $row i32) (local $vis i32) (local $mx f32) (local $sum f32)
  ${forLoop(
    "r",
    i32(0),
    get("rows"),
    i32(1),
    `${set("row", add(get("S"), mul(mul(get("r"), get("end")), i32(4))))}
    ${visible}
    ${set("mx", "(call $scaled_max (local.get $row) (local.get $vis) (local.get $scale))")}
    (if (f32.eq (local.get $mx) (f32.const -inf))
      (then
        (memory.fill (local.get $row) (i32.const 0) ${mul(get("end"), i32(4))})
        (f32.store ${f32At(get("lse"), get("r"))} (f32.const -inf)))
      (else
        ${set("sum", "(call $scaled_exp_sum (local.get $row) (local.get $vis) (local.get $scale) (local.get $mx))")}
        (call $scale_row (local.get $row) (local.get $vis) (f32.div (f32.const 1) (local.get $sum)))
        (memory.fill ${f32At(get("row"), get("vis"))} (i32.const 0) ${mul(sub(get("end"), get("vis")), i32(4))})
        (f32.store ${f32At(get("lse"), get("r"))}
          (f32.add (local.get $mx) (f32.demote_f64 (call $log (f64.promote_f32 (local.get $sum))))))))`,
  )})
(func (export "attn_tile_probs") (param $S i32) (param $rows i32) (param $end i32) (param $scale f32) (param $vis0 i32) (param $lse i32)
  (local $r i32) (local $row i32) (local $vis i32) (local $l f32)
  ${forLoop(
    "r",
    i32(0),
    get("rows"),
    i32(1),
    `${set("row", add(get("S"), mul(mul(get("r"), get("end")), i32(4))))}
    ${visible}
    ${set("l", `(f32.load ${f32At(get("lse"), get("r"))})`)}
    (if (f32.eq (local.get $l) (f32.const -inf))
      (then (local.set $vis (i32.const 0)))
      (else
        (drop (call $scaled_exp_sum (local.get $row) (local.get $vis) (local.get $scale) (local.get $l)))))
    (memory.fill ${f32At(get("row"), get("vis"))} (i32.const 0) ${mul(sub(get("end"), get("vis")), i32(4))})`,
  )})
(func (export "attn_tile_dscores") (param $P i32) (param $dP i32) (param $dO i32) (param $O i32) (param $rows i32)
  (param $end i32) (param $d i32) (param $scale f32)
  (local $r i32) (local $j i32) (local $j4 i32) (local $D f32) (local $vD v128) (local $vs v128) (local $pp i32) (local $pd i32)
  ${set("j4", `(i32.and ${get("end")} (i32.const -4))`)}
  ${set("vs", "(f32x4.splat (local.get $scale))")}
  ${forLoop(
    "r",
    i32(0),
    get("rows"),
    i32(1),
    `${set("D", `(call $dot ${f32At(get("dO"), mul(get("r"), get("d")))} ${f32At(get("O"), mul(get("r"), get("d")))} (local.get $d))`)}
    ${set("vD", "(f32x4.splat (local.get $D))")}
    ${set("pp", f32At(get("P"), mul(get("r"), get("end"))))}
    ${set("pd", f32At(get("dP"), mul(get("r"), get("end"))))}
    ${forLoop(
      "j",
      i32(0),
      get("j4"),
      i32(4),
      `(v128.store ${f32At(get("pd"), get("j"))} (f32x4.mul (f32x4.mul (v128.load ${f32At(get("pp"), get("j"))})
        (f32x4.sub (v128.load ${f32At(get("pd"), get("j"))}) (local.get $vD))) (local.get $vs)))`,
    )}
    ${forLoop(
      "j",
      get("j4"),
      get("end"),
      i32(1),
      `(f32.store ${f32At(get("pd"), get("j"))} (f32.mul (f32.mul (f32.load ${f32At(get("pp"), get("j"))})
        (f32.sub (f32.load ${f32At(get("pd"), get("j"))}) (local.get $D))) (local.get $scale)))`,
    )}`,
  )})`;
}

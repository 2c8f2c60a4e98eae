// Row-wise softmax cross-entropy, the numerically stable way: lse = max + log Σ exp(x − max),
// loss = lse − x[target]; backward d = (exp(x − lse) − onehot) · g. Rows whose target equals the
// ignore index give loss 0 and gradient 0 (PyTorch's CrossEntropyLoss ignore_index semantics).
// log comes from the host (imported Math.log): one call per row. The row max uses pmax (one
// instruction; it may skip a NaN, but the exp pass then turns that NaN into a NaN sum).
import { add, forLoop, get, i32, mul, set } from "./dsl.mjs";
import { VEXP_LOOP_LOCALS, vexpLoop } from "./vexp.mjs";

/** Address of element j of the row at local `base`. */
const rowAt = (base) => add(get(base), mul(get("j"), i32(4)));

const rowMax = `
  ${set("vm", "(f32x4.splat (f32.const -inf))")}
  ${forLoop("j", i32(0), get("v4"), i32(4), `(local.set $vm (f32x4.pmax (local.get $vm) (v128.load ${add(get("lr"), mul(get("j"), i32(4)))})))`)}
  ${set("mx", "(f32.max (f32.max (f32x4.extract_lane 0 (local.get $vm)) (f32x4.extract_lane 1 (local.get $vm))) (f32.max (f32x4.extract_lane 2 (local.get $vm)) (f32x4.extract_lane 3 (local.get $vm))))")}
  ${forLoop("j", get("v4"), get("vocab"), i32(1), `(local.set $mx (f32.max (local.get $mx) (f32.load ${add(get("lr"), mul(get("j"), i32(4)))})))`)}`;

export function crossEntropyWat() {
  return `
(func (export "softmax_rows") (param $x i32) (param $lse i32) (param $scale i32) (param $hasScale i32) (param $vocab i32)
  (param $row0 i32) (param $row1 i32)
  (local $row i32) (local $lr i32) (local $j i32) (local $v4 i32) (local $vm v128) (local $mx f32) (local $acc v128)
  (local $s f32) (local $e1 f32) (local $inv v128) ${VEXP_LOOP_LOCALS}
  ;; In place: row ← exp(row − max) while summing, then row ← row · (scale[row] or 1) / sum. One exp
  ;; per element; a row (V floats) stays in cache across the three passes.
  ${set("v4", `(i32.and ${get("vocab")} (i32.const -4))`)}
  ${forLoop(
    "row",
    get("row0"),
    get("row1"),
    i32(1),
    `${set("lr", add(get("x"), mul(mul(get("row"), get("vocab")), i32(4))))}
    ${rowMax}
    ${set("vm", "(f32x4.splat (local.get $mx))")}
    ${set("acc", "(v128.const i32x4 0 0 0 0)")}
    ${vexpLoop(
      "j",
      i32(0),
      get("v4"),
      (o) => `(f32x4.sub (v128.load offset=${o} ${rowAt("lr")}) (local.get $vm))`,
      (e, o) => `(v128.store offset=${o} ${rowAt("lr")} ${e}) (local.set $acc (f32x4.add (local.get $acc) ${e}))`,
    )}
    ${set("s", "(f32.add (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc))) (f32.add (f32x4.extract_lane 2 (local.get $acc)) (f32x4.extract_lane 3 (local.get $acc))))")}
    ${forLoop(
      "j",
      get("v4"),
      get("vocab"),
      i32(1),
      `(local.set $e1 (call $exp1 (f32.sub (f32.load ${add(get("lr"), mul(get("j"), i32(4)))}) (local.get $mx))))
      (f32.store ${add(get("lr"), mul(get("j"), i32(4)))} (local.get $e1))
      (local.set $s (f32.add (local.get $s) (local.get $e1)))`,
    )}
    (f32.store ${add(get("lse"), mul(get("row"), i32(4)))}
      (f32.add (local.get $mx) (f32.demote_f64 (call $log (f64.promote_f32 (local.get $s))))))
    ${set(
      "inv",
      `(f32x4.splat (f32.div (if (result f32) (local.get $hasScale) (then (f32.load ${add(get("scale"), mul(get("row"), i32(4)))})) (else (f32.const 1))) (local.get $s)))`,
    )}
    ${forLoop("j", i32(0), get("v4"), i32(4), `(v128.store ${add(get("lr"), mul(get("j"), i32(4)))} (f32x4.mul (v128.load ${add(get("lr"), mul(get("j"), i32(4)))}) (local.get $inv)))`)}
    ${forLoop("j", get("v4"), get("vocab"), i32(1), `(f32.store ${add(get("lr"), mul(get("j"), i32(4)))} (f32.mul (f32.load ${add(get("lr"), mul(get("j"), i32(4)))}) (f32x4.extract_lane 0 (local.get $inv))))`)}`,
  )})
(func (export "ce_fwd") (param $logits i32) (param $targets i32) (param $loss i32) (param $lse i32) (param $vocab i32)
  (param $ignore i32) (param $row0 i32) (param $row1 i32)
  (local $row i32) (local $lr i32) (local $j i32) (local $v4 i32) (local $vm v128) (local $mx f32) (local $acc v128)
  (local $s f32) (local $l f32) (local $t i32) ${VEXP_LOOP_LOCALS}
  ${set("v4", `(i32.and ${get("vocab")} (i32.const -4))`)}
  ${forLoop(
    "row",
    get("row0"),
    get("row1"),
    i32(1),
    `${set("lr", add(get("logits"), mul(mul(get("row"), get("vocab")), i32(4))))}
    ${rowMax}
    ${set("vm", "(f32x4.splat (local.get $mx))")}
    ${set("acc", "(v128.const i32x4 0 0 0 0)")}
    ${vexpLoop(
      "j",
      i32(0),
      get("v4"),
      (o) => `(f32x4.sub (v128.load offset=${o} ${rowAt("lr")}) (local.get $vm))`,
      (e) => `(local.set $acc (f32x4.add (local.get $acc) ${e}))`,
    )}
    ${set("s", "(f32.add (f32.add (f32x4.extract_lane 0 (local.get $acc)) (f32x4.extract_lane 1 (local.get $acc))) (f32.add (f32x4.extract_lane 2 (local.get $acc)) (f32x4.extract_lane 3 (local.get $acc))))")}
    ${forLoop("j", get("v4"), get("vocab"), i32(1), `(local.set $s (f32.add (local.get $s) (call $exp1 (f32.sub (f32.load ${add(get("lr"), mul(get("j"), i32(4)))}) (local.get $mx)))))`)}
    ${set("l", "(f32.add (local.get $mx) (f32.demote_f64 (call $log (f64.promote_f32 (local.get $s)))))")}
    (f32.store ${add(get("lse"), mul(get("row"), i32(4)))} (local.get $l))
    ${set("t", `(i32.load ${add(get("targets"), mul(get("row"), i32(4)))})`)}
    (f32.store ${add(get("loss"), mul(get("row"), i32(4)))}
      (if (result f32) (i32.eq (local.get $t) (local.get $ignore))
        (then (f32.const 0))
        (else (f32.sub (local.get $l) (f32.load ${add(get("lr"), mul(get("t"), i32(4)))})))))`,
  )})
(func (export "ce_bwd") (param $logits i32) (param $targets i32) (param $lse i32) (param $gradLoss i32)
  (param $dlogits i32) (param $vocab i32) (param $ignore i32) (param $row0 i32) (param $row1 i32)
  (local $row i32) (local $lr i32) (local $dr i32) (local $j i32) (local $v4 i32) (local $t i32) (local $g f32)
  (local $l f32) (local $gv v128) (local $lv v128) (local $p i32) ${VEXP_LOOP_LOCALS}
  ${set("v4", `(i32.and ${get("vocab")} (i32.const -4))`)}
  ${forLoop(
    "row",
    get("row0"),
    get("row1"),
    i32(1),
    `${set("lr", add(get("logits"), mul(mul(get("row"), get("vocab")), i32(4))))}
    ${set("dr", add(get("dlogits"), mul(mul(get("row"), get("vocab")), i32(4))))}
    ${set("t", `(i32.load ${add(get("targets"), mul(get("row"), i32(4)))})`)}
    (if (i32.eq (local.get $t) (local.get $ignore))
      (then (memory.fill (local.get $dr) (i32.const 0) ${mul(get("vocab"), i32(4))}))
      (else
        ${set("g", `(f32.load ${add(get("gradLoss"), mul(get("row"), i32(4)))})`)}
        ${set("l", `(f32.load ${add(get("lse"), mul(get("row"), i32(4)))})`)}
        ${set("gv", "(f32x4.splat (local.get $g))")}
        ${set("lv", "(f32x4.splat (local.get $l))")}
        ${vexpLoop(
          "j",
          i32(0),
          get("v4"),
          (o) => `(f32x4.sub (v128.load offset=${o} ${rowAt("lr")}) (local.get $lv))`,
          (e, o) => `(v128.store offset=${o} ${rowAt("dr")} (f32x4.mul ${e} (local.get $gv)))`,
        )}
        ${forLoop("j", get("v4"), get("vocab"), i32(1), `(f32.store ${add(get("dr"), mul(get("j"), i32(4)))} (f32.mul (call $exp1 (f32.sub (f32.load ${add(get("lr"), mul(get("j"), i32(4)))}) (local.get $l))) (local.get $g)))`)}
        ${set("p", add(get("dr"), mul(get("t"), i32(4))))}
        (f32.store (local.get $p) (f32.sub (f32.load (local.get $p)) (local.get $g)))))`,
  )})`;
}

// Row-wise KL divergence between S = softmax(c·s) and P = softmax(c·t) over the full vocabulary,
// with the direction of its gradient w.r.t. c·s, in two exps per element (docs/NUMERICS.md §3.3, TRL
// GKD's β = 0 / β = 1 cases):
//   forward KL(P‖S) = (1/Σe_t)·Σ e_t (c·t − c·s) − lse_t + lse_s,   gradient direction S − P
//   reverse KL(S‖P) = (1/Σe_s)·Σ e_s (c·s − c·t) − lse_s + lse_t,   gradient direction S·(log S − log P − KL)
// with e = exp(c·x − max); the gradient rows are optionally multiplied by a per-row factor. Terms whose weight underflowed (exponent below the exp clamp) count as
// 0, so a −inf logit contributes 0·log 0 = 0 instead of NaN or −inf.
// Per row, three passes over data that stays in cache: maxima; exps, sums and the weighted
// difference; then the gradient. `$out` receives e_s and then the gradient; the forward variant
// also overwrites the teacher row with e_t. log comes from the host: two calls per row.
import { add, forLoop, get, i32, mul, set } from "./dsl.mjs";
import { VEXP_LOCALS, vexpInline } from "./vexp.mjs";

const at = (base, j) => add(get(base), mul(get(j), i32(4)));
const hsum = (v) =>
  `(f32.add (f32.add (f32x4.extract_lane 0 (local.get $${v})) (f32x4.extract_lane 1 (local.get $${v}))) (f32.add (f32x4.extract_lane 2 (local.get $${v})) (f32x4.extract_lane 3 (local.get $${v}))))`;
const hmax = (v) =>
  `(f32.max (f32.max (f32x4.extract_lane 0 (local.get $${v})) (f32x4.extract_lane 1 (local.get $${v}))) (f32.max (f32x4.extract_lane 2 (local.get $${v})) (f32x4.extract_lane 3 (local.get $${v}))))`;
/** Below this exponent the SIMD exp returns its floor, not the true (≈ 0) value. */
const EXP_FLOOR_ARG = -87.33654;

function rowMax(base, out) {
  return `${set("vm", "(f32x4.splat (f32.const -inf))")}
  ${forLoop("j", i32(0), get("v4"), i32(4), `(local.set $vm (f32x4.pmax (local.get $vm) (v128.load ${at(base, "j")})))`)}
  ${set(out, hmax("vm"))}
  ${forLoop("j", get("v4"), get("vocab"), i32(1), `(local.set $${out} (f32.max (local.get $${out}) (f32.load ${at(base, "j")})))`)}
  ${set(out, `(f32.mul (local.get $${out}) (local.get $c))`)}`;
}

function klRows(name, reverse) {
  // Weighted term: forward e_t·(t' − s'), reverse e_s·(s' − t'), masked where the weight underflowed.
  const vecTerm = reverse
    ? `(v128.and (f32x4.mul (local.get $es) (f32x4.sub (local.get $xs) (local.get $xt)))
         (f32x4.gt (f32x4.sub (local.get $xs) (local.get $vms)) (local.get $vfloor)))`
    : `(v128.and (f32x4.mul (local.get $et) (f32x4.sub (local.get $xt) (local.get $xs)))
         (f32x4.gt (f32x4.sub (local.get $xt) (local.get $vmt)) (local.get $vfloor)))`;
  const scalarTerm = reverse
    ? `(if (result f32) (f32.gt (f32.sub (local.get $ys) (local.get $ms)) (f32.const ${EXP_FLOOR_ARG}))
         (then (f32.mul (local.get $fs) (f32.sub (local.get $ys) (local.get $yt)))) (else (f32.const 0)))`
    : `(if (result f32) (f32.gt (f32.sub (local.get $yt) (local.get $mt)) (f32.const ${EXP_FLOOR_ARG}))
         (then (f32.mul (local.get $ft) (f32.sub (local.get $yt) (local.get $ys)))) (else (f32.const 0)))`;
  const vecGrad = reverse
    ? `(f32x4.mul (f32x4.mul (v128.load ${at("lo", "j")}) (local.get $vis))
         (f32x4.add (f32x4.sub (f32x4.mul (v128.load ${at("ls", "j")}) (local.get $vc)) (f32x4.mul (v128.load ${at("lt", "j")}) (local.get $vc))) (local.get $vk)))`
    : `(f32x4.sub (f32x4.mul (v128.load ${at("lo", "j")}) (local.get $vis)) (f32x4.mul (v128.load ${at("lt", "j")}) (local.get $vit)))`;
  const scalarGrad = reverse
    ? `(f32.mul (f32.mul (f32.load ${at("lo", "j")}) (local.get $is))
         (f32.add (f32.sub (f32.mul (f32.load ${at("ls", "j")}) (local.get $c)) (f32.mul (f32.load ${at("lt", "j")}) (local.get $c))) (local.get $k)))`
    : `(f32.sub (f32.mul (f32.load ${at("lo", "j")}) (local.get $is)) (f32.mul (f32.load ${at("lt", "j")}) (local.get $it)))`;
  return `
(func (export "${name}") (param $s i32) (param $t i32) (param $out i32) (param $loss i32) (param $lseS i32)
  (param $lseT i32) (param $vocab i32) (param $c f32) (param $wantGrad i32) (param $gscale i32) (param $hasScale i32)
  (param $row0 i32) (param $row1 i32)
  (local $row i32) (local $ls i32) (local $lt i32) (local $lo i32) (local $j i32) (local $v4 i32)
  (local $vm v128) (local $ms f32) (local $mt f32) (local $vms v128) (local $vmt v128) (local $vc v128)
  (local $vfloor v128) (local $xs v128) (local $xt v128) (local $es v128) (local $et v128)
  (local $sumS v128) (local $sumT v128) (local $acc v128)
  (local $ys f32) (local $yt f32) (local $fs f32) (local $ft f32) (local $ss f32) (local $st f32) (local $a f32)
  (local $lseSv f32) (local $lseTv f32) (local $kl f32) (local $is f32) (local $it f32) (local $k f32)
  (local $vis v128) (local $vit v128) (local $vk v128) (local $g f32) ${VEXP_LOCALS}
  ${set("v4", `(i32.and ${get("vocab")} (i32.const -4))`)}
  ${set("vc", "(f32x4.splat (local.get $c))")}
  ${set("vfloor", `(f32x4.splat (f32.const ${EXP_FLOOR_ARG}))`)}
  ${forLoop(
    "row",
    get("row0"),
    get("row1"),
    i32(1),
    `${set("ls", add(get("s"), mul(mul(get("row"), get("vocab")), i32(4))))}
    ${set("lt", add(get("t"), mul(mul(get("row"), get("vocab")), i32(4))))}
    ${set("lo", add(get("out"), mul(mul(get("row"), get("vocab")), i32(4))))}
    ${rowMax("ls", "ms")}
    ${rowMax("lt", "mt")}
    ${set("vms", "(f32x4.splat (local.get $ms))")}
    ${set("vmt", "(f32x4.splat (local.get $mt))")}
    ${set("sumS", "(v128.const i32x4 0 0 0 0)")}
    ${set("sumT", "(v128.const i32x4 0 0 0 0)")}
    ${set("acc", "(v128.const i32x4 0 0 0 0)")}
    ${forLoop(
      "j",
      i32(0),
      get("v4"),
      i32(4),
      `${set("xs", `(f32x4.mul (v128.load ${at("ls", "j")}) (local.get $vc))`)}
      ${set("xt", `(f32x4.mul (v128.load ${at("lt", "j")}) (local.get $vc))`)}
      ${set("es", vexpInline("(f32x4.sub (local.get $xs) (local.get $vms))"))}
      ${set("et", vexpInline("(f32x4.sub (local.get $xt) (local.get $vmt))"))}
      ${set("sumS", "(f32x4.add (local.get $sumS) (local.get $es))")}
      ${set("sumT", "(f32x4.add (local.get $sumT) (local.get $et))")}
      ${set("acc", `(f32x4.add (local.get $acc) ${vecTerm})`)}
      (v128.store ${at("lo", "j")} (local.get $es))
      ${reverse ? "" : `(v128.store ${at("lt", "j")} (local.get $et))`}`,
    )}
    ${set("ss", hsum("sumS"))}
    ${set("st", hsum("sumT"))}
    ${set("a", hsum("acc"))}
    ${forLoop(
      "j",
      get("v4"),
      get("vocab"),
      i32(1),
      `${set("ys", `(f32.mul (f32.load ${at("ls", "j")}) (local.get $c))`)}
      ${set("yt", `(f32.mul (f32.load ${at("lt", "j")}) (local.get $c))`)}
      ${set("fs", "(call $exp1 (f32.sub (local.get $ys) (local.get $ms)))")}
      ${set("ft", "(call $exp1 (f32.sub (local.get $yt) (local.get $mt)))")}
      ${set("ss", "(f32.add (local.get $ss) (local.get $fs))")}
      ${set("st", "(f32.add (local.get $st) (local.get $ft))")}
      ${set("a", `(f32.add (local.get $a) ${scalarTerm})`)}
      (f32.store ${at("lo", "j")} (local.get $fs))
      ${reverse ? "" : `(f32.store ${at("lt", "j")} (local.get $ft))`}`,
    )}
    ${set("lseSv", "(f32.add (local.get $ms) (f32.demote_f64 (call $log (f64.promote_f32 (local.get $ss)))))")}
    ${set("lseTv", "(f32.add (local.get $mt) (f32.demote_f64 (call $log (f64.promote_f32 (local.get $st)))))")}
    ${
      reverse
        ? set(
            "kl",
            "(f32.add (f32.sub (f32.div (local.get $a) (local.get $ss)) (local.get $lseSv)) (local.get $lseTv))",
          )
        : set(
            "kl",
            "(f32.add (f32.sub (f32.div (local.get $a) (local.get $st)) (local.get $lseTv)) (local.get $lseSv))",
          )
    }
    (f32.store ${add(get("loss"), mul(get("row"), i32(4)))} (local.get $kl))
    (f32.store ${add(get("lseS"), mul(get("row"), i32(4)))} (local.get $lseSv))
    (f32.store ${add(get("lseT"), mul(get("row"), i32(4)))} (local.get $lseTv))
    (if (local.get $wantGrad) (then
      ${set("g", `(if (result f32) (local.get $hasScale) (then (f32.load ${add(get("gscale"), mul(get("row"), i32(4)))})) (else (f32.const 1)))`)}
      ${set("is", "(f32.div (local.get $g) (local.get $ss))")}
      ${set("it", "(f32.div (local.get $g) (local.get $st))")}
      ${set("k", "(f32.sub (f32.sub (local.get $lseTv) (local.get $lseSv)) (local.get $kl))")}
      ${set("vis", "(f32x4.splat (local.get $is))")}
      ${set("vit", "(f32x4.splat (local.get $it))")}
      ${set("vk", "(f32x4.splat (local.get $k))")}
      ${forLoop("j", i32(0), get("v4"), i32(4), `(v128.store ${at("lo", "j")} ${vecGrad})`)}
      ${forLoop("j", get("v4"), get("vocab"), i32(1), `(f32.store ${at("lo", "j")} ${scalarGrad})`)}))`,
  )})`;
}

export function klDivergenceWat() {
  return `${klRows("kl_fwd_rows", false)}
${klRows("kl_rev_rows", true)}`;
}

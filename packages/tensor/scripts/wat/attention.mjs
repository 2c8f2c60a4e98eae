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
import { add, fmaExpr, forLoop, get, i32, minU, mul, set, sub } from "./dsl.mjs";
import { FLAG_ACCUMULATE, FLAG_TRANS_A, FLAG_TRANS_B, KC } from "./gemm.mjs";
import { VEXP_LOOP_LOCALS, vexpLoop } from "./vexp.mjs";

const hsum = (v) =>
  `(f32.add (f32.add (f32x4.extract_lane 0 ${v}) (f32x4.extract_lane 1 ${v})) (f32.add (f32x4.extract_lane 2 ${v}) (f32x4.extract_lane 3 ${v})))`;

function helpers() {
  return `
(func $jmax (param $i i32) (param $tq i32) (param $tk i32) (param $causal i32) (result i32)
  (local $lim i32)
  (if (i32.eqz (local.get $causal)) (then (return (local.get $tk))))
  ;; keys visible to query i: j <= i + tk - tq (signed; the query block is aligned to the end of the keys)
  ${set("lim", add(get("i"), add(sub(get("tk"), get("tq")), i32(1))))}
  (select (i32.const 0) (select (local.get $tk) (local.get $lim) (i32.gt_s (local.get $lim) (local.get $tk)))
    (i32.lt_s (local.get $lim) (i32.const 0))))`;
}

/** Query rows per block: the score block [QB][keys] goes through the GEMM (scripts/wat/gemm.mjs). */
export const ATTN_QB = 64;

const f32At = (base, idx) => add(base, mul(idx, i32(4)));

/**
 * Softmax row helpers. $scaled_max returns the max of row[j]·scale over j < jm (−inf when jm = 0) without
 * writing the row; $scaled_exp_sum sets row[j] = exp(row[j]·scale − shift) for j < jm and returns their sum.
 * The products are rounded to f32 before the subtraction, so the results are those of scaling the row in
 * place first. f32x4.max is exact and order-free (NaN wins, +0 over −0), so the max's four independent
 * accumulators give the one-chain result (128 rows of 128: 30 → 12 µs against one chain that also stored the row).
 */
function rowHelpers() {
  const scaled = (o) => `(f32x4.mul (v128.load offset=${o} ${f32At(get("row"), get("j"))}) (local.get $vsc))`;
  return `
(func $scaled_max (param $row i32) (param $jm i32) (param $scale f32) (result f32)
  (local $j i32) (local $j4 i32) (local $j16 i32) (local $vsc v128) (local $m0 v128) (local $m1 v128) (local $m2 v128)
  (local $m3 v128) (local $mx f32)
  ${set("j16", `(i32.and ${get("jm")} (i32.const -16))`)}
  ${set("j4", `(i32.and ${get("jm")} (i32.const -4))`)}
  ${set("vsc", "(f32x4.splat (local.get $scale))")}
  ${set("m0", "(f32x4.splat (f32.const -inf))")}
  ${set("m1", get("m0"))}
  ${set("m2", get("m0"))}
  ${set("m3", get("m0"))}
  ${forLoop(
    "j",
    i32(0),
    get("j16"),
    i32(16),
    [0, 1, 2, 3].map((u) => set(`m${u}`, `(f32x4.max (local.get $m${u}) ${scaled(u * 16)})`)).join("\n    "),
  )}
  ${forLoop("j", get("j16"), get("j4"), i32(4), set("m0", `(f32x4.max (local.get $m0) ${scaled(0)})`))}
  ${set("m0", "(f32x4.max (f32x4.max (local.get $m0) (local.get $m1)) (f32x4.max (local.get $m2) (local.get $m3)))")}
  ${set("mx", "(f32.max (f32.max (f32x4.extract_lane 0 (local.get $m0)) (f32x4.extract_lane 1 (local.get $m0))) (f32.max (f32x4.extract_lane 2 (local.get $m0)) (f32x4.extract_lane 3 (local.get $m0))))")}
  ${forLoop("j", get("j4"), get("jm"), i32(1), `(local.set $mx (f32.max (local.get $mx) (f32.mul (f32.load ${f32At(get("row"), get("j"))}) (local.get $scale))))`)}
  (local.get $mx))
(func $scaled_exp_sum (param $row i32) (param $jm i32) (param $scale f32) (param $shift f32) (result f32)
  (local $j i32) (local $j4 i32) (local $vsc v128) (local $vs v128) (local $acc v128) (local $s f32) (local $p i32)
  ${VEXP_LOOP_LOCALS}
  ${set("j4", `(i32.and ${get("jm")} (i32.const -4))`)}
  ${set("vsc", "(f32x4.splat (local.get $scale))")}
  ${set("vs", "(f32x4.splat (local.get $shift))")}
  ${vexpLoop(
    "j",
    i32(0),
    get("j4"),
    (o) => `(f32x4.sub ${scaled(o)} (local.get $vs))`,
    (e, o) =>
      `(v128.store offset=${o} ${f32At(get("row"), get("j"))} ${e}) (local.set $acc (f32x4.add (local.get $acc) ${e}))`,
  )}
  ${set("s", hsum(get("acc")))}
  ${forLoop("j", get("j4"), get("jm"), i32(1), `${set("p", f32At(get("row"), get("j")))} (f32.store (local.get $p) (call $exp1 (f32.sub (f32.mul (f32.load (local.get $p)) (local.get $scale)) (local.get $shift)))) (local.set $s (f32.add (local.get $s) (f32.load (local.get $p))))`)}
  (local.get $s))
(func $scale_row (param $row i32) (param $n i32) (param $a f32)
  (local $j i32) (local $j4 i32) (local $va v128) (local $p i32)
  ${set("j4", `(i32.and ${get("n")} (i32.const -4))`)}
  ${set("va", "(f32x4.splat (local.get $a))")}
  ${forLoop("j", i32(0), get("j4"), i32(4), `${set("p", f32At(get("row"), get("j")))} (v128.store (local.get $p) (f32x4.mul (v128.load (local.get $p)) (local.get $va)))`)}
  ${forLoop("j", get("j4"), get("n"), i32(1), `${set("p", f32At(get("row"), get("j")))} (f32.store (local.get $p) (f32.mul (f32.load (local.get $p)) (local.get $a)))`)})
(func $ds_row (param $dp i32) (param $pr i32) (param $jm i32) (param $d f32) (param $scale f32)
  ;; dp[j] = p[j] * (dp[j] - d) * scale for j < jm
  (local $j i32) (local $j4 i32) (local $vd v128) (local $vs v128) (local $p i32) (local $q i32)
  ${set("j4", `(i32.and ${get("jm")} (i32.const -4))`)}
  ${set("vd", "(f32x4.splat (local.get $d))")}
  ${set("vs", "(f32x4.splat (local.get $scale))")}
  ${forLoop("j", i32(0), get("j4"), i32(4), `${set("p", f32At(get("dp"), get("j")))} ${set("q", f32At(get("pr"), get("j")))} (v128.store (local.get $p) (f32x4.mul (f32x4.mul (v128.load (local.get $q)) (f32x4.sub (v128.load (local.get $p)) (local.get $vd))) (local.get $vs)))`)}
  ${forLoop("j", get("j4"), get("jm"), i32(1), `${set("p", f32At(get("dp"), get("j")))} ${set("q", f32At(get("pr"), get("j")))} (f32.store (local.get $p) (f32.mul (f32.mul (f32.load (local.get $q)) (f32.sub (f32.load (local.get $p)) (local.get $d))) (local.get $scale)))`)})`;
}

/** Keys the query block [i0, i1) needs: all tk, or up to the last row's causal limit. */
const blockKeys = `(select (call $jmax (i32.sub ${get("i1")} (i32.const 1)) ${get("tq")} ${get("tk")} ${get("causal")}) ${get("tk")} ${get("causal")})`;
/** A pointer p shifted back by i0 rows of nb floats, so the GEMM's global row i lands at row i − i0 of p. */
const rowBase = (p) => sub(p, mul(mul(get("i0"), get("nb")), i32(4)));

function forward() {
  return `
(func (export "attn_fwd") (param $q i32) (param $k i32) (param $v i32) (param $out i32) (param $lse i32)
  (param $heads i32) (param $kvHeads i32) (param $tq i32) (param $tk i32) (param $dim i32) (param $causal i32)
  (param $scale f32) (param $scratch i32) (param $sbuf i32) (param $unit0 i32) (param $unit1 i32)
  (local $u i32) (local $b i32) (local $h i32) (local $kvh i32) (local $qh i32) (local $kh i32) (local $vh i32)
  (local $oh i32) (local $i i32) (local $i0 i32) (local $i1 i32) (local $nb i32) (local $jm i32) (local $row i32)
  (local $mx f32) (local $sum f32) (local $rd i32) (local $group i32)
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
      "i0",
      i32(0),
      get("tq"),
      i32(ATTN_QB),
      `${set("i1", minU(get("tq"), add(get("i0"), i32(ATTN_QB))))}
      ${set("nb", blockKeys)}
      (if (i32.eqz ${get("nb")})
        (then
          (memory.fill ${add(get("oh"), mul(get("i0"), get("rd")))} (i32.const 0) ${mul(sub(get("i1"), get("i0")), get("rd"))})
          ${forLoop("i", get("i0"), get("i1"), i32(1), `(f32.store ${f32At(get("lse"), add(mul(get("u"), get("tq")), get("i")))} (f32.const -inf))`)})
        (else
          ;; S = Q_blk · K[0:nb]ᵀ
          (call $gemm_block ${get("qh")} ${get("kh")} ${rowBase(get("sbuf"))} ${get("tq")} ${get("nb")} ${get("dim")}
            (i32.const ${FLAG_TRANS_B}) ${get("i0")} ${get("i1")} ${get("scratch")})
          ${forLoop(
            "i",
            get("i0"),
            get("i1"),
            i32(1),
            `${set("row", add(get("sbuf"), mul(mul(sub(get("i"), get("i0")), get("nb")), i32(4))))}
            ${set("jm", `(call $jmax ${get("i")} ${get("tq")} ${get("tk")} ${get("causal")})`)}
            ${set("mx", `(call $scaled_max ${get("row")} ${get("jm")} ${get("scale")})`)}
            ${set("sum", `(call $scaled_exp_sum ${get("row")} ${get("jm")} ${get("scale")} ${get("mx")})`)}
            (call $scale_row ${get("row")} ${get("jm")} (f32.div (f32.const 1) ${get("sum")}))
            (memory.fill ${f32At(get("row"), get("jm"))} (i32.const 0) ${mul(sub(get("nb"), get("jm")), i32(4))})
            (f32.store ${f32At(get("lse"), add(mul(get("u"), get("tq")), get("i")))}
              (if (result f32) (local.get $jm)
                (then (f32.add (local.get $mx) (f32.demote_f64 (call $log (f64.promote_f32 (local.get $sum))))))
                (else (f32.const -inf))))`,
          )}
          ;; O_blk = P · V[0:nb]
          (call $gemm_block ${rowBase(get("sbuf"))} ${get("vh")} ${get("oh")} ${get("tq")} ${get("dim")} ${get("nb")}
            (i32.const 0) ${get("i0")} ${get("i1")} ${get("scratch")})))`,
    )}`,
  )})`;
}

function backward() {
  return `
(func (export "attn_bwd") (param $q i32) (param $k i32) (param $v i32) (param $out i32) (param $dout i32)
  (param $lse i32) (param $dq i32) (param $dk i32) (param $dv i32) (param $heads i32) (param $kvHeads i32)
  (param $tq i32) (param $tk i32) (param $dim i32) (param $causal i32) (param $scale f32) (param $scratch i32)
  (param $sbuf i32) (param $unit0 i32) (param $unit1 i32)
  (local $u i32) (local $b i32) (local $g i32) (local $h i32) (local $hq i32) (local $group i32) (local $rd i32)
  (local $kh i32) (local $vh i32) (local $dkh i32) (local $dvh i32) (local $qh i32) (local $oh i32) (local $doh i32)
  (local $dqh i32) (local $i i32) (local $i0 i32) (local $i1 i32) (local $nb i32) (local $jm i32) (local $pbuf i32)
  (local $dpbuf i32) (local $prow i32) (local $dprow i32) (local $row i32) (local $l f32) (local $dd f32)
  ${set("rd", mul(get("dim"), i32(4)))}
  ${set("group", `(i32.div_u ${get("heads")} ${get("kvHeads")})`)}
  ${set("pbuf", get("sbuf"))}
  ${set("dpbuf", add(get("sbuf"), mul(mul(get("tk"), i32(ATTN_QB)), i32(4))))}
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
      ${set("qh", add(get("q"), mul(mul(get("hq"), get("tq")), get("rd"))))}
      ${set("oh", add(get("out"), mul(mul(get("hq"), get("tq")), get("rd"))))}
      ${set("doh", add(get("dout"), mul(mul(get("hq"), get("tq")), get("rd"))))}
      ${set("dqh", add(get("dq"), mul(mul(get("hq"), get("tq")), get("rd"))))}
      (memory.fill (local.get $dqh) (i32.const 0) ${mul(get("tq"), get("rd"))})
      ${forLoop(
        "i0",
        i32(0),
        get("tq"),
        i32(ATTN_QB),
        `${set("i1", minU(get("tq"), add(get("i0"), i32(ATTN_QB))))}
        ${set("nb", blockKeys)}
        (if (local.get $nb) (then
          ;; S = Q_blk · Kᵀ and dP = dO_blk · Vᵀ over the nb keys the block sees
          (call $gemm_block ${get("qh")} ${get("kh")} ${rowBase(get("pbuf"))} ${get("tq")} ${get("nb")} ${get("dim")}
            (i32.const ${FLAG_TRANS_B}) ${get("i0")} ${get("i1")} ${get("scratch")})
          (call $gemm_block ${get("doh")} ${get("vh")} ${rowBase(get("dpbuf"))} ${get("tq")} ${get("nb")} ${get("dim")}
            (i32.const ${FLAG_TRANS_B}) ${get("i0")} ${get("i1")} ${get("scratch")})
          ${forLoop(
            "i",
            get("i0"),
            get("i1"),
            i32(1),
            `${set("row", add(mul(get("hq"), get("tq")), get("i")))}
            ${set("prow", add(get("pbuf"), mul(mul(sub(get("i"), get("i0")), get("nb")), i32(4))))}
            ${set("dprow", add(get("dpbuf"), mul(mul(sub(get("i"), get("i0")), get("nb")), i32(4))))}
            ${set("jm", `(call $jmax ${get("i")} ${get("tq")} ${get("tk")} ${get("causal")})`)}
            ${set("l", `(f32.load ${f32At(get("lse"), get("row"))})`)}
            ${set("dd", `(call $dot ${add(get("doh"), mul(get("i"), get("rd")))} ${add(get("oh"), mul(get("i"), get("rd")))} ${get("dim")})`)}
            ;; P = exp(scale·S − lse), dS = P ∘ (dP − D)·scale; masked keys get 0
            (drop (call $scaled_exp_sum ${get("prow")} ${get("jm")} ${get("scale")} ${get("l")}))
            (call $ds_row ${get("dprow")} ${get("prow")} ${get("jm")} ${get("dd")} ${get("scale")})
            (memory.fill ${f32At(get("prow"), get("jm"))} (i32.const 0) ${mul(sub(get("nb"), get("jm")), i32(4))})
            (memory.fill ${f32At(get("dprow"), get("jm"))} (i32.const 0) ${mul(sub(get("nb"), get("jm")), i32(4))})`,
          )}
          ;; dQ_blk += dS · K;  dK[0:nb] += dSᵀ · Q_blk;  dV[0:nb] += Pᵀ · dO_blk
          (call $gemm_block ${rowBase(get("dpbuf"))} ${get("kh")} ${get("dqh")} ${get("tq")} ${get("dim")} ${get("nb")}
            (i32.const ${FLAG_ACCUMULATE}) ${get("i0")} ${get("i1")} ${get("scratch")})
          (call $gemm_block ${get("dpbuf")} ${add(get("qh"), mul(get("i0"), get("rd")))} ${get("dkh")} ${get("nb")} ${get("dim")}
            ${sub(get("i1"), get("i0"))} (i32.const ${FLAG_TRANS_A | FLAG_ACCUMULATE}) (i32.const 0) ${get("nb")} ${get("scratch")})
          (call $gemm_block ${get("pbuf")} ${add(get("doh"), mul(get("i0"), get("rd")))} ${get("dvh")} ${get("nb")} ${get("dim")}
            ${sub(get("i1"), get("i0"))} (i32.const ${FLAG_TRANS_A | FLAG_ACCUMULATE}) (i32.const 0) ${get("nb")} ${get("scratch")})))`,
      )}`,
    )}`,
  )})`;
}

/** i8x16.shuffle of a and b picking f32 lanes (0–3 from a, 4–7 from b). */
const shuffle4 = (a, b, lanes) =>
  `(i8x16.shuffle ${lanes.flatMap((l) => [0, 1, 2, 3].map((x) => 4 * l + x)).join(" ")} ${a} ${b})`;

/**
 * The two products of one decode row without packing (gemm_block packs all of K and V on every call, which at
 * a thousand cached positions cost more than the arithmetic), each output summed exactly as gemm_block sums it
 * for one row of A: the k dimension in blocks of KC, a block's terms accumulated in order from +0 (one mul+add
 * or, in the relaxed variant, one relaxed_madd per term, the register tile's operation), the blocks' sums added
 * in order. So a decode row keeps the bits of attn_fwd for that row (test/wasm/decode-bits.ts, both variants).
 *   $dec_scores  s[j] = Σ_p q[p]·K[j][p], j < n: four keys at a time, their rows transposed 4 × 4 in registers;
 *   $dec_values  o[p] = Σ_j w[j]·V[j][p], p < dim: four or one vectors of o at a time, a pass over the keys each.
 */
function decodeProducts(relaxed) {
  const fma = (a, b, c) => fmaExpr(relaxed, a, b, c);
  const rowAt = (r, p) => add(get(r), mul(p, i32(4)));
  const scalarColumn = (p) =>
    `(f32x4.replace_lane 3 (f32x4.replace_lane 2 (f32x4.replace_lane 1 (f32x4.splat (f32.load ${rowAt("r0", p)}))
      (f32.load ${rowAt("r1", p)})) (f32.load ${rowAt("r2", p)})) (f32.load ${rowAt("r3", p)}))`;
  const qAt = (p) => `(f32x4.splat (f32.load ${add(get("q"), mul(p, i32(4)))}))`;
  const step4 = `${[0, 1, 2, 3].map((r) => set(`x${r}`, `(v128.load ${rowAt(`r${r}`, get("p"))})`)).join(" ")}
          ${set("t0", shuffle4(get("x0"), get("x1"), [0, 4, 1, 5]))}
          ${set("t1", shuffle4(get("x2"), get("x3"), [0, 4, 1, 5]))}
          ${set("t2", shuffle4(get("x0"), get("x1"), [2, 6, 3, 7]))}
          ${set("t3", shuffle4(get("x2"), get("x3"), [2, 6, 3, 7]))}
          ${set("acc", fma(qAt(get("p")), shuffle4(get("t0"), get("t1"), [0, 1, 4, 5]), get("acc")))}
          ${set("acc", fma(qAt(add(get("p"), i32(1))), shuffle4(get("t0"), get("t1"), [2, 3, 6, 7]), get("acc")))}
          ${set("acc", fma(qAt(add(get("p"), i32(2))), shuffle4(get("t2"), get("t3"), [0, 1, 4, 5]), get("acc")))}
          ${set("acc", fma(qAt(add(get("p"), i32(3))), shuffle4(get("t2"), get("t3"), [2, 3, 6, 7]), get("acc")))}`;
  const keyRow = (r) =>
    set(
      `r${r}`,
      `(select ${add(get("r0"), mul(get("rd"), i32(r)))} ${get("last")} (i32.lt_u ${add(get("j"), i32(r))} ${get("n")}))`,
    );
  const vAcc = (v) => `(v128.load offset=${v * 16} ${add(get("vr"), mul(get("c"), i32(4)))})`;
  return `
(func $dec_scores (param $q i32) (param $k i32) (param $n i32) (param $dim i32) (param $s i32)
  (local $j i32) (local $p i32) (local $pc i32) (local $pe i32) (local $p4 i32) (local $rd i32) (local $last i32)
  (local $r0 i32) (local $r1 i32) (local $r2 i32) (local $r3 i32) (local $acc v128) (local $res v128)
  (local $x0 v128) (local $x1 v128) (local $x2 v128) (local $x3 v128)
  (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)
  ${set("rd", mul(get("dim"), i32(4)))}
  ;; lanes past the last key read its row (valid memory) and are not stored
  ${set("last", add(get("k"), mul(sub(get("n"), i32(1)), get("rd"))))}
  ${forLoop(
    "j",
    i32(0),
    get("n"),
    i32(4),
    `${set("r0", add(get("k"), mul(get("j"), get("rd"))))}
    ${keyRow(3)} ${keyRow(2)} ${keyRow(1)}
    ${forLoop(
      "pc",
      i32(0),
      get("dim"),
      i32(KC),
      `${set("pe", minU(add(get("pc"), i32(KC)), get("dim")))}
      ${set("p4", add(get("pc"), `(i32.and ${sub(get("pe"), get("pc"))} (i32.const -4))`))}
      ${set("acc", "(v128.const i32x4 0 0 0 0)")}
      ${forLoop("p", get("pc"), get("p4"), i32(4), step4)}
      ${forLoop("p", get("p4"), get("pe"), i32(1), set("acc", fma(qAt(get("p")), scalarColumn(get("p")), get("acc"))))}
      ${set("res", `(if (result v128) (i32.eqz ${get("pc")}) (then ${get("acc")}) (else (f32x4.add ${get("acc")} ${get("res")})))`)}`,
    )}
    (if (i32.le_u ${add(get("j"), i32(4))} ${get("n")})
      (then (v128.store ${add(get("s"), mul(get("j"), i32(4)))} ${get("res")}))
      (else
        (f32.store ${add(get("s"), mul(get("j"), i32(4)))} (f32x4.extract_lane 0 ${get("res")}))
        (if (i32.lt_u ${add(get("j"), i32(1))} ${get("n")})
          (then (f32.store offset=4 ${add(get("s"), mul(get("j"), i32(4)))} (f32x4.extract_lane 1 ${get("res")}))))
        (if (i32.lt_u ${add(get("j"), i32(2))} ${get("n")})
          (then (f32.store offset=8 ${add(get("s"), mul(get("j"), i32(4)))} (f32x4.extract_lane 2 ${get("res")}))))))`,
  )})
(func $dec_values (param $w i32) (param $v i32) (param $n i32) (param $dim i32) (param $o i32)
  (local $c i32) (local $c16 i32) (local $c4 i32) (local $j i32) (local $jc i32) (local $je i32) (local $rd i32)
  (local $vr i32) (local $wj v128) (local $a0 v128) (local $a1 v128) (local $a2 v128) (local $a3 v128)
  (local $o0 v128) (local $o1 v128) (local $o2 v128) (local $o3 v128)
  ${set("rd", mul(get("dim"), i32(4)))}
  ${set("c16", `(i32.and ${get("dim")} (i32.const -16))`)}
  ${set("c4", `(i32.and ${get("dim")} (i32.const -4))`)}
  ;; output columns [c, c + 16) (four vectors), then [c, c + 4), then one column at a time (lane 0)
  ${[
    ["c", i32(0), get("c16"), 16, 4],
    ["c", get("c"), get("c4"), 4, 1],
    ["c", get("c"), get("dim"), 1, 1],
  ]
    .map(
      ([c, from, to, width, vectors]) =>
        `${forLoop(
          c,
          from,
          to,
          i32(width),
          `${forLoop(
            "jc",
            i32(0),
            get("n"),
            i32(KC),
            `${set("je", minU(add(get("jc"), i32(KC)), get("n")))}
          ${Array.from({ length: vectors }, (_, v) => set(`a${v}`, "(v128.const i32x4 0 0 0 0)")).join(" ")}
          ${forLoop(
            "j",
            get("jc"),
            get("je"),
            i32(1),
            `${set("wj", `(f32x4.splat (f32.load ${add(get("w"), mul(get("j"), i32(4)))}))`)}
            ${set("vr", add(get("v"), mul(get("j"), get("rd"))))}
            ${Array.from({ length: vectors }, (_, v) =>
              set(
                `a${v}`,
                fma(
                  get("wj"),
                  width === 1 ? `(f32x4.splat (f32.load ${add(get("vr"), mul(get("c"), i32(4)))}))` : vAcc(v),
                  get(`a${v}`),
                ),
              ),
            ).join(" ")}`,
          )}
          ${Array.from({ length: vectors }, (_, v) =>
            set(
              `o${v}`,
              `(if (result v128) (i32.eqz ${get("jc")}) (then ${get(`a${v}`)}) (else (f32x4.add ${get(`a${v}`)} ${get(`o${v}`)})))`,
            ),
          ).join(" ")}`,
          )}
        ${
          width === 1
            ? `(f32.store ${add(get("o"), mul(get("c"), i32(4)))} (f32x4.extract_lane 0 ${get("o0")}))`
            : Array.from(
                { length: vectors },
                (_, v) => `(v128.store offset=${v * 16} ${add(get("o"), mul(get("c"), i32(4)))} ${get(`o${v}`)})`,
              ).join(" ")
        }`,
        )}`,
    )
    .join("\n  ")})
`;
}

/**
 * Decode attention over ragged per-sequence KV caches (docs/ARCHITECTURE.md §Continuous batching): one
 * query row per sequence, each sequence's keys and values in its own buffer [kvHeads][cap_b][dim] of which
 * the first len_b positions are read, in place (no gather into a batch tensor). Pointers, lengths and
 * capacities come from i32 tables indexed by sequence. Units are (b, h) query heads, and each unit does
 * exactly what attn_fwd does for a single query row over len_b keys, so a row's result does not depend on
 * the other rows or on the capacity of its buffer. A sequence with len_b = 0 gets output 0 and lse −∞.
 */
function decodeRagged() {
  return `
(func (export "attn_decode_ragged") (param $q i32) (param $kTab i32) (param $vTab i32) (param $lenTab i32)
  (param $capTab i32) (param $out i32) (param $lse i32) (param $heads i32) (param $kvHeads i32) (param $dim i32)
  (param $scale f32) (param $sbuf i32) (param $unit0 i32) (param $unit1 i32)
  (local $u i32) (local $b i32) (local $h i32) (local $kvo i32) (local $qh i32) (local $kh i32) (local $vh i32)
  (local $oh i32) (local $n i32) (local $mx f32) (local $sum f32) (local $rd i32) (local $group i32)
  ${set("rd", mul(get("dim"), i32(4)))}
  ${set("group", `(i32.div_u ${get("heads")} ${get("kvHeads")})`)}
  ${forLoop(
    "u",
    get("unit0"),
    get("unit1"),
    i32(1),
    `${set("b", `(i32.div_u ${get("u")} ${get("heads")})`)}
    ${set("h", sub(get("u"), mul(get("b"), get("heads"))))}
    ${set("n", `(i32.load ${add(get("lenTab"), mul(get("b"), i32(4)))})`)}
    ;; element offset of kv head h / group in a [kvHeads][cap][dim] buffer
    ${set("kvo", mul(mul(`(i32.div_u ${get("h")} ${get("group")})`, `(i32.load ${add(get("capTab"), mul(get("b"), i32(4)))})`), get("rd")))}
    ${set("kh", add(`(i32.load ${add(get("kTab"), mul(get("b"), i32(4)))})`, get("kvo")))}
    ${set("vh", add(`(i32.load ${add(get("vTab"), mul(get("b"), i32(4)))})`, get("kvo")))}
    ${set("qh", add(get("q"), mul(get("u"), get("rd"))))}
    ${set("oh", add(get("out"), mul(get("u"), get("rd"))))}
    (if (i32.eqz ${get("n")})
      (then
        (memory.fill ${get("oh")} (i32.const 0) ${get("rd")})
        (f32.store ${f32At(get("lse"), get("u"))} (f32.const -inf)))
      (else
        ;; s = q · K[0:n]ᵀ, softmax, o = p · V[0:n] (attn_fwd's steps for one query row)
        (call $dec_scores ${get("qh")} ${get("kh")} ${get("n")} ${get("dim")} ${get("sbuf")})
        ${set("mx", `(call $scaled_max ${get("sbuf")} ${get("n")} ${get("scale")})`)}
        ${set("sum", `(call $scaled_exp_sum ${get("sbuf")} ${get("n")} ${get("scale")} ${get("mx")})`)}
        (call $scale_row ${get("sbuf")} ${get("n")} (f32.div (f32.const 1) ${get("sum")}))
        (f32.store ${f32At(get("lse"), get("u"))}
          (f32.add (local.get $mx) (f32.demote_f64 (call $log (f64.promote_f32 (local.get $sum))))))
        (call $dec_values ${get("sbuf")} ${get("vh")} ${get("n")} ${get("dim")} ${get("oh")})))`,
  )})`;
}

export function attentionWat({ relaxed }) {
  return [helpers(), rowHelpers(), forward(), backward(), decodeProducts(relaxed), decodeRagged()].join("\n");
}

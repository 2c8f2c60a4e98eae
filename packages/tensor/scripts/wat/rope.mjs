// Rotary position embedding, rotate-half layout (Su et al. 2021, "RoFormer"; transformers
// apply_rotary_pos_emb): per head row of `dim` values, for i < half
//   y[i] = x[i]·cos[i] − x[i+half]·sin[i],   y[i+half] = x[i+half]·cos[i] + x[i]·sin[i],
// the same f32 products and sum as torch's x·cos + rotate_half(x)·sin. Values past 2·half (partial
// rotary) are copied. Rows of head u = b·H + h in [u0, u1), position t; src and dst each in
// [B][H][T][dim] layout, or [B][T][H][dim] (the projection's layout) when their flag is set, so the
// head permute of attention can ride along. src may equal dst (both in the same layout).
// cos/sin rows [T][half] (shared by the batch) or [B·T][half] (perBatch). sign = −1 rotates by −θ,
// the transpose of the rotation, which is the backward.
import { add, forLoop, get, i32, mul, set } from "./dsl.mjs";

/** Byte address of row (u, t) in a buffer with the given layout flag local. */
function rowAddr(base, flag) {
  // [B][H][T][D]: (u·T + t)·D;  [B][T][H][D]: ((b·T + t)·H + h)·D with b = u / H, h = u % H
  const bhtd = add(mul(get("u"), get("seq")), get("t"));
  const bthd = add(
    mul(add(mul(`(i32.div_u ${get("u")} ${get("heads")})`, get("seq")), get("t")), get("heads")),
    `(i32.rem_u ${get("u")} ${get("heads")})`,
  );
  return add(get(base), mul(mul(`(select ${bthd} ${bhtd} ${get(flag)})`, get("dim")), i32(4)));
}

export function ropeWat() {
  const vecBody = `${set("x1", `(v128.load ${add(get("srow"), get("i"))})`)}
      ${set("x2", `(v128.load ${add(add(get("srow"), get("i")), get("hb"))})`)}
      ${set("c", `(v128.load ${add(get("crow"), get("i"))})`)}
      ${set("s", `(f32x4.mul (v128.load ${add(get("nrow"), get("i"))}) (local.get $sg))`)}
      (v128.store ${add(get("drow"), get("i"))} (f32x4.sub (f32x4.mul (local.get $x1) (local.get $c)) (f32x4.mul (local.get $x2) (local.get $s))))
      (v128.store ${add(add(get("drow"), get("i")), get("hb"))} (f32x4.add (f32x4.mul (local.get $x2) (local.get $c)) (f32x4.mul (local.get $x1) (local.get $s))))`;
  const scalarBody = `${set("a", `(f32.load ${add(get("srow"), get("i"))})`)}
      ${set("b", `(f32.load ${add(add(get("srow"), get("i")), get("hb"))})`)}
      ${set("cs", `(f32.load ${add(get("crow"), get("i"))})`)}
      ${set("ss", `(f32.mul (f32.load ${add(get("nrow"), get("i"))}) (local.get $sign))`)}
      (f32.store ${add(get("drow"), get("i"))} (f32.sub (f32.mul (local.get $a) (local.get $cs)) (f32.mul (local.get $b) (local.get $ss))))
      (f32.store ${add(add(get("drow"), get("i")), get("hb"))} (f32.add (f32.mul (local.get $b) (local.get $cs)) (f32.mul (local.get $a) (local.get $ss))))`;
  return `
(func (export "rope") (param $src i32) (param $dst i32) (param $srcBthd i32) (param $dstBthd i32) (param $cos i32)
  (param $sin i32) (param $heads i32) (param $seq i32) (param $dim i32) (param $half i32) (param $perBatch i32)
  (param $sign f32) (param $u0 i32) (param $u1 i32)
  (local $u i32) (local $t i32) (local $i i32) (local $hb i32) (local $vb i32) (local $db i32) (local $cs_off i32)
  (local $srow i32) (local $drow i32) (local $crow i32) (local $nrow i32)
  (local $x1 v128) (local $x2 v128) (local $c v128) (local $s v128) (local $sg v128)
  (local $a f32) (local $b f32) (local $cs f32) (local $ss f32)
  ${set("hb", mul(get("half"), i32(4)))}
  ${set("vb", `(i32.and ${get("hb")} (i32.const -16))`)}
  ${set("db", mul(get("dim"), i32(4)))}
  ${set("sg", "(f32x4.splat (local.get $sign))")}
  ${forLoop(
    "u",
    get("u0"),
    get("u1"),
    i32(1),
    forLoop(
      "t",
      i32(0),
      get("seq"),
      i32(1),
      `${set("srow", rowAddr("src", "srcBthd"))}
    ${set("drow", rowAddr("dst", "dstBthd"))}
    ${set(
      "cs_off",
      mul(
        `(select ${add(mul(`(i32.div_u ${get("u")} ${get("heads")})`, get("seq")), get("t"))} ${get("t")} ${get("perBatch")})`,
        get("hb"),
      ),
    )}
    ${set("crow", add(get("cos"), get("cs_off")))}
    ${set("nrow", add(get("sin"), get("cs_off")))}
    ${forLoop("i", i32(0), get("vb"), i32(16), vecBody)}
    ${forLoop("i", get("vb"), get("hb"), i32(4), scalarBody)}
    ;; dims past rotaryDim: copied (a no-op when src is dst)
    (if (i32.ne (local.get $src) (local.get $dst)) (then
      ${forLoop("i", mul(get("hb"), i32(2)), get("db"), i32(4), `(f32.store ${add(get("drow"), get("i"))} (f32.load ${add(get("srow"), get("i"))}))`)}))`,
    ),
  )})`;
}

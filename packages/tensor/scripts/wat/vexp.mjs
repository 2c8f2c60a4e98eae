// SIMD exp for f32x4. WebAssembly has no exp instruction, so this is the classic Cephes expf
// scheme (S. Moshier, Cephes Math Library, expf.c): n = round(x·log2 e), r = x − n·ln2 with ln2 split
// in two (C1 exact in few bits, C2 the remainder) for an exact reduction, a degree-5 polynomial for
// e^r on |r| ≤ ln2/2, and scaling by 2^n built from the exponent bits. Relative error ≈ 1e-7.
// Inputs are clamped to [-87.33654, 88] so 2^n stays a normal float (results below ~1.2e-38 read as that
// floor instead of 0, which is harmless for softmax sums). The clamp uses pmin/pmax (one
// instruction each, unlike min/max with their NaN fix-ups) in the order that lets NaN through.

const f = (v) => `(f32x4.splat (f32.const ${v}))`;

/** Locals `vexpInline` needs; append them to the local declarations of a function that uses it. */
export const VEXP_LOCALS =
  "(local $ex_x v128) (local $ex_t v128) (local $ex_fx v128) (local $ex_r v128) (local $ex_y v128)";

const POLY = [1.98756915e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
// 1.5·2^23: adding it rounds x·log2 e to the nearest integer n and leaves n in the low mantissa
// bits, so (bits + 127) << 23 is 2^n (the magic constant's own bits shift out). Cheaper than
// f32x4.nearest + i32x4.trunc_sat, which V8 lowers with saturation fix-ups.
const ROUND_MAGIC = 12582912;

/**
 * The same exp as `$vexp`, inlined as an expression: V8 (Node 20) does not inline wasm calls, and a
 * call per four lanes costs as much as the exp itself in the softmax loops.
 */
export function vexpInline(arg) {
  let y = f(POLY[0]);
  for (let i = 1; i < POLY.length; i++) y = `(f32x4.add (f32x4.mul ${y} (local.get $ex_r)) ${f(POLY[i])})`;
  return `(block (result v128)
    (local.set $ex_x (f32x4.pmax (f32x4.pmin ${arg} ${f(88.0)}) ${f(-87.33654)}))
    (local.set $ex_t (f32x4.add (f32x4.mul (local.get $ex_x) ${f(Math.LOG2E)}) ${f(ROUND_MAGIC)}))
    (local.set $ex_fx (f32x4.sub (local.get $ex_t) ${f(ROUND_MAGIC)}))
    (local.set $ex_r (f32x4.sub (f32x4.sub (local.get $ex_x) (f32x4.mul (local.get $ex_fx) ${f(0.693359375)}))
      (f32x4.mul (local.get $ex_fx) ${f(-2.1219444e-4)})))
    (local.set $ex_y ${y})
    (local.set $ex_y (f32x4.add (f32x4.add (f32x4.mul (local.get $ex_y) (f32x4.mul (local.get $ex_r) (local.get $ex_r))) (local.get $ex_r)) ${f(1.0)}))
    (f32x4.mul (local.get $ex_y)
      (i32x4.shl (i32x4.add (local.get $ex_t) (i32x4.splat (i32.const 127))) (i32.const 23))))`;
}

export function vexpWat() {
  return `
(func $vexp (param $x v128) (result v128) ${VEXP_LOCALS}
  ${vexpInline("(local.get $x)")})
(func $exp1 (param $x f32) (result f32)
  (f32x4.extract_lane 0 (call $vexp (f32x4.splat (local.get $x)))))`;
}

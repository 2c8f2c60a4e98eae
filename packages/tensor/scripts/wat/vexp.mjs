// SIMD exp for f32x4. WebAssembly has no exp instruction, so this is the classic Cephes expf
// scheme (S. Moshier, Cephes Math Library, expf.c): n = round(x·log2 e), r = x − n·ln2 with ln2 split
// in two (C1 exact in few bits, C2 the remainder) for an exact reduction, a degree-5 polynomial for
// e^r on |r| ≤ ln2/2, and scaling by 2^n built from the exponent bits. Relative error ≈ 1e-7.
// Inputs are clamped to [-87.33654, 88] so 2^n stays a normal float (results below ~1.2e-38 read as that
// floor instead of 0, which is harmless for softmax sums).

const f = (v) => `(f32x4.splat (f32.const ${v}))`;

/** Locals `vexpInline` needs; append them to the local declarations of a function that uses it. */
export const VEXP_LOCALS = "(local $ex_x v128) (local $ex_fx v128) (local $ex_r v128) (local $ex_y v128)";

/**
 * The same exp as `$vexp`, inlined as an expression: V8 (Node 20) does not inline wasm calls, and a
 * call per four lanes costs as much as the exp itself in the softmax loops.
 */
export function vexpInline(arg) {
  const poly = [1.98756915e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
  let y = f(poly[0]);
  for (let i = 1; i < poly.length; i++) y = `(f32x4.add (f32x4.mul ${y} (local.get $ex_r)) ${f(poly[i])})`;
  return `(block (result v128)
    (local.set $ex_x (f32x4.max (f32x4.min ${arg} ${f(88.0)}) ${f(-87.33654)}))
    (local.set $ex_fx (f32x4.nearest (f32x4.mul (local.get $ex_x) ${f(Math.LOG2E)})))
    (local.set $ex_r (f32x4.sub (f32x4.sub (local.get $ex_x) (f32x4.mul (local.get $ex_fx) ${f(0.693359375)}))
      (f32x4.mul (local.get $ex_fx) ${f(-2.1219444e-4)})))
    (local.set $ex_y ${y})
    (local.set $ex_y (f32x4.add (f32x4.add (f32x4.mul (local.get $ex_y) (f32x4.mul (local.get $ex_r) (local.get $ex_r))) (local.get $ex_r)) ${f(1.0)}))
    (f32x4.mul (local.get $ex_y)
      (i32x4.shl (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $ex_fx)) (i32x4.splat (i32.const 127))) (i32.const 23))))`;
}

export function vexpWat() {
  const poly = [1.98756915e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1];
  let y = f(poly[0]);
  for (let i = 1; i < poly.length; i++) y = `(f32x4.add (f32x4.mul ${y} (local.get $r)) ${f(poly[i])})`;
  return `
(func $vexp (param $x v128) (result v128) (local $fx v128) (local $r v128) (local $y v128)
  (local.set $x (f32x4.max (f32x4.min (local.get $x) ${f(88.0)}) ${f(-87.33654)}))
  (local.set $fx (f32x4.nearest (f32x4.mul (local.get $x) ${f(Math.LOG2E)})))
  (local.set $r (f32x4.sub (f32x4.sub (local.get $x) (f32x4.mul (local.get $fx) ${f(0.693359375)}))
    (f32x4.mul (local.get $fx) ${f(-2.1219444e-4)})))
  (local.set $y ${y})
  (local.set $y (f32x4.add (f32x4.add (f32x4.mul (local.get $y) (f32x4.mul (local.get $r) (local.get $r))) (local.get $r)) ${f(1.0)}))
  (f32x4.mul (local.get $y)
    (i32x4.shl (i32x4.add (i32x4.trunc_sat_f32x4_s (local.get $fx)) (i32x4.splat (i32.const 127))) (i32.const 23))))
(func $exp1 (param $x f32) (result f32)
  (f32x4.extract_lane 0 (call $vexp (f32x4.splat (local.get $x)))))`;
}

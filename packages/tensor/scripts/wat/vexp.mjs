// SIMD exp for f32x4. WebAssembly has no exp instruction, so this is the classic Cephes expf
// scheme (S. Moshier, Cephes Math Library, expf.c): n = round(x·log2 e), r = x − n·ln2 with ln2 split
// in two (C1 exact in few bits, C2 the remainder) for an exact reduction, a degree-5 polynomial for
// e^r on |r| ≤ ln2/2, and scaling by 2^n built from the exponent bits. Relative error ≈ 1e-7.
// Inputs are clamped to [-87.33654, 88] so 2^n stays a normal float (results below ~1.2e-38 read as that
// floor instead of 0, which is harmless for softmax sums). The clamp uses pmin/pmax (one
// instruction each, unlike min/max with their NaN fix-ups) in the order that lets NaN through.

import { forLoop, get, i32, set } from "./dsl.mjs";

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
export function vexpInline(arg, suffix = "") {
  const l = (name) => `$ex_${name}${suffix}`;
  let y = f(POLY[0]);
  for (let i = 1; i < POLY.length; i++) y = `(f32x4.add (f32x4.mul ${y} (local.get ${l("r")})) ${f(POLY[i])})`;
  return `(block (result v128)
    (local.set ${l("x")} (f32x4.pmax (f32x4.pmin ${arg} ${f(88.0)}) ${f(-87.33654)}))
    (local.set ${l("t")} (f32x4.add (f32x4.mul (local.get ${l("x")}) ${f(Math.LOG2E)}) ${f(ROUND_MAGIC)}))
    (local.set ${l("fx")} (f32x4.sub (local.get ${l("t")}) ${f(ROUND_MAGIC)}))
    (local.set ${l("r")} (f32x4.sub (f32x4.sub (local.get ${l("x")}) (f32x4.mul (local.get ${l("fx")}) ${f(0.693359375)}))
      (f32x4.mul (local.get ${l("fx")}) ${f(-2.1219444e-4)})))
    (local.set ${l("y")} ${y})
    (local.set ${l("y")} (f32x4.add (f32x4.add (f32x4.mul (local.get ${l("y")}) (f32x4.mul (local.get ${l("r")}) (local.get ${l("r")}))) (local.get ${l("r")})) ${f(1.0)}))
    (f32x4.mul (local.get ${l("y")})
      (i32x4.shl (i32x4.add (local.get ${l("t")}) (i32x4.splat (i32.const 127))) (i32.const 23))))`;
}

/** Vectors per iteration of `vexpLoop`'s main loop. */
const EXP_UNROLL = 4;

/** Locals `vexpLoop` needs (the exps' temporaries and results $ex_e0.., one set per unrolled vector). */
export const VEXP_LOOP_LOCALS = Array.from(
  { length: EXP_UNROLL },
  (_, u) => `(local $ex_e${u} v128) ${VEXP_LOCALS.replace(/\$ex_(\w+)/g, (_m, name) => `$ex_${name}${u}`)}`,
).join(" ");

/**
 * A vector loop `for (j = from; j < to; j += 4)` (to − from a multiple of 4) whose body is one exp and what
 * is done with it: `arg(offset)` is the exp's argument for the four lanes at j (a v128 expression whose loads
 * add the byte `offset` to their address at j, e.g. `(v128.load offset=${offset} …)`), `effect(e, offset)`
 * the statements that use the result `e`. The main loop takes EXP_UNROLL vectors per iteration, their exps
 * first (independent, so the CPU overlaps them: measured 2× faster than one at a time on V8/x64) and then
 * their effects in the order of the one-vector loop — so every sum accumulates in the same order and the
 * results are bit for bit those of that loop. Uses VEXP_LOOP_LOCALS; `j` names the loop's i32 local.
 */
export function vexpLoop(j, from, to, arg, effect) {
  const main = `(i32.add ${from} (i32.and (i32.sub ${to} ${from}) (i32.const -${EXP_UNROLL * 4})))`;
  const compute = (u) => set(`ex_e${u}`, vexpInline(arg(u * 16), String(u)));
  const use = (u) => effect(get(`ex_e${u}`), u * 16);
  const all = Array.from({ length: EXP_UNROLL }, (_, u) => u);
  return `${forLoop(j, from, main, i32(EXP_UNROLL * 4), `${all.map(compute).join("\n")}\n${all.map(use).join("\n")}`)}
  ${forLoop(j, get(j), to, i32(4), `${compute(0)}\n${use(0)}`)}`;
}

export function vexpWat() {
  return `
(func $vexp (param $x v128) (result v128) ${VEXP_LOCALS}
  ${vexpInline("(local.get $x)")})
(func $exp1 (param $x f32) (result f32)
  (f32x4.extract_lane 0 (call $vexp (f32x4.splat (local.get $x)))))`;
}

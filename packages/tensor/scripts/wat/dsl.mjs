// Tiny string helpers for writing WAT from JS. Labels come from a counter that every module
// generation resets, so the same inputs always give byte-identical WAT (the up-to-date test needs that).

let labelCounter = 0;
export function resetLabels() {
  labelCounter = 0;
}

export const get = (n) => `(local.get $${n})`;
export const set = (n, v) => `(local.set $${n} ${v})`;
export const i32 = (v) => `(i32.const ${v})`;
export const add = (x, y) => `(i32.add ${x} ${y})`;
export const mul = (x, y) => `(i32.mul ${x} ${y})`;
export const sub = (x, y) => `(i32.sub ${x} ${y})`;
export const minU = (x, y) => `(select ${x} ${y} (i32.lt_u ${x} ${y}))`;

/** A `for (v = from; v < to; v += step)` loop over i32 locals (unsigned compare). */
export function forLoop(v, from, to, step, body) {
  const id = `${v}_${labelCounter++}`;
  return `${set(v, from)}
  (block $exit_${id} (loop $loop_${id}
    (br_if $exit_${id} (i32.ge_u ${get(v)} ${to}))
    ${body}
    ${set(v, add(get(v), step))}
    (br $loop_${id})))`;
}

/** a*b + acc, either as a relaxed fused multiply-add or as separate mul + add. */
export function fmaExpr(relaxed, a, b, acc) {
  return relaxed ? `(f32x4.relaxed_madd ${a} ${b} ${acc})` : `(f32x4.add ${acc} (f32x4.mul ${a} ${b}))`;
}

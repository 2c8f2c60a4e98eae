// Matrix-vector path for GEMMs with very few output rows (m < MR, e.g. one token per step when
// decoding with a KV cache): no packing, B is streamed once per output row. With transB each output
// is a dot product of the A row with a contiguous B row; otherwise C's row accumulates axpys of B's
// rows. Work splits over output columns [col0, col1) as well as rows, so one row can use every thread.
import { add, forLoop, get, i32, mul, set, sub } from "./dsl.mjs";
import { FLAG_ACCUMULATE, FLAG_BF16_B, FLAG_TRANS_A, FLAG_TRANS_B } from "./gemm.mjs";

function body(bf16) {
  const es = bf16 ? 2 : 4;
  const sfx = bf16 ? "_bf16" : "";
  return `
      (if (i32.and ${get("flags")} ${i32(FLAG_TRANS_B)})
        (then
          ;; four B rows (output columns) per pass: the A row is read once for all four (see $dot4)
          ${set("j4", add(get("col0"), `(i32.and ${sub(get("col1"), get("col0"))} (i32.const -4))`))}
          ${forLoop(
            "j",
            get("col0"),
            get("j4"),
            i32(4),
            `(call $dot4${sfx} ${get("scratch")} ${add(get("bb"), mul(mul(get("j"), get("k")), i32(es)))} ${mul(get("k"), i32(es))}
              ${get("k")} ${add(get("crow"), mul(get("j"), i32(4)))} ${get("acc")})`,
          )}
          ${forLoop(
            "j",
            get("j4"),
            get("col1"),
            i32(1),
            `${set("d", `(call $dot${sfx} ${get("scratch")} ${add(get("bb"), mul(mul(get("j"), get("k")), i32(es)))} ${get("k")})`)}
            ${set("p", add(get("crow"), mul(get("j"), i32(4))))}
            (f32.store (local.get $p) (if (result f32) (local.get $acc)
              (then (f32.add (f32.load (local.get $p)) (local.get $d))) (else (local.get $d))))`,
          )})
        (else
          (if (i32.eqz (local.get $acc))
            (then (memory.fill ${add(get("crow"), mul(get("col0"), i32(4)))} (i32.const 0) ${mul(sub(get("col1"), get("col0")), i32(4))})))
          ${forLoop(
            "p",
            i32(0),
            get("k"),
            i32(1),
            `(call $axpy${sfx} ${add(get("crow"), mul(get("col0"), i32(4)))}
              ${add(get("bb"), mul(add(mul(get("p"), get("n")), get("col0")), i32(es)))}
              (f32.load ${add(get("scratch"), mul(get("p"), i32(4)))}) ${sub(get("col1"), get("col0"))})`,
          )}))`;
}

export function gemvWat() {
  return `
(func (export "gemv") (param $a i32) (param $b i32) (param $c i32) (param $m i32) (param $n i32) (param $k i32)
  (param $flags i32) (param $sa i32) (param $sb i32) (param $row0 i32) (param $row1 i32) (param $col0 i32)
  (param $col1 i32) (param $scratch i32)
  (local $g i32) (local $bt i32) (local $i i32) (local $ab i32) (local $bb i32) (local $crow i32) (local $p i32)
  (local $j i32) (local $j4 i32) (local $d f32) (local $acc i32) (local $src i32) (local $step i32)
  ${set("acc", `(i32.ne (i32.and ${get("flags")} ${i32(FLAG_ACCUMULATE)}) (i32.const 0))`)}
  ${forLoop(
    "g",
    get("row0"),
    get("row1"),
    i32(1),
    `${set("bt", `(i32.div_u ${get("g")} ${get("m")})`)}
    ${set("i", sub(get("g"), mul(get("bt"), get("m"))))}
    ${set("ab", add(get("a"), mul(mul(get("bt"), get("sa")), i32(4))))}
    ${set("bb", add(get("b"), mul(mul(get("bt"), get("sb")), `(select (i32.const 2) (i32.const 4) (i32.and ${get("flags")} ${i32(FLAG_BF16_B)}))`)))}
    ${set("crow", add(get("c"), mul(mul(get("g"), get("n")), i32(4))))}
    ;; the A row, gathered contiguous into the scratch (A(i, p) = transA ? a[p*m + i] : a[i*k + p])
    (if (i32.and ${get("flags")} ${i32(FLAG_TRANS_A)})
      (then ${set("src", add(get("ab"), mul(get("i"), i32(4))))} ${set("step", mul(get("m"), i32(4)))})
      (else ${set("src", add(get("ab"), mul(mul(get("i"), get("k")), i32(4))))} ${set("step", i32(4))}))
    ${forLoop("p", i32(0), get("k"), i32(1), `(f32.store ${add(get("scratch"), mul(get("p"), i32(4)))} (f32.load (local.get $src))) ${set("src", add(get("src"), get("step")))}`)}
    (if (i32.and ${get("flags")} ${i32(FLAG_BF16_B)})
      (then ${body(true)})
      (else ${body(false)}))`,
  )})`;
}

// WAT generator for the f32 GEMM: C = A·B (+ C), BLIS-style blocking.
//
// Loop nest (Goto & van de Geijn, "Anatomy of High-Performance Matrix Multiplication", 2008):
//   for jc in n step NC          B block  [KC x NC] packed once per (jc, pc), stays in L2/L3
//     for pc in k step KC
//       pack B(pc:pc+kc, jc:jc+nc) into NR-wide panels  [kcp][NR]
//       for ic in rows step MC   A block  [MC x KC] packed into MR-tall panels [kcp][MR], stays in L2
//         for jr in nc step NR
//           for ir in mc step MR  micro-kernel: MR x NR register tile over kcp, B panel stays in L1
// Packing pads k up to a multiple of 4 (kcp) and the tile edges with zeros so the micro-kernel
// always runs a full MR x NR tile with a 4x-unrolled k loop; partial tiles are written back through
// a small scratch tile. The js-stack spec §3 measured a 4x8 tile at ~40 GFLOP/s without K-blocking
// and a drop to 30 GFLOP/s at n=2048; KC blocking is what keeps the B panel resident.

import { add, fmaExpr, forLoop, get, i32, minU, mul, set, sub } from "./dsl.mjs";

export const MR = 4;
export const NR = 8;
export const KC = 256;
export const MC = 128;
export const NC = 2048;
/**
 * k-loop unroll of the micro-kernel (kc is padded to a multiple of 4, so UNROLL must divide 4).
 * Unrolling more made TurboFan (V8 11.3) schedule all loads of the unrolled steps first and spill
 * accumulators; 1 measured fastest on the 2-vCPU Xeon (see README-wasm.md).
 */
export const UNROLL = 1;
/** Bytes of per-thread scratch: packed A block, packed B block, one C tile. */
export const GEMM_SCRATCH_BYTES = MC * KC * 4 + KC * NC * 4 + MR * NR * 4;

/** flags bits shared with src/wasm (keep in sync with GemmFlag in src/wasm/layout.ts). */
export const FLAG_TRANS_A = 1;
export const FLAG_TRANS_B = 2;
export const FLAG_BF16_B = 4;
export const FLAG_ACCUMULATE = 8;

/** The MR x NR micro-kernel over a zero-padded kcp (multiple of 4). */
function microKernel(relaxed) {
  const acc = [];
  for (let r = 0; r < MR; r++) for (let v = 0; v < NR / 4; v++) acc.push(`c${r}_${v}`);
  const locals = [...acc, ...Array.from({ length: NR / 4 }, (_, v) => `b${v}`), "av", "aw"]
    .map((n) => `(local $${n} v128)`)
    .join(" ");
  // A broadcasts: the mul+add variant uses v128.load32_splat (vbroadcastss from memory, no shuffle
  // port); the FMA variant is limited by FMA issue and the shuffle form (one v128 load of the MR packed
  // A values, then lane broadcasts by i8x16.shuffle) measured faster there. Both are register-resident
  // with UNROLL = 1: 8 accumulators + 2 B + A (13 of the 16 xmm registers V8 allocates).
  const SPLAT = !relaxed;
  const step = [];
  for (let u = 0; u < UNROLL; u++) {
    if (!SPLAT) step.push(set("aw", `(v128.load offset=${u * MR * 4} ${get("ap")})`));
    for (let v = 0; v < NR / 4; v++) step.push(set(`b${v}`, `(v128.load offset=${(u * NR + v * 4) * 4} ${get("bp")})`));
    for (let r = 0; r < MR; r++) {
      const lanes = Array.from({ length: 16 }, (_, i) => 4 * r + (i % 4)).join(" ");
      if (SPLAT) step.push(set("av", `(v128.load32_splat offset=${(u * MR + r) * 4} ${get("ap")})`));
      else step.push(set("av", `(i8x16.shuffle ${lanes} ${get("aw")} ${get("aw")})`));
      for (let v = 0; v < NR / 4; v++)
        step.push(set(`c${r}_${v}`, fmaExpr(relaxed, get("av"), get(`b${v}`), get(`c${r}_${v}`))));
    }
  }
  const fullStore = [];
  for (let r = 0; r < MR; r++) {
    for (let v = 0; v < NR / 4; v++) {
      const addr = get("cr");
      const val = `(if (result v128) ${get("beta")} (then (f32x4.add (v128.load offset=${v * 16} ${addr}) ${get(`c${r}_${v}`)})) (else ${get(`c${r}_${v}`)}))`;
      fullStore.push(`(v128.store offset=${v * 16} ${addr} ${val})`);
    }
    fullStore.push(set("cr", add(get("cr"), get("ldc"))));
  }
  const tileStore = [];
  for (let r = 0; r < MR; r++)
    for (let v = 0; v < NR / 4; v++)
      tileStore.push(`(v128.store offset=${(r * NR + v * 4) * 4} ${get("tile")} ${get(`c${r}_${v}`)})`);
  return `
(func $kernel (param $ap i32) (param $bp i32) (param $kcp i32) (param $c i32) (param $ldc i32)
  (param $mr i32) (param $nr i32) (param $beta i32) (param $tile i32)
  ${locals} (local $kk i32) (local $cr i32) (local $r i32) (local $j i32) (local $src i32) (local $dst i32)
  ${set("kk", `(i32.div_u ${get("kcp")} (i32.const ${UNROLL}))`)}
  (if (local.get $kk) (then (loop $k
    ${step.join("\n    ")}
    ${set("ap", add(get("ap"), i32(MR * 4 * UNROLL)))}
    ${set("bp", add(get("bp"), i32(NR * 4 * UNROLL)))}
    ${set("kk", sub(get("kk"), i32(1)))}
    (br_if $k ${get("kk")}))))
  ${set("cr", get("c"))}
  (if (i32.and (i32.eq ${get("mr")} ${i32(MR)}) (i32.eq ${get("nr")} ${i32(NR)}))
    (then ${fullStore.join("\n      ")})
    (else
      ${tileStore.join("\n      ")}
      ${forLoop(
        "r",
        i32(0),
        get("mr"),
        i32(1),
        `${set("src", add(get("tile"), mul(get("r"), i32(NR * 4))))}
        ${set("dst", add(get("c"), mul(get("r"), get("ldc"))))}
        ${forLoop(
          "j",
          i32(0),
          get("nr"),
          i32(1),
          `(f32.store (local.get $dst) (f32.add (f32.load (local.get $src))
              (if (result f32) ${get("beta")} (then (f32.load (local.get $dst))) (else (f32.const 0)))))
          ${set("src", add(get("src"), i32(4)))}
          ${set("dst", add(get("dst"), i32(4)))}`,
        )}`,
      )})))`;
}

/**
 * Packs B(pc:pc+kc, jc:jc+nc) into NR-wide panels [kcp][NR], zero-padded.
 * B element (p, j) lives at b + (trans ? j*k + p : p*n + j) * esize; bf16 widens by `bits << 16`
 * (bfloat16 is the top half of an IEEE binary32).
 */
function packB(trans, bf16) {
  const es = bf16 ? 2 : 4;
  const name = `$pack_b_${trans ? "t" : "n"}_${bf16 ? "bf16" : "f32"}`;
  const load = bf16
    ? `(f32.reinterpret_i32 (i32.shl (i32.load16_u ${get("src")}) (i32.const 16)))`
    : `(f32.load ${get("src")})`;
  // Column c of the panel: source start and stride between consecutive p.
  const colStart = trans
    ? add(get("b"), mul(add(mul(add(get("j"), get("c")), get("k")), get("pc")), i32(es)))
    : add(get("b"), mul(add(mul(get("pc"), get("n")), add(get("j"), get("c"))), i32(es)));
  const colStep = trans ? i32(es) : mul(get("n"), i32(es));
  const scalarPanel = forLoop(
    "c",
    i32(0),
    i32(NR),
    i32(1),
    `${set("dst", add(get("panel"), mul(get("c"), i32(4))))}
    (if (i32.lt_u ${get("c")} ${get("nr")})
      (then
        ${set("src", colStart)}
        ${set("step", colStep)}
        ${forLoop("p", i32(0), get("kc"), i32(1), `(f32.store ${get("dst")} ${load}) ${set("src", add(get("src"), get("step")))} ${set("dst", add(get("dst"), i32(NR * 4)))}`)}
        ${forLoop("p", get("kc"), get("kcp"), i32(1), `(f32.store ${get("dst")} (f32.const 0)) ${set("dst", add(get("dst"), i32(NR * 4)))}`)})
      (else
        ${forLoop("p", i32(0), get("kcp"), i32(1), `(f32.store ${get("dst")} (f32.const 0)) ${set("dst", add(get("dst"), i32(NR * 4)))}`)}))`,
  );
  let fast = "";
  if (!trans) {
    // Full-width panel of row-major B: each p is NR contiguous elements.
    const vload = (off) =>
      bf16
        ? `(i32x4.shl (v128.load16x4_u offset=${off * 2} ${get("src")}) (i32.const 16))`
        : `(v128.load offset=${off * 4} ${get("src")})`;
    const stores = [];
    for (let v = 0; v < NR / 4; v++) stores.push(`(v128.store offset=${v * 16} ${get("dst")} ${vload(v * 4)})`);
    fast = `
    ${set("src", add(get("b"), mul(add(mul(get("pc"), get("n")), get("j")), i32(es))))}
    ${set("step", mul(get("n"), i32(es)))}
    ${set("dst", get("panel"))}
    ${forLoop("p", i32(0), get("kc"), i32(1), `${stores.join(" ")} ${set("src", add(get("src"), get("step")))} ${set("dst", add(get("dst"), i32(NR * 4)))}`)}
    ${forLoop("p", get("kc"), get("kcp"), i32(1), `${Array.from({ length: NR / 4 }, (_, v) => `(v128.store offset=${v * 16} ${get("dst")} (v128.const i32x4 0 0 0 0))`).join(" ")} ${set("dst", add(get("dst"), i32(NR * 4)))}`)}`;
  }
  const body = fast ? `(if (i32.eq ${get("nr")} ${i32(NR)}) (then ${fast}) (else ${scalarPanel}))` : scalarPanel;
  return `
(func ${name} (param $b i32) (param $n i32) (param $k i32) (param $pc i32) (param $kc i32) (param $kcp i32)
  (param $jc i32) (param $nc i32) (param $bp i32)
  (local $jr i32) (local $j i32) (local $nr i32) (local $c i32) (local $p i32) (local $src i32) (local $dst i32)
  (local $step i32) (local $panel i32)
  ${forLoop(
    "jr",
    i32(0),
    get("nc"),
    i32(NR),
    `${set("j", add(get("jc"), get("jr")))}
    ${set("nr", minU(i32(NR), sub(get("nc"), get("jr"))))}
    ${set("panel", add(get("bp"), mul(mul(get("jr"), get("kcp")), i32(4))))}
    ${body}`,
  )})`;
}

/** Packs A(ic:ic+mc, pc:pc+kc) into MR-tall panels [kcp][MR]; A(i,p) at a + (trans ? p*m + i : i*k + p)*4. */
function packA(trans) {
  const name = `$pack_a_${trans ? "t" : "n"}`;
  const rowStart = trans
    ? add(get("a"), mul(add(mul(get("pc"), get("m")), add(get("i"), get("r"))), i32(4)))
    : add(get("a"), mul(add(mul(add(get("i"), get("r")), get("k")), get("pc")), i32(4)));
  const rowStep = trans ? mul(get("m"), i32(4)) : i32(4);
  const scalarPanel = forLoop(
    "r",
    i32(0),
    i32(MR),
    i32(1),
    `${set("dst", add(get("panel"), mul(get("r"), i32(4))))}
    (if (i32.lt_u ${get("r")} ${get("mr")})
      (then
        ${set("src", rowStart)}
        ${set("step", rowStep)}
        ${forLoop("p", i32(0), get("kc"), i32(1), `(f32.store ${get("dst")} (f32.load ${get("src")})) ${set("src", add(get("src"), get("step")))} ${set("dst", add(get("dst"), i32(MR * 4)))}`)}
        ${forLoop("p", get("kc"), get("kcp"), i32(1), `(f32.store ${get("dst")} (f32.const 0)) ${set("dst", add(get("dst"), i32(MR * 4)))}`)})
      (else
        ${forLoop("p", i32(0), get("kcp"), i32(1), `(f32.store ${get("dst")} (f32.const 0)) ${set("dst", add(get("dst"), i32(MR * 4)))}`)}))`,
  );
  let body = scalarPanel;
  if (trans && MR === 4) {
    // Column-major A: the MR rows of one p are contiguous, one v128 per p.
    const fast = `
    ${set("src", add(get("a"), mul(add(mul(get("pc"), get("m")), get("i")), i32(4))))}
    ${set("step", mul(get("m"), i32(4)))}
    ${set("dst", get("panel"))}
    ${forLoop("p", i32(0), get("kc"), i32(1), `(v128.store ${get("dst")} (v128.load ${get("src")})) ${set("src", add(get("src"), get("step")))} ${set("dst", add(get("dst"), i32(16)))}`)}
    ${forLoop("p", get("kc"), get("kcp"), i32(1), `(v128.store ${get("dst")} (v128.const i32x4 0 0 0 0)) ${set("dst", add(get("dst"), i32(16)))}`)}`;
    body = `(if (i32.eq ${get("mr")} ${i32(MR)}) (then ${fast}) (else ${scalarPanel}))`;
  }
  if (!trans && MR === 4) {
    // Row-major A: load 4 k-values of each of the 4 rows and transpose the 4x4 block with shuffles.
    const lanes = (...l) => l.flatMap((x) => [4 * x, 4 * x + 1, 4 * x + 2, 4 * x + 3]).join(" ");
    const shuf = (l, x, y) => `(i8x16.shuffle ${lanes(...l)} ${x} ${y})`;
    const rowLoad = (r) => `(v128.load ${r === 0 ? get("src") : add(get("src"), mul(get("step"), i32(r)))})`;
    const fast = `
    ${set("src", add(get("a"), mul(add(mul(get("i"), get("k")), get("pc")), i32(4))))}
    ${set("step", mul(get("k"), i32(4)))}
    ${set("dst", get("panel"))}
    ${forLoop(
      "p",
      i32(0),
      `(i32.and ${get("kc")} (i32.const -4))`,
      i32(4),
      `${set("t0", shuf([0, 4, 1, 5], rowLoad(0), rowLoad(1)))}
      ${set("t1", shuf([2, 6, 3, 7], rowLoad(0), rowLoad(1)))}
      ${set("t2", shuf([0, 4, 1, 5], rowLoad(2), rowLoad(3)))}
      ${set("t3", shuf([2, 6, 3, 7], rowLoad(2), rowLoad(3)))}
      (v128.store offset=0 ${get("dst")} ${shuf([0, 1, 4, 5], get("t0"), get("t2"))})
      (v128.store offset=16 ${get("dst")} ${shuf([2, 3, 6, 7], get("t0"), get("t2"))})
      (v128.store offset=32 ${get("dst")} ${shuf([0, 1, 4, 5], get("t1"), get("t3"))})
      (v128.store offset=48 ${get("dst")} ${shuf([2, 3, 6, 7], get("t1"), get("t3"))})
      ${set("src", add(get("src"), i32(16)))}
      ${set("dst", add(get("dst"), i32(64)))}`,
    )}
    ${forLoop(
      "p",
      `(i32.and ${get("kc")} (i32.const -4))`,
      get("kc"),
      i32(1),
      `${[0, 1, 2, 3].map((r) => `(f32.store offset=${r * 4} ${get("dst")} (f32.load ${r === 0 ? get("src") : add(get("src"), mul(get("step"), i32(r)))}))`).join(" ")}
      ${set("src", add(get("src"), i32(4)))}
      ${set("dst", add(get("dst"), i32(16)))}`,
    )}
    ${forLoop("p", get("kc"), get("kcp"), i32(1), `(v128.store ${get("dst")} (v128.const i32x4 0 0 0 0)) ${set("dst", add(get("dst"), i32(16)))}`)}`;
    body = `(if (i32.eq ${get("mr")} ${i32(MR)}) (then ${fast}) (else ${scalarPanel}))`;
  }
  return `
(func ${name} (param $a i32) (param $m i32) (param $k i32) (param $ic i32) (param $mc i32) (param $pc i32)
  (param $kc i32) (param $kcp i32) (param $ap i32)
  (local $ir i32) (local $i i32) (local $mr i32) (local $r i32) (local $p i32) (local $src i32) (local $dst i32)
  (local $step i32) (local $panel i32) (local $t0 v128) (local $t1 v128) (local $t2 v128) (local $t3 v128)
  ${forLoop(
    "ir",
    i32(0),
    get("mc"),
    i32(MR),
    `${set("i", add(get("ic"), get("ir")))}
    ${set("mr", minU(i32(MR), sub(get("mc"), get("ir"))))}
    ${set("panel", add(get("ap"), mul(mul(get("ir"), get("kcp")), i32(4))))}
    ${body}`,
  )})`;
}

/** Dispatches to the packing variant selected by the flags. */
function packDispatch() {
  return `
(func $pack_b (param $flags i32) (param $b i32) (param $n i32) (param $k i32) (param $pc i32) (param $kc i32)
  (param $kcp i32) (param $jc i32) (param $nc i32) (param $bp i32)
  (if (i32.and ${get("flags")} ${i32(FLAG_BF16_B)})
    (then (if (i32.and ${get("flags")} ${i32(FLAG_TRANS_B)})
      (then (call $pack_b_t_bf16 ${["b", "n", "k", "pc", "kc", "kcp", "jc", "nc", "bp"].map(get).join(" ")}))
      (else (call $pack_b_n_bf16 ${["b", "n", "k", "pc", "kc", "kcp", "jc", "nc", "bp"].map(get).join(" ")}))))
    (else (if (i32.and ${get("flags")} ${i32(FLAG_TRANS_B)})
      (then (call $pack_b_t_f32 ${["b", "n", "k", "pc", "kc", "kcp", "jc", "nc", "bp"].map(get).join(" ")}))
      (else (call $pack_b_n_f32 ${["b", "n", "k", "pc", "kc", "kcp", "jc", "nc", "bp"].map(get).join(" ")}))))))
(func $pack_a (param $flags i32) (param $a i32) (param $m i32) (param $k i32) (param $ic i32) (param $mc i32)
  (param $pc i32) (param $kc i32) (param $kcp i32) (param $ap i32)
  (if (i32.and ${get("flags")} ${i32(FLAG_TRANS_A)})
    (then (call $pack_a_t ${["a", "m", "k", "ic", "mc", "pc", "kc", "kcp", "ap"].map(get).join(" ")}))
    (else (call $pack_a_n ${["a", "m", "k", "ic", "mc", "pc", "kc", "kcp", "ap"].map(get).join(" ")}))))`;
}

/** One matrix (one batch entry), output rows [i0, i1). */
function gemmBlock() {
  return `
(func $gemm_block (param $a i32) (param $b i32) (param $c i32) (param $m i32) (param $n i32) (param $k i32)
  (param $flags i32) (param $i0 i32) (param $i1 i32) (param $scratch i32)
  (local $ap i32) (local $bp i32) (local $tile i32) (local $jc i32) (local $nc i32) (local $pc i32) (local $kc i32)
  (local $kcp i32) (local $beta i32) (local $ic i32) (local $mc i32) (local $jr i32) (local $nr i32) (local $ir i32)
  (local $mr i32) (local $ldc i32)
  ${set("ap", get("scratch"))}
  ${set("bp", add(get("scratch"), i32(MC * KC * 4)))}
  ${set("tile", add(get("bp"), i32(KC * NC * 4)))}
  ${set("ldc", mul(get("n"), i32(4)))}
  ${forLoop(
    "jc",
    i32(0),
    get("n"),
    i32(NC),
    `${set("nc", minU(i32(NC), sub(get("n"), get("jc"))))}
    ${forLoop(
      "pc",
      i32(0),
      get("k"),
      i32(KC),
      `${set("kc", minU(i32(KC), sub(get("k"), get("pc"))))}
      ${set("kcp", `(i32.and (i32.add ${get("kc")} (i32.const 3)) (i32.const -4))`)}
      ${set("beta", `(i32.or (i32.ne ${get("pc")} (i32.const 0)) (i32.ne (i32.and ${get("flags")} ${i32(FLAG_ACCUMULATE)}) (i32.const 0)))`)}
      (call $pack_b ${["flags", "b", "n", "k", "pc", "kc", "kcp", "jc", "nc", "bp"].map(get).join(" ")})
      ${forLoop(
        "ic",
        get("i0"),
        get("i1"),
        i32(MC),
        `${set("mc", minU(i32(MC), sub(get("i1"), get("ic"))))}
        (call $pack_a ${["flags", "a", "m", "k", "ic", "mc", "pc", "kc", "kcp", "ap"].map(get).join(" ")})
        ${forLoop(
          "jr",
          i32(0),
          get("nc"),
          i32(NR),
          `${set("nr", minU(i32(NR), sub(get("nc"), get("jr"))))}
          ${forLoop(
            "ir",
            i32(0),
            get("mc"),
            i32(MR),
            `${set("mr", minU(i32(MR), sub(get("mc"), get("ir"))))}
            (call $kernel
              ${add(get("ap"), mul(mul(get("ir"), get("kcp")), i32(4)))}
              ${add(get("bp"), mul(mul(get("jr"), get("kcp")), i32(4)))}
              ${get("kcp")}
              ${add(get("c"), mul(add(mul(add(get("ic"), get("ir")), get("n")), add(get("jc"), get("jr"))), i32(4)))}
              ${get("ldc")} ${get("mr")} ${get("nr")} ${get("beta")} ${get("tile")})`,
          )}`,
        )}`,
      )}`,
    )}`,
  )})`;
}

/**
 * Rows [row0, row1) of the stacked [batch*m] output row space, so one call serves both "many rows of
 * one matrix" and "many small matrices". Strides are in elements (bf16 B: 2-byte elements); C is dense
 * [batch][m][n].
 */
function gemmRows() {
  return `
(func $gemm_rows (param $a i32) (param $b i32) (param $c i32) (param $m i32) (param $n i32) (param $k i32)
  (param $flags i32) (param $sa i32) (param $sb i32) (param $row0 i32) (param $row1 i32) (param $scratch i32)
  (local $g i32) (local $bt i32) (local $i0 i32) (local $i1 i32) (local $esb i32)
  ${set("esb", `(select (i32.const 2) (i32.const 4) (i32.and ${get("flags")} ${i32(FLAG_BF16_B)}))`)}
  ${set("g", get("row0"))}
  (block $done (loop $batches
    (br_if $done (i32.ge_u ${get("g")} ${get("row1")}))
    ${set("bt", `(i32.div_u ${get("g")} ${get("m")})`)}
    ${set("i0", sub(get("g"), mul(get("bt"), get("m"))))}
    ${set("i1", minU(get("m"), sub(get("row1"), mul(get("bt"), get("m")))))}
    (call $gemm_block
      ${add(get("a"), mul(mul(get("bt"), get("sa")), i32(4)))}
      ${add(get("b"), mul(mul(get("bt"), get("sb")), get("esb")))}
      ${add(get("c"), mul(mul(mul(get("bt"), get("m")), get("n")), i32(4)))}
      ${["m", "n", "k", "flags", "i0", "i1", "scratch"].map(get).join(" ")})
    ${set("g", add(mul(get("bt"), get("m")), get("i1")))}
    (br $batches))))`;
}

/**
 * Exported entry. With $counter = 0 the caller computes rows [row0, row1). Otherwise the threads of one
 * call share a work queue: each repeatedly takes the next chunk of $chunk rows of [row0, row1) with an
 * atomic add on the i32 at $counter, so a thread that is descheduled (a shared or busy machine) just
 * takes fewer chunks instead of making everyone wait for its fixed share.
 */
function gemmEntry() {
  return `
(func (export "gemm") (param $a i32) (param $b i32) (param $c i32) (param $m i32) (param $n i32) (param $k i32)
  (param $flags i32) (param $sa i32) (param $sb i32) (param $row0 i32) (param $row1 i32) (param $scratch i32)
  (param $counter i32) (param $chunk i32)
  (local $r0 i32)
  (if (i32.eqz ${get("counter")})
    (then (call $gemm_rows ${["a", "b", "c", "m", "n", "k", "flags", "sa", "sb", "row0", "row1", "scratch"].map(get).join(" ")}) (return)))
  (loop $next
    ${set("r0", add(get("row0"), mul(`(i32.atomic.rmw.add ${get("counter")} (i32.const 1))`, get("chunk"))))}
    (if (i32.lt_u ${get("r0")} ${get("row1")})
      (then
        (call $gemm_rows ${["a", "b", "c", "m", "n", "k", "flags", "sa", "sb", "r0"].map(get).join(" ")}
          ${minU(get("row1"), add(get("r0"), get("chunk")))} ${get("scratch")})
        (br $next)))))`;
}

/** All GEMM functions of the module. */
export function gemmWat({ relaxed }) {
  return [
    microKernel(relaxed),
    packB(false, false),
    packB(true, false),
    packB(false, true),
    packB(true, true),
    packA(false),
    packA(true),
    packDispatch(),
    gemmBlock(),
    gemmRows(),
    gemmEntry(),
  ].join("\n");
}

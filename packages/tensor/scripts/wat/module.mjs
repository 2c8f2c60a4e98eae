// Assembles the kernel module text. Variants: plain SIMD vs relaxed SIMD (f32x4.relaxed_madd in the
// GEMM micro-kernel), and a shared memory import (threads) vs a plain one (for pages that are not
// cross-origin isolated, where SharedArrayBuffer is unavailable). Every variant exports the same functions.
import { adamwWat } from "./adamw.mjs";
import { attentionWat } from "./attention.mjs";
import { attentionTilesWat } from "./attention-tiles.mjs";
import { crossEntropyWat } from "./cross-entropy.mjs";
import { elementwiseWat } from "./elementwise.mjs";
import { resetLabels } from "./dsl.mjs";
import { gemmWat } from "./gemm.mjs";
import { gemvWat } from "./gemv.mjs";
import { klDivergenceWat } from "./kl-divergence.mjs";
import { rmsNormBackwardWat, rmsNormWat } from "./rmsnorm.mjs";
import { ropeWat } from "./rope.mjs";
import { swigluWat } from "./swiglu.mjs";
import { vectorWat } from "./vector.mjs";
import { vexpWat } from "./vexp.mjs";

/** Largest memory the module accepts (pages of 64 KiB): the whole wasm32 address space. */
export const MAX_PAGES = 65536;

export function kernelsWat({ relaxed, shared }) {
  resetLabels();
  return `(module
(import "env" "memory" (memory 1 ${MAX_PAGES}${shared ? " shared" : ""}))
(import "env" "log" (func $log (param f64) (result f64)))
${vexpWat()}
${vectorWat()}
${gemmWat({ relaxed })}
${gemvWat()}
${rmsNormWat()}
${crossEntropyWat()}
${klDivergenceWat()}
${attentionWat({ relaxed })}
${swigluWat()}
${adamwWat()}
${ropeWat()}
${rmsNormBackwardWat()}
${elementwiseWat()}
${attentionTilesWat()}
)
`;
}

/** Feature probes: the smallest modules that validate only with SIMD / relaxed SIMD. */
export const SIMD_PROBE_WAT = `(module (func (param v128 v128) (result v128) (f32x4.add (local.get 0) (local.get 1))))`;
export const RELAXED_PROBE_WAT = `(module (func (param v128 v128 v128) (result v128) (f32x4.relaxed_madd (local.get 0) (local.get 1) (local.get 2))))`;

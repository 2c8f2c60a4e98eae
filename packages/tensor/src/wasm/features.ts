// Feature detection for the WASM kernels (js-stack spec §3): SIMD is on by default in Node 20 and
// current browsers; relaxed SIMD (f32x4.relaxed_madd) is off in Node 20 unless the V8 flag
// --experimental-wasm-relaxed-simd is set before compiling. The flag is never set at import:
// enableRelaxedSimd() is an explicit opt-in.
import { decodeBase64 } from "./base64.js";
import { WASM_PROBE_RELAXED, WASM_PROBE_SIMD } from "./kernels.generated.js";

function validates(base64: string): boolean {
  if (typeof WebAssembly !== "object" || typeof WebAssembly.validate !== "function") return false;
  try {
    return WebAssembly.validate(decodeBase64(base64));
  } catch {
    return false;
  }
}

/** True when this engine validates WebAssembly fixed-width SIMD (v128, f32x4). */
export function wasmSimdSupported(): boolean {
  return validates(WASM_PROBE_SIMD);
}

/** True when this engine validates relaxed SIMD right now (f32x4.relaxed_madd). */
export function relaxedSimdSupported(): boolean {
  return validates(WASM_PROBE_RELAXED);
}

/** True when shared WebAssembly memory (and so worker threads) can be created here. */
export function sharedMemorySupported(): boolean {
  if (typeof SharedArrayBuffer !== "function" || typeof Atomics !== "object") return false;
  try {
    const mem = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
    return mem.buffer instanceof SharedArrayBuffer;
  } catch {
    return false;
  }
}

/**
 * Node only: turns on V8's relaxed-SIMD flag for this process (V8 flags are process-wide, so workers
 * see it too) and returns whether relaxed SIMD now validates. Call it before createWasmKernels().
 * In browsers, or where `process.getBuiltinModule` is missing (Node < 20.16), it changes nothing and
 * returns the current support. Node's docs for v8.setFlagsFromString warn that changing settings after
 * the VM has started may behave unpredictably; this flag only makes the validator accept the relaxed-SIMD
 * opcodes, which is why it is offered, but only as an explicit opt-in.
 */
export function enableRelaxedSimd(): boolean {
  if (relaxedSimdSupported()) return true;
  const proc = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process;
  const v8 = proc?.getBuiltinModule?.("node:v8") as { setFlagsFromString?: (flags: string) => void } | undefined;
  if (v8?.setFlagsFromString) v8.setFlagsFromString("--experimental-wasm-relaxed-simd");
  return relaxedSimdSupported();
}

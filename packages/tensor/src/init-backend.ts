import { type BackendName, hasBackend, setBackend } from "./backend.js";
import type { BaseBackendOptions } from "./backend-options.js";
import { initGpujsBackend } from "./backends/gpujs.js";
import {
  type AutoBackendOptions,
  type BackendChoice,
  describeBackend,
  initAutoBackend,
} from "./backends/native/auto.js";
import { type NativeBackendOptions, initNativeBackend } from "./backends/native/index.js";
import { initWasmBackend } from "./backends/wasm.js";
import { type WebGPUBackendOptions, initWebGPUBackend } from "./backends/webgpu/index.js";
import { BackendError } from "./errors.js";

/** initBackend's options: the common ones and each built-in backend's own. */
export interface InitBackendOptions
  extends BaseBackendOptions,
    NativeBackendOptions,
    AutoBackendOptions,
    WebGPUBackendOptions {}

type Initialiser = (options: InitBackendOptions) => Promise<void>;
// Built-in backends are imported here (not registered by module side effects), so bundlers that
// drop unused modules still keep them reachable from initBackend.
const initialisers = new Map<string, Initialiser>([
  ["wasm", initWasmBackend],
  ["gpujs", initGpujsBackend],
  ["native", initNativeBackend],
  ["webgpu", initWebGPUBackend],
]);

/** Backends that need async setup (wasm compile, workers, GPU contexts) register an initialiser here. */
export function registerBackendInitialiser(name: BackendName, init: Initialiser): void {
  initialisers.set(name, init);
}

/**
 * Prepare a backend (compile kernels, start workers) and, by default, make it active. "auto" picks
 * native (a BLAS loads), else wasm (webgpu first when `webgpu: true`); the returned choice's `line`
 * says which and why.
 */
export async function initBackend(
  name: BackendName | "auto",
  options: InitBackendOptions = {},
): Promise<BackendChoice> {
  if (name === "auto") {
    const choice = await initAutoBackend(initBackend, (n) => hasBackend(n) || initialisers.has(n), options);
    if (choice.backend === "js" && (options.activate ?? true)) setBackend("js");
    return choice;
  }
  if (!hasBackend(name)) {
    const init = initialisers.get(name);
    if (!init)
      throw new BackendError(
        `initBackend: unknown backend "${name}" (known: js, ${[...initialisers.keys()].join(", ")})`,
      );
    await init(options);
  }
  if (options.activate ?? true) setBackend(name);
  return { backend: name, reason: "requested", line: describeBackend(name, "requested"), skipped: [] };
}

// Kernels are registered per backend under a name (tfjs-core style). Ops allocate their outputs through the
// active backend's storage (storage.ts) and call kernels by name; gradients are defined once in the ops, so a
// new backend adds storage and kernels only. A kernel the active backend lacks falls back to the js reference
// when the backend's memory is host-visible (js, wasm, host-storage backends); otherwise MissingKernelError.
// The kernel contract itself (what each kernel computes, on what arrays) is in kernel-contract.ts.
import { jsKernels } from "./backends/js/index.js";
import { jsStorage } from "./backends/js/storage.js";
import type { HostArrays, KernelArrays, KernelName, Kernels } from "./kernel-contract.js";
import { BackendError } from "./errors.js";
import { type MemoryInfo, MissingKernelError, type StorageBackend } from "./storage.js";

export * from "./kernel-contract.js";

export type BackendName = "js" | "wasm" | "gpujs" | (string & {});

interface BackendEntry {
  storage: StorageBackend;
  kernels: Partial<Kernels<KernelArrays>>;
}

interface BackendRegistry {
  backends: Map<string, BackendEntry>;
  reference: Kernels;
  active: BackendName;
  activeEntry: BackendEntry;
}

// One registry per process, not per copy of this module: a program that loads both the ESM and the CJS build
// (or two bundles) must see the backend `initBackend` chose in either. The first copy to load creates it.
const REGISTRY_KEY = Symbol.for("kiln.tensor.registry.v2");
const registry: BackendRegistry = ((globalThis as Record<symbol, unknown>)[REGISTRY_KEY] ??=
  newRegistry()) as BackendRegistry;

function newRegistry(): BackendRegistry {
  const js: BackendEntry = { storage: jsStorage, kernels: jsKernels };
  return { backends: new Map([["js", js]]), reference: jsKernels, active: "js", activeEntry: js };
}

/**
 * Register (or extend) a backend's kernels. A backend registered only through this function (no
 * `registerBackend`) stores its tensors in host arrays like js. The js backend must define all kernels.
 */
export function registerKernels<T extends KernelArrays = HostArrays>(
  backend: BackendName,
  kernels: Partial<Kernels<T>>,
): void {
  const existing = registry.backends.get(backend);
  const entry: BackendEntry = {
    storage: existing?.storage ?? jsStorage,
    kernels: { ...(existing?.kernels ?? {}), ...(kernels as Partial<Kernels<KernelArrays>>) },
  };
  registry.backends.set(backend, entry);
  if (backend === "js") registry.reference = entry.kernels as unknown as Kernels;
  if (backend === registry.active) registry.activeEntry = entry;
}

/**
 * Register a backend that owns its memory (`storage`, see storage.ts) with its kernels, typed over the
 * backend's kernel-argument arrays. Replaces an earlier registration of the same name.
 */
export function registerBackend<T extends KernelArrays>(
  storage: StorageBackend<unknown, unknown>,
  kernels: Partial<Kernels<T>>,
): void {
  const entry: BackendEntry = { storage, kernels: kernels as Partial<Kernels<KernelArrays>> };
  registry.backends.set(storage.name, entry);
  if (storage.name === registry.active) registry.activeEntry = entry;
}

/** Remove a backend's kernels (after its resources are released); the active backend falls back to js. */
export function unregisterBackend(name: BackendName): void {
  if (name === "js") throw new BackendError("unregisterBackend: the js reference backend cannot be removed");
  registry.backends.delete(name);
  if (registry.active === name) {
    registry.active = "js";
    registry.activeEntry = registry.backends.get("js") as BackendEntry;
  }
}

export function hasBackend(name: BackendName): boolean {
  return registry.backends.has(name);
}

export function listBackends(): string[] {
  return [...registry.backends.keys()];
}

/** Select the backend ops use from now on. It must be registered (see `initBackend`). */
export function setBackend(name: BackendName): void {
  const entry = registry.backends.get(name);
  if (!entry) {
    throw new BackendError(
      `setBackend: backend "${name}" is not registered (registered: ${listBackends().join(", ")}); ` +
        `initialise it first, e.g. await initBackend("${name}")`,
    );
  }
  registry.active = name;
  registry.activeEntry = entry;
}

export function getBackend(): BackendName {
  return registry.active;
}

/** The storage of the active backend (where ops allocate their outputs). */
export function activeStorage(): StorageBackend {
  return registry.activeEntry.storage;
}

/** The storage of a registered backend. */
export function storageOf(name: BackendName): StorageBackend {
  const entry = registry.backends.get(name);
  if (!entry) throw new BackendError(`storageOf: backend "${name}" is not registered`);
  return entry.storage;
}

/** Memory counters of one backend's storage (default: the active backend). Host-storage backends share js's. */
export function memory(name: BackendName = registry.active): MemoryInfo {
  return storageOf(name).memory();
}

/**
 * The active backend's kernel; where it lacks one, the js reference kernel if the backend's memory is
 * host-visible, otherwise a MissingKernelError naming the kernel and the backend.
 */
export function kernel<K extends KernelName>(name: K): Kernels[K] {
  const impl = registry.activeEntry.kernels[name];
  if (impl) return impl as unknown as Kernels[K];
  if (registry.activeEntry.storage.hostVisible) return registry.reference[name];
  throw new MissingKernelError(
    `kernel "${name}" is not implemented by backend "${registry.active}", whose memory the js fallback cannot read`,
  );
}

/** Whether `kernel(name)` works on the active backend: its own kernel, or the js one on host-visible memory. */
export function hasKernel(name: KernelName): boolean {
  return registry.activeEntry.kernels[name] !== undefined || registry.activeEntry.storage.hostVisible;
}

/** The js reference kernel regardless of the active backend (parity tests). */
export function referenceKernel<K extends KernelName>(name: K): Kernels[K] {
  return registry.reference[name];
}

/** The kernels a backend registered itself (no fallback), e.g. to list what a device backend lacks. */
export function backendKernels(name: BackendName): Partial<Kernels<KernelArrays>> {
  const entry = registry.backends.get(name);
  if (!entry) throw new BackendError(`backendKernels: backend "${name}" is not registered`);
  return entry.kernels;
}

/** Run `fn` with `name` as the active backend, restoring the previous one after. */
export function withBackend<T>(name: BackendName, fn: () => T): T {
  const previous = registry.active;
  setBackend(name);
  try {
    return fn();
  } finally {
    setBackend(previous);
  }
}

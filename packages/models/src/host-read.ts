// The helpers that read tensors on the host (generation, scoring) are written once, as generators that
// yield each tensor whose f32 values they need and get the values back. `readSync` drives one where
// the host reads backend memory without waiting (js, wasm) and refuses, naming the async variant, where
// it cannot (WebGPU); `readAsync` drives it on every backend.
import { type Tensor, activeStorage, getBackend, noGrad } from "@kiln/tensor";
import { SyncReadError } from "./errors.js";

/** A computation that yields the tensors it reads and receives their values as f32. */
export type HostReads<R> = Generator<Tensor, R, Float32Array>;

/** Run `steps` with synchronous reads; before any work, a SyncReadError if the active backend's memory is not host-readable. */
export function readSync<R>(helper: string, asyncVariant: string, steps: () => HostReads<R>): R {
  if (!activeStorage().hostVisible) throw new SyncReadError(helper, asyncVariant, getBackend());
  const it = steps();
  let data: Float32Array | undefined;
  for (;;) {
    const r = noGrad(() => it.next(data as Float32Array));
    if (r.done) return r.value;
    const backend = r.value.storage.backend;
    // The model's weights may live on another backend than the active one.
    if (!backend.hostVisible) throw new SyncReadError(helper, asyncVariant, backend.name);
    data = r.value.toFloat32Array();
  }
}

/** Run `steps` on every backend, awaiting each read. */
export async function readAsync<R>(steps: () => HostReads<R>): Promise<R> {
  const it = steps();
  let data: Float32Array | undefined;
  for (;;) {
    const r = noGrad(() => it.next(data as Float32Array));
    if (r.done) return r.value;
    data = await r.value.toFloat32ArrayAsync();
  }
}

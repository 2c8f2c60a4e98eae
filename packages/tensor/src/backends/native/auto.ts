// `initBackend("auto")`: the fastest backend that starts here, with one line saying what was
// chosen and why (what was skipped and the reason), so a run's log shows what it measured.
import type { BackendName } from "../../backend.js";
import type { BaseBackendOptions } from "../../backend-options.js";
import { nativeBackendInfo } from "./index.js";

export interface BackendChoice {
  backend: BackendName;
  /** Why this one: "requested", or what was skipped before it. */
  reason: string;
  /** One line for logs, e.g. "kiln backend: native (openblas …, core Cooperlake, 2 threads, bf16 widen)". */
  line: string;
  /** Backends tried before it and why each did not start. */
  skipped: { backend: BackendName; reason: string }[];
}

export interface AutoBackendOptions {
  /** Try webgpu first (where a webgpu backend is registered and a GPU adapter starts). Default false. */
  webgpu?: boolean;
  /** Print the line to stderr (default false; it is always in the returned choice). */
  report?: boolean;
}

function firstLine(err: unknown): string {
  return String(err instanceof Error ? err.message : err).split("\n")[0];
}

/** Describe the active backend in one line. */
export function describeBackend(backend: BackendName, reason: string): string {
  const native = backend === "native" ? nativeBackendInfo() : null;
  const detail = native ? native.summary : reason;
  return `kiln backend: ${backend} (${detail})`;
}

/** Tries webgpu (when asked), native, wasm in that order; js when none starts. */
export async function initAutoBackend<Options extends BaseBackendOptions & AutoBackendOptions>(
  init: (name: BackendName, options: Options) => Promise<unknown>,
  known: (name: string) => boolean,
  options: Options,
): Promise<BackendChoice> {
  const order: BackendName[] = [...(options.webgpu ? ["webgpu"] : []), "native", "wasm"];
  const skipped: BackendChoice["skipped"] = [];
  let chosen: BackendName = "js";
  for (const name of order) {
    if (!known(name)) {
      skipped.push({ backend: name, reason: "not built in" });
      continue;
    }
    try {
      await init(name, { ...options, activate: options.activate ?? true });
      chosen = name;
      break;
    } catch (err) {
      skipped.push({ backend: name, reason: firstLine(err) });
    }
  }
  const reason = skipped.length ? skipped.map((s) => `${s.backend}: ${s.reason}`).join("; ") : "first choice";
  const line =
    chosen === "native"
      ? describeBackend(chosen, reason) + (skipped.length ? ` [skipped ${reason}]` : "")
      : `kiln backend: ${chosen} (${reason})`;
  if (options.report) process.stderr.write(`${line}\n`);
  return { backend: chosen, reason, line, skipped };
}

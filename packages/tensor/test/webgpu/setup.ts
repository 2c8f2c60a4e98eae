// Shared setup of the WebGPU suites: one runtime per file, or one clear line saying why the suite
// did not run. With KILN_WEBGPU=required (set where the setup installed a Vulkan driver) a missing
// adapter fails the run instead.
import { it } from "vitest";
import { WEBGPU_INSTALL_HINT } from "../../src/backends/webgpu/device.js";
import { WebGPURuntime, type WebGPURuntimeOptions } from "../../src/backends/webgpu/runtime.js";

export interface WebGPUSuite {
  runtime: WebGPURuntime | null;
  reason: string | null;
}

export async function openWebGPU(options: WebGPURuntimeOptions = {}): Promise<WebGPUSuite> {
  try {
    return { runtime: await WebGPURuntime.create(options), reason: null };
  } catch (err) {
    return { runtime: null, reason: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * Registers the single line reporting a missing adapter: a failing test when KILN_WEBGPU=required,
 * otherwise a skipped test whose name says the suite did not run and how to install the adapter.
 */
export function reportMissing(suite: WebGPUSuite): boolean {
  if (suite.runtime) return false;
  const reason = suite.reason ?? "unknown";
  const line = `webgpu suite NOT RUN: ${reason.includes(WEBGPU_INSTALL_HINT) ? reason : `${reason}; install: ${WEBGPU_INSTALL_HINT}`}`;
  if (process.env.KILN_WEBGPU === "required") {
    it("webgpu adapter present (KILN_WEBGPU=required)", () => {
      throw new Error(line);
    });
  } else {
    process.stderr.write(`${line}\n`);
    it.skip(line, () => {});
  }
  return true;
}

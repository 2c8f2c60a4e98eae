// Shared tsup preset: every package builds ESM + CJS + .d.ts from src/index.ts
// (plus extra entries such as a CLI) for Node 20 and browsers.
import { defineConfig } from "tsup";

export function kilnTsup(overrides = {}) {
  return defineConfig({
    entry: ["src/index.ts"],
    format: ["esm", "cjs"],
    dts: true,
    sourcemap: true,
    clean: true,
    target: "node20",
    splitting: false,
    treeshake: true,
    // import.meta.url in the CJS build (packages locate their shipped data files with it).
    shims: true,
    ...overrides,
  });
}

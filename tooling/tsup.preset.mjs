// Shared tsup preset: every package builds ESM + CJS + .d.ts from src/index.ts
// (plus extra entries such as a CLI) for Node 20 and browsers. A package with several entries sets
// `splitting: true`, so code they share lives in one chunk and `instanceof` holds across its entry points.
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
    // The maps point at ../src/*.ts, which the tarball ships once; embedding the sources in every .js.map and
    // .cjs.map as well would carry the TypeScript three times.
    esbuildOptions(options) {
      options.sourcesContent = false;
    },
    ...overrides,
  });
}

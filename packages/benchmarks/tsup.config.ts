import { kilnTsup } from "../../tooling/tsup.preset.mjs";

// The main entry re-exports the three benchmarks; splitting keeps one copy of each in a shared chunk, so
// `@kiln/benchmarks` and `@kiln/benchmarks/<name>` hand out the same classes (and the tarball holds them once).
export default kilnTsup({
  entry: {
    index: "src/index.ts",
    "clembench/index": "src/clembench/index.ts",
    "questworld/index": "src/questworld/index.ts",
    "tau2/index": "src/tau2/index.ts",
  },
  splitting: true,
});

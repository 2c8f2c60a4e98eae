import { kilnTsup } from "../../tooling/tsup.preset.mjs";

// `@kiln/rollout` is `./core` plus the Node-only modules; splitting keeps one copy of core in a shared chunk,
// so HttpPolicy and the error classes are the same objects through either entry point.
export default kilnTsup({
  entry: { index: "src/index.ts", core: "src/core.ts" },
  splitting: true,
});

import { kilnTsup } from "../../tooling/tsup.preset.mjs";

export default kilnTsup({
  entry: {
    index: "src/index.ts",
    "clembench/index": "src/clembench/index.ts",
    "questworld/index": "src/questworld/index.ts",
    "tau2/index": "src/tau2/index.ts",
  },
});

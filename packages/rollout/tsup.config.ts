import { kilnTsup } from "../../tooling/tsup.preset.mjs";

export default kilnTsup({
  entry: { index: "src/index.ts", core: "src/core.ts" },
});

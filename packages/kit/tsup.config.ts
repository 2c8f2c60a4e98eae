import { kilnTsup } from "../../tooling/tsup.preset.mjs";

export default kilnTsup({ entry: ["src/index.ts", "src/cli.ts"] });

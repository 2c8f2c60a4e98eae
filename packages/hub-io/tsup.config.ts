import { kilnTsup } from "../../tooling/tsup.preset.mjs";

// Library entry plus the `kiln-hub-io` command.
export default kilnTsup({ entry: ["src/index.ts", "src/cli.ts"] });

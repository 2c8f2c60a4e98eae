import { kilnTsup } from "../../tooling/tsup.preset.mjs";

// Library entry, `@kiln/hub-io/cli` (runCli) and the `kiln-hub-io` bin; splitting shares one copy of the code.
export default kilnTsup({ entry: ["src/index.ts", "src/cli.ts", "src/bin.ts"], splitting: true });

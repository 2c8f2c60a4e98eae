import { kilnTsup } from "../../tooling/tsup.preset.mjs";

// Library entry and the `kiln` bin; splitting shares one copy of the code between them.
export default kilnTsup({ entry: ["src/index.ts", "src/cli.ts"], splitting: true });

import { kilnTsup } from "../../tooling/tsup.preset.mjs";

// Library entry, the `kiln` bin, and kiln serve's model worker (loaded by file URL next to the chunks);
// splitting shares one copy of the code between them.
export default kilnTsup({ entry: ["src/index.ts", "src/cli.ts", "src/serve-worker.ts"], splitting: true });

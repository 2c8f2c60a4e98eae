import { kilnVitest } from "../../tooling/vitest.preset.mjs";

export default kilnVitest();

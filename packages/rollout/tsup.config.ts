import { kilnTsup } from "../../tooling/tsup.preset.mjs";

export default kilnTsup();

import { kilnTsup } from "../../tooling/tsup.preset.mjs";

// tsup leaves only dependencies and peerDependencies external; the optional ones must stay imports too
// (koffi loads a native binary next to its own files, and a browser bundle maps both to empty modules).
export default kilnTsup({ external: ["koffi", "webgpu"] });

// Where the reference decoder's training step spends its time, kernel by kernel:
//   tsx --conditions=source bench/step-profile.ts [threads] [steps] [backend] [gemmSplit workers|library]
// Prints a markdown table (see kernel-profile.ts). Run it for 1 and 2 threads: rows whose wall time does
// not halve (CPU/wall near 1) are what keeps the step from scaling.
import * as T from "../src/index.js";
import { referenceTraining } from "./decoder-model.js";
import { profileSteps } from "./kernel-profile.js";

const [threadsArg = "2", stepsArg = "8", backend = "native", gemmSplit = "workers"] = process.argv.slice(2);
const threads = Number(threadsArg);
const steps = Number(stepsArg);
await T.initBackend(backend, {
  threads,
  relaxedSimd: true,
  ignoreOpenblasEnv: true,
  gemmSplit: gemmSplit as T.GemmSplit,
});
const { step } = referenceTraining();
profileSteps(`decoder fwd+bwd+AdamW, ${backend} ${threads} thread(s)`, backend, steps, step);
T.disposeNativeBackend();
T.disposeWasmBackend();

// Where the reference decoder's training step spends its time, kernel by kernel:
//   tsx --conditions=source bench/step-profile.ts [threads] [steps] [backend] [gemmSplit workers|library]
// Prints a markdown table (see kernel-profile.ts). Run it for 1 and 2 threads: rows whose wall time does
// not halve (CPU/wall near 1) are what keeps the step from scaling.
import * as T from "../src/index.js";
import { REFERENCE_DECODER, allParams, decoderLoss, initDecoder } from "./decoder-model.js";
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
const cfg = REFERENCE_DECODER;
const params = initDecoder(cfg, 0);
const rng = new T.Rng(1);
const ids = Int32Array.from(rng.uniform(cfg.batch * cfg.seq), (u) => Math.floor(u * cfg.vocab));
const opt = new T.AdamW(allParams(params), { lr: 1e-3 });
profileSteps(`decoder fwd+bwd+AdamW, ${backend} ${threads} thread(s)`, backend, steps, () => {
  for (const p of allParams(params)) p.grad?.dispose();
  opt.zeroGrad();
  const loss = T.tidy(() => {
    const l = decoderLoss(params, cfg, ids);
    T.backward(l);
    opt.step();
    return l;
  });
  loss.dispose();
});
T.disposeNativeBackend();
T.disposeWasmBackend();

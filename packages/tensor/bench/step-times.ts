// Median forward+backward and AdamW times of the reference decoder's training step, for comparing two trees
// side by side (run each tree's copy in turn):
//   tsx --conditions=source bench/step-times.ts [threads] [backend] [steps]
import * as T from "../src/index.js";
import { decoderLoss, referenceTraining } from "./decoder-model.js";

const [threadsArg = "2", backend = "native", stepsArg = "20"] = process.argv.slice(2);
const threads = Number(threadsArg);
const steps = Number(stepsArg);
await T.initBackend(backend, { threads, relaxedSimd: true, ignoreOpenblasEnv: true });
const { cfg, params, ids, opt, clearGrads } = referenceTraining();
const warmup = 4;
const forwardBackward: number[] = [];
const update: number[] = [];
for (let s = 0; s < warmup + steps; s++) {
  clearGrads();
  const t0 = performance.now();
  const loss = T.tidy(() => {
    const l = decoderLoss(params, cfg, ids);
    T.backward(l);
    return l;
  });
  const t1 = performance.now();
  opt.step();
  const t2 = performance.now();
  loss.dispose();
  if (s >= warmup) {
    forwardBackward.push(t1 - t0);
    update.push(t2 - t1);
  }
}
const median = (a: number[]) => [...a].sort((x, y) => x - y)[a.length >> 1].toFixed(2);
console.log(
  `${backend} ${threads} thread(s): fwd+bwd ${median(forwardBackward)} ms, AdamW ${median(update)} ms (medians of ${steps} steps)`,
);
T.disposeNativeBackend();
T.disposeWasmBackend();

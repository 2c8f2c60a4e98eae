import { readFileSync } from "node:fs";
import { convertLlama2cToHf } from "@kiln/hub-io";
import { Tensor, noGrad, initBackend } from "@kiln/tensor";
import { loadModel } from "../src/index.js";
await initBackend("wasm", { threads: 1 });
const conv = convertLlama2cToHf(new Uint8Array(readFileSync("test/fixtures/stories260K/stories260K.bin")));
const model = await loadModel(conv.files);
noGrad(() => {
  const ids = Int32Array.from({ length: 128 }, (_, i) => (i * 7 + 3) % 512);
  for (let rep = 0; rep < 60; rep++) {
    const t = performance.now();
    model.forward(new Tensor(ids, [1, 128], "i32"), { cache: model.newCache(1), logitsToKeep: 1 });
    if (rep % 10 === 0) console.log("prefill ms", (performance.now() - t).toFixed(1));
  }
});
process.exit(0);

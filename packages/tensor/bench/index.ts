// `pnpm bench tensor [--json] [--only=matmul|decoder|webgpu] [--rounds=N] [--warmup=N]`: @kiln/tensor benchmarks
// against peers in the same run (--warmup: training steps each decoder process runs before it measures, default 40).
import { BenchReporter } from "../../../tooling/src/bench.js";
import { benchDecoder } from "./decoder.js";
import { benchMatmul } from "./matmul.js";
import { benchWebGPU } from "./webgpu.js";

const reporter = new BenchReporter("tensor");
const only = process.argv.find((a) => a.startsWith("--only="))?.slice(7);
if (!only || only === "matmul") await benchMatmul(reporter);
if (!only || only === "decoder") await benchDecoder(reporter);
if (!only || only === "webgpu") await benchWebGPU(reporter);
reporter.finish();

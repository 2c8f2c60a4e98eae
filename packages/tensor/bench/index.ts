// `pnpm bench tensor [--json]`: @kiln/tensor benchmarks against peers in the same run.
import { BenchReporter } from "../../../tooling/src/bench.js";
import { benchMatmul } from "./matmul.js";

const reporter = new BenchReporter("tensor");
await benchMatmul(reporter);
reporter.finish();

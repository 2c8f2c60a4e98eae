#!/usr/bin/env node
// Runs the tau2 benchmark from the sources until `kiln eval tau2` exists:
//   pnpm exec tsx packages/benchmarks/src/tau2/run-cli.ts --agent oracle --tasks 5,36 --trials 1
import { TAU2_CLI_USAGE, tau2Main } from "./cli.js";

tau2Main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    console.error(err instanceof Error ? err.message : err);
    if (!(err instanceof Error) || !err.message.includes("usage:")) console.error(TAU2_CLI_USAGE);
    process.exit(2);
  },
);

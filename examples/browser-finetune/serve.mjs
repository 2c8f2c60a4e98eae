#!/usr/bin/env node
// `pnpm example:browser [--port 8080]`: build the example and serve it on localhost with the
// cross-origin isolation headers (COOP/COEP) that SharedArrayBuffer, and so the wasm backend's worker
// threads, need. Open the printed URL in Chrome, Edge or Firefox.
import { serveStatic } from "../../tooling/scripts/browser-kit.mjs";
import { buildExample } from "./build.mjs";

const portFlag = process.argv.indexOf("--port");
const port = portFlag >= 0 ? Number(process.argv[portFlag + 1]) : 8080;
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`--port wants an integer in 0..65535, got ${process.argv[portFlag + 1]}`);
  process.exit(2);
}

const { outdir, bundleBytes, modelFiles } = await buildExample();
console.log(`built ${outdir}: page bundle ${(bundleBytes / 1024).toFixed(0)} KB, model files ${modelFiles.join(", ")}`);
const server = await serveStatic({ "/": outdir }, { port });
console.log(`kiln browser fine-tuning example: ${server.url}  (Ctrl+C stops)`);

#!/usr/bin/env node
// The `kiln-hub-io` executable. It is a file of its own rather than a "was I run directly?" check in cli.ts:
// npm starts bins through a symlink in node_modules/.bin, whose name says nothing about the file behind it.
import { runCli } from "./cli.js";

// `kiln-hub-io inspect model.safetensors | head` closes the pipe early; that is the reader's choice, not an error.
process.stdout.on("error", (e: NodeJS.ErrnoException) => {
  if (e.code === "EPIPE") process.exit(0);
  throw e;
});

runCli(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});

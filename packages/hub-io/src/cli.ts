// kiln-hub-io: command-line entry for the file tools other packages and scripts need.
//   kiln-hub-io convert-llama2c <checkpoint.bin> <tokenizer.bin|-> <out-dir>
//   kiln-hub-io manifest write|verify <dir>
//   kiln-hub-io inspect <file.safetensors>
// `runCli(argv)` is the same entry as a function (returns the exit code, writes to the given streams); the
// `kiln-hub-io` bin is `bin.ts`, which only calls it, so importing this module never runs anything.

import { convertLlama2c } from "./llama2c-convert.js";
import { verifyManifest, writeManifest } from "./manifest.js";
import { SafetensorsFile } from "./safetensors-read.js";

const USAGE = `usage:
  kiln-hub-io convert-llama2c <checkpoint.bin> <tokenizer.bin|-> <out-dir>
  kiln-hub-io manifest write|verify <dir>
  kiln-hub-io inspect <file.safetensors>`;

export async function runCli(
  argv: string[],
  out: (s: string) => void = (s) => process.stdout.write(s),
  err: (s: string) => void = (s) => process.stderr.write(s),
): Promise<number> {
  const [cmd, ...args] = argv;
  // The commands take no options: --help/-h anywhere prints the usage (exit 0) and any other option is
  // refused by name (exit 2) rather than read as a path.
  if (argv.length === 0 || argv.some((a) => a === "--help" || a === "-h") || cmd === "help") {
    const lines = USAGE.split("\n").slice(1);
    const own = lines.filter((l) => l.trim().split(" ")[1] === (cmd === "help" ? args[0] : cmd));
    // Asked for, the usage is the answer (stdout, 0); with no command at all it is the error (stderr, 2).
    (argv.length === 0 ? err : out)(`usage:\n${(own.length ? own : lines).join("\n")}\n`);
    return argv.length === 0 ? 2 : 0;
  }
  const option = argv.find((a) => a.startsWith("-") && a !== "-");
  if (option) {
    err(`kiln-hub-io: unknown option ${option} (the commands take none)\n${USAGE}\n`);
    return 2;
  }
  try {
    if (cmd === "convert-llama2c" && args.length === 3) {
      const [checkpoint, tokenizer, outDir] = args;
      const r = await convertLlama2c({ checkpoint, tokenizer: tokenizer === "-" ? undefined : tokenizer, outDir });
      out(`wrote ${[...r.files.keys()].join(", ")} to ${outDir}\n`);
      return 0;
    }
    if (cmd === "manifest" && args.length === 2 && (args[0] === "write" || args[0] === "verify")) {
      if (args[0] === "write") {
        const entries = await writeManifest(args[1]);
        out(`SHA256SUMS: ${entries.length} files\n`);
        return 0;
      }
      const rep = await verifyManifest(args[1]);
      for (const p of rep.mismatched) out(`${p}: FAILED\n`);
      for (const p of rep.missing) out(`${p}: MISSING\n`);
      out(rep.ok ? "OK\n" : "verification failed\n");
      return rep.ok ? 0 : 1;
    }
    if (cmd === "inspect" && args.length === 1) {
      const f = await SafetensorsFile.open(args[0]);
      if (f.metadata) out(`__metadata__ ${JSON.stringify(f.metadata)}\n`);
      for (const k of f.keys()) {
        const t = f.info(k);
        out(`${k}\t${t.dtype}\t[${t.shape.join(", ")}]\n`);
      }
      await f.close();
      return 0;
    }
    err(`${USAGE}\n`);
    return 2;
  } catch (e) {
    err(`kiln-hub-io: ${(e as Error).message}\n`);
    return 1;
  }
}

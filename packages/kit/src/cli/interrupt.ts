// Ctrl-C (SIGINT) or SIGTERM during a training command: the step in flight is discarded (checkpoints
// are written to step-N.partial/ and renamed, so the last complete one stands), the progress line is
// ended, and the user is told where the run stopped and how to continue it; exit status 130.
import { existsSync, readFileSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

export interface RunPosition {
  stage?: string;
  step?: number;
  /** The newest complete checkpoint directory, if any. */
  checkpoint?: string;
}

/** Where a run directory stands: the last metrics line with a step, the newest complete checkpoint. */
export function runPosition(runDir: string): RunPosition {
  const out: RunPosition = {};
  const metrics = join(runDir, "metrics.jsonl");
  if (existsSync(metrics)) {
    const lines = readFileSync(metrics, "utf8").split("\n");
    for (let i = lines.length - 1; i >= 0; i--) {
      try {
        const r = JSON.parse(lines[i]) as { stage?: unknown; step?: unknown };
        if (typeof r.stage === "string") {
          out.stage ??= r.stage;
          if (typeof r.step === "number") {
            out.step = r.step;
            break;
          }
        }
      } catch {
        // an empty or torn line
      }
    }
  }
  let newest = -1;
  const visit = (dir: string, depth: number) => {
    if (!existsSync(dir) || depth > 3) return;
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (!statSync(path).isDirectory()) continue;
      if (
        /^step-\d+$/.test(name) ||
        (depth > 0 && !name.includes(".partial") && existsSync(join(path, "adapter_config.json")))
      ) {
        const t = statSync(path).mtimeMs;
        if (t > newest) [newest, out.checkpoint] = [t, path];
      } else if (!name.includes(".partial")) visit(path, depth + 1);
    }
  };
  visit(join(runDir, "checkpoints"), 0);
  return out;
}

/** A shell word for a command line the user can paste. */
export function shellQuote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`;
}

/** The command line that continues the run: the same words, --overwrite dropped, --resume added. */
export function resumeCommand(command: string, argv: readonly string[]): string {
  const words = argv.filter((a) => a !== "--overwrite" && a !== "--resume");
  return ["kiln", ...command.split(" "), ...words, "--resume"].map(shellQuote).join(" ");
}

/** The lines printed on an interrupt. */
export function interruptMessage(runDir: string | undefined, continueWith: string | undefined): string {
  if (!runDir) return ["interrupted", ...(continueWith ? [`continue with: ${continueWith}`] : [])].join("; ");
  const pos = runPosition(runDir);
  const where = pos.stage ? `${pos.stage}${pos.step !== undefined ? ` step ${pos.step}` : ""}` : "start-up";
  return [
    `interrupted at ${where} (the step in flight is discarded)`,
    `last checkpoint: ${pos.checkpoint ?? "none"}; run directory: ${runDir}`,
    ...(continueWith ? [`continue with: ${continueWith}`] : []),
  ].join("; ");
}

/** `handler` on SIGINT and SIGTERM until the returned function is called. */
function listenForSignals(handler: () => void): () => void {
  process.on("SIGINT", handler);
  process.on("SIGTERM", handler);
  return () => {
    process.off("SIGINT", handler);
    process.off("SIGTERM", handler);
  };
}

/**
 * Until the returned function is called, SIGINT/SIGTERM end the progress line, print interruptMessage
 * and exit 130 (a second signal exits at once). `runDir` is read when the signal comes.
 */
export function onInterrupt(
  runDir: () => string | undefined,
  continueWith: string | undefined,
  write: (line: string) => void = (line) => process.stderr.write(line),
): () => void {
  let interrupted = false;
  const handler = () => {
    if (interrupted) process.exit(130);
    interrupted = true;
    write(`\n${interruptMessage(runDir(), continueWith)}\n`);
    process.exit(130);
  };
  return listenForSignals(handler);
}

/**
 * Like onInterrupt, for a command that can stop cleanly: while `graceful()` is true, the first SIGINT/SIGTERM prints
 * `notice` and calls `stop()` (the command finishes what is in flight, saves it and reports how to continue); a
 * second signal, or one while `graceful()` is false, prints interruptMessage and exits 130 at once.
 */
export function onInterruptGracefully(options: {
  graceful: () => boolean;
  stop: () => void;
  notice: string;
  continueWith: string;
  write?: (line: string) => void;
}): () => void {
  const write = options.write ?? ((line: string) => process.stderr.write(line));
  let signals = 0;
  const handler = () => {
    signals++;
    if (signals === 1 && options.graceful()) {
      write(`\n${options.notice}\n`);
      options.stop();
      return;
    }
    write(`\n${interruptMessage(undefined, options.continueWith)}\n`);
    process.exit(130);
  };
  return listenForSignals(handler);
}

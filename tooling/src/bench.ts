import { readFileSync } from "node:fs";

// The benchmark convention shared by every package (`pnpm bench <name> [--json]`).
// A benchmark measures kiln and a peer in the same run and reports medians and
// the ratio kiln/peer. A peer that is not installed is reported as missing.

export type Better = "higher" | "lower";

export interface BenchRow {
  bench: string;
  case: string;
  metric: string;
  unit: string;
  better: Better;
  kiln: number | null;
  peer: string;
  peer_value: number | null;
  ratio: number | null;
  note?: string;
}

export interface Timing {
  median: number;
  min: number;
  max: number;
  samples: number[];
}

/** Time `fn` `reps` times after `warmup` calls; returns milliseconds (median, min, max). */
export async function timeIt(fn: () => unknown | Promise<unknown>, reps = 5, warmup = 1): Promise<Timing> {
  for (let i = 0; i < warmup; i++) await fn();
  const samples: number[] = [];
  for (let i = 0; i < reps; i++) {
    const start = performance.now();
    await fn();
    samples.push(performance.now() - start);
  }
  return summarize(samples);
}

export function summarize(samples: number[]): Timing {
  if (samples.length === 0) throw new Error("summarize: no samples");
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  const median = sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
  return { median, min: sorted[0], max: sorted[sorted.length - 1], samples };
}

export function makeRow(row: Omit<BenchRow, "ratio">): BenchRow {
  const ratio = row.kiln !== null && row.peer_value !== null && row.peer_value !== 0 ? row.kiln / row.peer_value : null;
  return { ...row, ratio };
}

/** Collects rows and prints them as JSON lines (`--json`) or as a table at the end. */
export class BenchReporter {
  readonly rows: BenchRow[] = [];
  readonly json: boolean;
  constructor(
    readonly bench: string,
    argv: string[] = process.argv.slice(2),
  ) {
    this.json = argv.includes("--json");
  }

  add(row: Omit<BenchRow, "ratio" | "bench">): BenchRow {
    const full = makeRow({ bench: this.bench, ...row });
    this.rows.push(full);
    if (this.json) process.stdout.write(`${JSON.stringify(full)}\n`);
    else
      process.stderr.write(
        `  ${full.case} ${full.metric}: kiln=${fmt(full.kiln)} ${full.peer}=${fmt(full.peer_value)}\n`,
      );
    return full;
  }

  finish(): void {
    if (this.json) return;
    const header = ["case", "metric", "unit", "better", "kiln", "peer", "peer value", "ratio"];
    const body = this.rows.map((r) => [
      r.case,
      r.metric,
      r.unit,
      r.better,
      fmt(r.kiln),
      r.peer,
      r.peer_value === null ? "missing" : fmt(r.peer_value),
      r.ratio === null ? "-" : `${r.ratio.toFixed(2)}x`,
    ]);
    const widths = header.map((h, i) => Math.max(h.length, ...body.map((row) => row[i].length)));
    const line = (cells: string[]) => cells.map((c, i) => c.padEnd(widths[i])).join("  ");
    console.log(`\n${this.bench}`);
    console.log(line(header));
    console.log(widths.map((w) => "-".repeat(w)).join("  "));
    for (const row of body) console.log(line(row));
  }
}

function fmt(v: number | null): string {
  if (v === null) return "-";
  if (Math.abs(v) >= 100) return v.toFixed(0);
  if (Math.abs(v) >= 1) return v.toFixed(2);
  return v.toPrecision(3);
}

/** Peak resident set size of this process so far, in MiB (Linux VmHWM; elsewhere the current RSS). */
export function peakRssMiB(): number {
  try {
    const match = /VmHWM:\s+(\d+) kB/.exec(readFileSync("/proc/self/status", "utf8"));
    if (match) return Number(match[1]) / 1024;
  } catch {
    // no /proc (macOS, Windows): fall back to the current RSS
  }
  return process.memoryUsage().rss / 1024 / 1024;
}

/**
 * Warm-up steps a training-step benchmark runs before it measures, from `--warmup=N` (default 40), also set as
 * KILN_BENCH_WARMUP for the processes it starts (kiln's step scripts and the PyTorch peers read it). A two-thread
 * native step keeps getting faster for about thirty steps while V8 compiles kiln's JavaScript on threads that
 * share the two cores (the LoRA step on two Zen 3 cores went 167, 185, 132 … 118 ms in blocks of eight steps; one
 * thread 150 … 143; packages/tensor/README.md, "the warm-up explained"), and a training run is thousands of steps.
 * At 16 the decoder's two-thread rate was read before it settled (tensor README, "Zen 4").
 */
export function benchWarmupSteps(argv: readonly string[] = process.argv): number {
  const flag = argv.find((a) => a.startsWith("--warmup="));
  const value = flag === undefined ? 40 : Number(flag.slice(9));
  if (!Number.isInteger(value) || value < 1 || value > 1000)
    throw new Error(`--warmup must be a whole number of steps in [1, 1000], got ${flag?.slice(9)}`);
  process.env.KILN_BENCH_WARMUP = String(value);
  return value;
}

/** The warm-up steps a step script was asked for (KILN_BENCH_WARMUP; 1 when unset, as run by hand). */
export function warmupFromEnv(env: NodeJS.ProcessEnv = process.env): number {
  const value = Number(env.KILN_BENCH_WARMUP ?? 1);
  if (!Number.isInteger(value) || value < 1)
    throw new Error(`KILN_BENCH_WARMUP must be a whole number ≥ 1, got ${env.KILN_BENCH_WARMUP}`);
  return value;
}

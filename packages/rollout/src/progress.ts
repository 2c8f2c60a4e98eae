// A small progress bar for long runs: one redrawn line on a TTY, a plain line every few
// seconds otherwise (CI logs, files). Shows done/total, rate and ETA. Writes to stderr by
// default so stdout stays clean for data. Works without Node (pass a stream).

export interface ProgressStream {
  write(text: string): unknown;
  isTTY?: boolean;
  columns?: number;
}

export interface ProgressOptions {
  total: number;
  label?: string;
  /** Default: process.stderr when it exists. Pass null to silence the bar. */
  stream?: ProgressStream | null;
  /** Minimum ms between TTY redraws (default 100). */
  redrawMs?: number;
  /** Minimum ms between lines when not a TTY (default 5000). */
  logEveryMs?: number;
  /** Clock in ms (tests inject one). */
  now?: () => number;
}

export class ProgressBar {
  readonly total: number;
  private done = 0;
  private readonly extra = new Map<string, number>();
  private readonly shown = new Map<string, string>();
  private readonly label: string;
  private readonly stream: ProgressStream | null;
  private readonly redrawMs: number;
  private readonly logEveryMs: number;
  private readonly now: () => number;
  private readonly startedAt: number;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private finished = false;

  constructor(options: ProgressOptions) {
    if (!(options.total >= 0)) throw new RangeError(`ProgressBar: total must be >= 0, got ${options.total}`);
    this.total = options.total;
    this.label = options.label ?? "";
    const proc = (globalThis as { process?: { stderr?: ProgressStream } }).process;
    this.stream = options.stream === undefined ? (proc?.stderr ?? null) : options.stream;
    this.redrawMs = options.redrawMs ?? 100;
    this.logEveryMs = options.logEveryMs ?? 5000;
    this.now = options.now ?? (() => performance.now());
    this.startedAt = this.now();
  }

  get completed(): number {
    return this.done;
  }

  /** Marks `n` more items done; `counters` adds to named tallies shown after the bar (e.g. errors). */
  tick(n = 1, counters?: Record<string, number>): void {
    this.done += n;
    for (const [k, v] of Object.entries(counters ?? {})) this.extra.set(k, (this.extra.get(k) ?? 0) + v);
    this.maybeDraw(false);
  }

  /**
   * Values shown after the tallies as they are now, each replacing its previous value (a running loss, a
   * learning rate): unlike `tick`'s counters, they are not summed.
   */
  show(values: Record<string, string | number>): void {
    for (const [k, v] of Object.entries(values)) this.shown.set(k, String(v));
  }

  /** Final line (always drawn), ending with a newline. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.maybeDraw(true);
  }

  /** The status text without bar graphics: "label 12/40 30% 4.1/s ETA 7s errors=1 loss=0.412". */
  summary(): string {
    const elapsed = (this.now() - this.startedAt) / 1000;
    const rate = elapsed > 0 ? this.done / elapsed : 0;
    const pct = this.total > 0 ? Math.floor((100 * this.done) / this.total) : 100;
    const left = this.total - this.done;
    const eta = rate > 0 && left > 0 ? ` ETA ${formatDuration(left / rate)}` : "";
    const extras = [...this.extra, ...this.shown].map(([k, v]) => ` ${k}=${v}`).join("");
    const head = this.label ? `${this.label} ` : "";
    return `${head}${this.done}/${this.total} ${pct}% ${formatRate(rate)}${eta}${extras}`;
  }

  private maybeDraw(final: boolean): void {
    const stream = this.stream;
    if (!stream) return;
    const t = this.now();
    if (stream.isTTY) {
      if (!final && t - this.lastDraw < this.redrawMs) return;
      this.lastDraw = t;
      const text = this.summary();
      const width = Math.max(10, Math.min(30, (stream.columns ?? 80) - text.length - 4));
      const filled = this.total > 0 ? Math.round((width * Math.min(this.done, this.total)) / this.total) : width;
      const bar = `[${"#".repeat(filled)}${"-".repeat(width - filled)}]`;
      stream.write(`\r\x1b[2K${bar} ${text}${final ? "\n" : ""}`);
      return;
    }
    if (!final && t - this.lastDraw < this.logEveryMs) return;
    this.lastDraw = t;
    stream.write(`${this.summary()}\n`);
  }
}

function formatRate(perSecond: number): string {
  if (perSecond >= 100) return `${perSecond.toFixed(0)}/s`;
  if (perSecond >= 1) return `${perSecond.toFixed(1)}/s`;
  return perSecond > 0 ? `${(perSecond * 60).toFixed(1)}/min` : "-/s";
}

export function formatDuration(seconds: number): string {
  const s = Math.round(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
}

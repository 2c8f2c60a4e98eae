// A run directory (docs/ARCHITECTURE.md §Run directory): config.json, metadata.json,
// metrics.jsonl, checkpoints/<stage>/step-N/, rollouts/, report files and SHA256SUMS.
// JSON files are written atomically (temp + rename); metrics are appended line by line.
import { execFileSync } from "node:child_process";
import {
  appendFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { sha256File, writeFileAtomic, writeManifest } from "@kiln/hub-io";
import { getBackend } from "@kiln/tensor";

export type RunMode = "new" | "overwrite" | "resume";

/** `kiln … --name X` when runs/X exists and neither --resume nor --overwrite was given, and the like. */
export class RunDirError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "RunDirError";
  }
}

/** A run name is one path component: `--name ../../escape` would write outside `--out`. */
export function checkRunName(name: string): void {
  if (name === "" || name === "." || name === ".." || /[/\\\0]/.test(name))
    throw new RunDirError(
      `run name must be a single path component (no "/" or "\\", not "." or ".."), got ${JSON.stringify(name)}`,
    );
}

export interface RunMetadata {
  name: string;
  startedAt: string;
  /** Set when the run was continued (`--resume`): when, each time. */
  resumedAt?: string[];
  codeSha: string | null;
  /** Uncommitted changes in the working tree the code ran from (null: not a git checkout). */
  dirtyTree: boolean | null;
  /** The base model: where it came from and the SHA-256 of its files. */
  baseModel?: { source: string; files: Record<string, string> };
  node: string;
  platform: string;
  backend: string;
  packages: Record<string, string>;
  seeds: Record<string, number>;
  datasets: Record<string, string>;
}

const KILN_PACKAGES = ["tensor", "hub-io", "models", "lora", "losses", "rollout", "benchmarks", "kit"];

/** Versions of the installed @kiln packages (recorded in metadata.json for reproducibility). */
export function kilnPackageVersions(): Record<string, string> {
  const require = createRequire(import.meta.url);
  const out: Record<string, string> = {};
  for (const name of KILN_PACKAGES) {
    try {
      out[`@kiln/${name}`] = (require(`@kiln/${name}/package.json`) as { version: string }).version;
    } catch {
      // not installed alongside kit: nothing to record
    }
  }
  return out;
}

function git(args: string[]): string | null {
  try {
    return execFileSync("git", args, { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    return null;
  }
}

function gitSha(): string | null {
  return git(["rev-parse", "HEAD"])?.trim() ?? null;
}

function gitDirty(): boolean | null {
  const status = git(["status", "--porcelain", "--untracked-files=no"]);
  return status === null ? null : status.trim().length > 0;
}

function stableJson(value: unknown): string {
  return JSON.stringify(value, (_k, v) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

export class RunDir {
  private constructor(
    readonly path: string,
    readonly metadata: RunMetadata,
  ) {}

  /**
   * Create `root/name` and write config.json and metadata.json. An existing directory is never
   * reused silently: mode "new" (default) refuses it, "overwrite" deletes it first, "resume"
   * requires it and the same config.json (metrics are then kept up to each stage's checkpoint).
   */
  static async create(
    root: string,
    name: string,
    config: Record<string, unknown>,
    extra: { seeds?: Record<string, number>; packages?: Record<string, string>; mode?: RunMode } = {},
  ): Promise<RunDir> {
    checkRunName(name);
    const path = join(root, name);
    const mode = extra.mode ?? "new";
    const exists = existsSync(path);
    if (mode === "resume") {
      if (!exists || !existsSync(join(path, "config.json")))
        throw new RunDirError(`cannot resume ${path}: there is no run there`);
      const saved = JSON.parse(readFileSync(join(path, "config.json"), "utf8"));
      if (stableJson(saved) !== stableJson(config))
        throw new RunDirError(
          `cannot resume ${path}: its config.json differs from this run's configuration (pass the same options, or --overwrite)`,
        );
      const metadata = JSON.parse(readFileSync(join(path, "metadata.json"), "utf8")) as RunMetadata;
      metadata.resumedAt = [...(metadata.resumedAt ?? []), new Date().toISOString()];
      const run = new RunDir(path, metadata);
      rmSync(join(path, "SHA256SUMS"), { force: true });
      await run.saveMetadata();
      return run;
    }
    if (exists && mode === "new")
      throw new RunDirError(`${path} already exists: pass --resume to continue it or --overwrite to replace it`);
    if (exists) rmSync(path, { recursive: true, force: true });
    mkdirSync(join(path, "checkpoints"), { recursive: true });
    mkdirSync(join(path, "rollouts"), { recursive: true });
    const metadata: RunMetadata = {
      name,
      startedAt: new Date().toISOString(),
      codeSha: gitSha(),
      dirtyTree: gitDirty(),
      node: process.version,
      platform: `${process.platform}-${process.arch}`,
      backend: getBackend(),
      packages: extra.packages ?? kilnPackageVersions(),
      seeds: extra.seeds ?? {},
      datasets: {},
    };
    const run = new RunDir(path, metadata);
    await writeFileAtomic(join(path, "config.json"), `${JSON.stringify(config, null, 2)}\n`);
    await run.saveMetadata();
    return run;
  }

  file(...parts: string[]): string {
    return join(this.path, ...parts);
  }

  checkpointDir(step: number): string {
    const dir = join(this.path, "checkpoints", `step-${step}`);
    mkdirSync(dir, { recursive: true });
    return dir;
  }

  /** Record the base model's identity: a directory's files with their SHA-256, or a description. */
  async recordBaseModel(source: string, dir?: string): Promise<void> {
    const files: Record<string, string> = {};
    if (dir)
      for (const name of readdirSync(dir).sort())
        if (statSync(join(dir, name)).isFile()) files[name] = await sha256File(join(dir, name));
    this.metadata.baseModel = { source, files };
    await this.saveMetadata();
  }

  /** Record a dataset file's SHA-256 in metadata.json. */
  async recordDataset(label: string, filePath: string): Promise<string> {
    const digest = await sha256File(filePath);
    this.metadata.datasets[label] = digest;
    await this.saveMetadata();
    return digest;
  }

  get resumed(): boolean {
    return (this.metadata.resumedAt?.length ?? 0) > 0;
  }

  /** One JSON object per line; a crash loses at most the line being written. */
  logMetrics(record: Record<string, unknown>): void {
    appendFileSync(join(this.path, "metrics.jsonl"), `${JSON.stringify({ time: Date.now(), ...record })}\n`);
  }

  /** Every metrics line so far (a torn last line from a killed process is skipped). */
  readMetrics(): Record<string, unknown>[] {
    const file = join(this.path, "metrics.jsonl");
    if (!existsSync(file)) return [];
    const out: Record<string, unknown>[] = [];
    for (const line of readFileSync(file, "utf8").split("\n")) {
      if (!line) continue;
      try {
        out.push(JSON.parse(line));
      } catch {
        // the line a kill interrupted
      }
    }
    return out;
  }

  /** Rewrite metrics.jsonl without the lines `drop` selects (a resumed stage forgets its lost steps). */
  dropMetrics(drop: (record: Record<string, unknown>) => boolean): void {
    const file = join(this.path, "metrics.jsonl");
    if (!existsSync(file)) return;
    const kept = this.readMetrics().filter((r) => !drop(r));
    const tmp = `${file}.tmp`;
    writeFileSync(tmp, kept.map((r) => `${JSON.stringify(r)}\n`).join(""));
    renameSync(tmp, file);
  }

  /**
   * A recipe stage whose JSON result is kept in stages/<name>.json: on resume a finished stage
   * returns its saved result without running; an unfinished one drops its metric lines and runs.
   * (Training stages resume inside the trainer from their checkpoints instead.)
   */
  async stage<T>(name: string, run: () => Promise<T>): Promise<T> {
    const file = join(this.path, "stages", `${name}.json`);
    if (existsSync(file)) return (JSON.parse(readFileSync(file, "utf8")) as { result: T }).result;
    this.dropMetrics((r) => r.stage === name);
    const result = await run();
    mkdirSync(join(this.path, "stages"), { recursive: true });
    await writeFileAtomic(file, `${JSON.stringify({ result })}\n`);
    return result;
  }

  async writeJson(relative: string, value: unknown): Promise<void> {
    await writeFileAtomic(join(this.path, relative), `${JSON.stringify(value, null, 2)}\n`);
  }

  async writeText(relative: string, text: string): Promise<void> {
    await writeFileAtomic(join(this.path, relative), text);
  }

  async saveMetadata(): Promise<void> {
    await writeFileAtomic(join(this.path, "metadata.json"), `${JSON.stringify(this.metadata, null, 2)}\n`);
  }

  /** Write SHA256SUMS over every file of the run (verify later with hub-io's verifyManifest). */
  async finalize(): Promise<number> {
    const entries = await writeManifest(this.path);
    return entries.length;
  }
}

// A run directory (architecture.md "Run directory"): config.json, metadata.json,
// metrics.jsonl, checkpoints/step-N/, rollouts/, report files and SHA256SUMS.
// JSON files are written atomically (temp + rename); metrics are appended line by line.
import { execFileSync } from "node:child_process";
import { appendFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import { sha256File, writeFileAtomic, writeManifest } from "@kiln/hub-io";
import { getBackend } from "@kiln/tensor";

export interface RunMetadata {
  name: string;
  startedAt: string;
  codeSha: string | null;
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

function gitSha(): string | null {
  try {
    return execFileSync("git", ["rev-parse", "HEAD"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] }).trim();
  } catch {
    return null;
  }
}

export class RunDir {
  private constructor(
    readonly path: string,
    readonly metadata: RunMetadata,
  ) {}

  /** Create `root/name` (kept if it exists) and write config.json and metadata.json. */
  static async create(
    root: string,
    name: string,
    config: Record<string, unknown>,
    extra: { seeds?: Record<string, number>; packages?: Record<string, string> } = {},
  ): Promise<RunDir> {
    const path = join(root, name);
    mkdirSync(join(path, "checkpoints"), { recursive: true });
    mkdirSync(join(path, "rollouts"), { recursive: true });
    const metadata: RunMetadata = {
      name,
      startedAt: new Date().toISOString(),
      codeSha: gitSha(),
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

  /** Record a dataset file's SHA-256 in metadata.json. */
  async recordDataset(label: string, filePath: string): Promise<string> {
    const digest = await sha256File(filePath);
    this.metadata.datasets[label] = digest;
    await this.saveMetadata();
    return digest;
  }

  /** One JSON object per line; a crash loses at most the line being written. */
  logMetrics(record: Record<string, unknown>): void {
    appendFileSync(join(this.path, "metrics.jsonl"), `${JSON.stringify({ time: Date.now(), ...record })}\n`);
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

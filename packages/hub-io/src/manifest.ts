// SHA256SUMS manifests in the GNU coreutils `sha256sum` format ("<hex>  <path>\n", sorted by path),
// so `sha256sum -c SHA256SUMS` verifies a kiln run or model directory too. Node only.

import { writeFileAtomic } from "./atomic-file.js";
import { ManifestError } from "./errors.js";
import { sha256File } from "./sha256.js";

export const MANIFEST_FILE = "SHA256SUMS";

export interface ManifestEntry {
  path: string;
  sha256: string;
}

function checkPath(p: string): void {
  if (p.length === 0 || p.startsWith("/") || /^[A-Za-z]:/.test(p) || p.includes("\\") || p.split("/").includes("..")) {
    throw new ManifestError(
      `manifest path ${JSON.stringify(p)} must be relative, "/"-separated and stay inside the directory`,
    );
  }
  if (p.includes("\n")) throw new ManifestError(`manifest path ${JSON.stringify(p)} contains a newline`);
}

export function serializeManifest(entries: ManifestEntry[]): string {
  const sorted = [...entries].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  for (const e of sorted) {
    checkPath(e.path);
    if (!/^[0-9a-f]{64}$/.test(e.sha256)) throw new ManifestError(`"${e.path}": ${e.sha256} is not a hex SHA-256`);
  }
  return sorted.map((e) => `${e.sha256}  ${e.path}\n`).join("");
}

/** Parse sha256sum output; accepts the binary marker ("<hex> *<path>"). */
export function parseManifest(text: string): ManifestEntry[] {
  const out: ManifestEntry[] = [];
  text.split("\n").forEach((line, i) => {
    if (line.trim() === "") return;
    const m = /^([0-9a-fA-F]{64}) [ *](.+)$/.exec(line);
    if (!m)
      throw new ManifestError(
        `${MANIFEST_FILE} line ${i + 1}: expected "<sha256>  <path>", got ${JSON.stringify(line)}`,
      );
    checkPath(m[2]);
    out.push({ sha256: m[1].toLowerCase(), path: m[2] });
  });
  return out;
}

/** Every regular file under `dir` (relative "/" paths), skipping the manifest itself and temp files. */
export async function listDirFiles(dir: string): Promise<string[]> {
  const fs = await import("node:fs/promises");
  const { join } = await import("node:path");
  const out: string[] = [];
  const walk = async (rel: string) => {
    for (const ent of await fs.readdir(join(dir, rel), { withFileTypes: true })) {
      const p = rel ? `${rel}/${ent.name}` : ent.name;
      // Follow symlinks (a Hugging Face cache snapshot is a folder of links into blobs/).
      const st = ent.isSymbolicLink() ? await fs.stat(join(dir, p)).catch(() => undefined) : ent;
      if (!st) continue;
      if (st.isDirectory()) await walk(p);
      else if (st.isFile() && p !== MANIFEST_FILE && !/\.tmp-[^/]*$/.test(p)) out.push(p);
    }
  };
  await walk("");
  return out.sort();
}

/** Hash every file under `dir` and write `dir/SHA256SUMS` atomically. */
export async function writeManifest(dir: string): Promise<ManifestEntry[]> {
  const { join } = await import("node:path");
  const entries: ManifestEntry[] = [];
  for (const p of await listDirFiles(dir)) entries.push({ path: p, sha256: await sha256File(join(dir, p)) });
  await writeFileAtomic(join(dir, MANIFEST_FILE), serializeManifest(entries));
  return entries;
}

export interface ManifestReport {
  ok: boolean;
  /** Listed, present, but the hash differs. */
  mismatched: string[];
  /** Listed but absent. */
  missing: string[];
  /** Present but not listed. */
  unlisted: string[];
}

/** Re-hash `dir` against `dir/SHA256SUMS`. `ok` needs no mismatch, no missing file and (strict) nothing unlisted. */
export async function verifyManifest(dir: string, opts: { strict?: boolean } = {}): Promise<ManifestReport> {
  const fs = await import("node:fs/promises");
  const { join } = await import("node:path");
  let text: string;
  try {
    text = await fs.readFile(join(dir, MANIFEST_FILE), "utf8");
  } catch {
    throw new ManifestError(`${dir}: no ${MANIFEST_FILE}`);
  }
  const entries = parseManifest(text);
  const present = new Set(await listDirFiles(dir));
  const report: ManifestReport = { ok: true, mismatched: [], missing: [], unlisted: [] };
  for (const e of entries) {
    if (!present.has(e.path)) report.missing.push(e.path);
    else if ((await sha256File(join(dir, e.path))) !== e.sha256) report.mismatched.push(e.path);
    present.delete(e.path);
  }
  report.unlisted = [...present];
  report.ok =
    report.mismatched.length === 0 && report.missing.length === 0 && (!opts.strict || report.unlisted.length === 0);
  return report;
}

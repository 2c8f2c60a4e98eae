// Downloads from the Hugging Face Hub through @huggingface/hub (its cache layout:
// <cache>/models--org--name/{blobs,refs,snapshots/<commit>}), with an offline mode that resolves
// revisions from that cache alone. No hand-written hub client: only the cache lookup is ours.
// Node only; @huggingface/hub is imported lazily.

import { HubDownloadError } from "./errors.js";

export interface HubRepoOptions {
  /** "org/name" (model), or "datasets/org/name" / "spaces/org/name". */
  repo: string;
  /** Branch, tag or commit hash; default "main". */
  revision?: string;
  /** Cache directory; default $HF_HUB_CACHE, $HUGGINGFACE_HUB_CACHE or ~/.cache/huggingface/hub. */
  cacheDir?: string;
  /** Hub endpoint; default $HF_ENDPOINT or https://huggingface.co. */
  hubUrl?: string;
  accessToken?: string;
  /** Never touch the network; resolve from the cache (default: $HF_HUB_OFFLINE is "1"/"true"). */
  offline?: boolean;
  fetch?: typeof fetch;
}

type RepoType = "model" | "dataset" | "space";

function repoId(repo: string): { type: RepoType; name: string } {
  for (const [prefix, type] of [
    ["datasets/", "dataset"],
    ["spaces/", "space"],
  ] as const) {
    if (repo.startsWith(prefix)) return { type, name: repo.slice(prefix.length) };
  }
  if (!/^[\w.-]+(\/[\w.-]+)?$/.test(repo)) throw new HubDownloadError(`repo ${JSON.stringify(repo)} is not "org/name"`);
  return { type: "model", name: repo };
}

function isOffline(opts: HubRepoOptions): boolean {
  if (opts.offline !== undefined) return opts.offline;
  const env = typeof process !== "undefined" ? process.env.HF_HUB_OFFLINE : undefined;
  return env === "1" || env?.toLowerCase() === "true";
}

async function common(opts: HubRepoOptions) {
  // Browser bundles map @huggingface/hub and node:* to empty modules (package.json "browser"): the
  // download writes the Hub's cache directory on disk, which a browser has not got.
  if (typeof process === "undefined" || typeof process.versions?.node !== "string")
    throw new HubDownloadError(
      "hub download needs Node (it fills the Hugging Face cache directory on disk); in a browser fetch the files and pass them to loadModel as a Map",
    );
  const hub = await import("@huggingface/hub");
  const cacheDir = opts.cacheDir ?? hub.getHFHubCachePath();
  const id = repoId(opts.repo);
  const { join } = await import("node:path");
  const storage = join(cacheDir, hub.getRepoFolderName(id));
  const hubUrl = opts.hubUrl ?? process.env.HF_ENDPOINT ?? undefined;
  return { hub, cacheDir, id, storage, hubUrl, join };
}

/**
 * Offline: the snapshot folder for `revision` from the cache (refs/<branch or tag> → commit),
 * or a HubDownloadError saying what is missing.
 */
export async function resolveCachedSnapshot(opts: HubRepoOptions): Promise<string> {
  const { storage, join } = await common(opts);
  const fs = await import("node:fs/promises");
  const revision = opts.revision ?? "main";
  let commit = revision;
  if (!/^[0-9a-f]{40}$/.test(revision)) {
    try {
      commit = (await fs.readFile(join(storage, "refs", revision), "utf8")).trim();
    } catch {
      throw new HubDownloadError(`${opts.repo}@${revision}: not in the cache at ${storage} (offline mode)`);
    }
  }
  const snapshot = join(storage, "snapshots", commit);
  try {
    await fs.access(snapshot);
  } catch {
    throw new HubDownloadError(`${opts.repo}@${revision}: snapshot ${commit} is not in the cache (offline mode)`);
  }
  return snapshot;
}

/** Download (or reuse from the cache) every file of a repo revision; returns the snapshot folder. */
export async function downloadSnapshot(opts: HubRepoOptions): Promise<string> {
  if (isOffline(opts)) return resolveCachedSnapshot(opts);
  const { hub, cacheDir, id, hubUrl } = await common(opts);
  try {
    return await hub.snapshotDownload({
      repo: id,
      revision: opts.revision,
      cacheDir,
      hubUrl,
      accessToken: opts.accessToken,
      fetch: opts.fetch,
    });
  } catch (e) {
    throw new HubDownloadError(`${opts.repo}@${opts.revision ?? "main"}: download failed: ${(e as Error).message}`);
  }
}

/**
 * Download (or reuse) one file; returns its path inside the snapshot folder. A branch or tag is first
 * resolved to its commit (and refs/<revision> written) so the file lands in that commit's snapshot,
 * as huggingface_hub's hf_hub_download lays it out.
 */
export async function downloadRepoFile(opts: HubRepoOptions & { path: string }): Promise<string> {
  const { hub, cacheDir, id, storage, hubUrl, join } = await common(opts);
  const revision = opts.revision ?? "main";
  if (isOffline(opts)) {
    const snapshot = await resolveCachedSnapshot(opts);
    const fs = await import("node:fs/promises");
    const p = join(snapshot, opts.path);
    try {
      await fs.access(p);
    } catch {
      throw new HubDownloadError(`${opts.repo}@${revision}: ${opts.path} is not in the cache (offline mode)`);
    }
    return p;
  }
  try {
    let commit = revision;
    if (!/^[0-9a-f]{40}$/.test(revision)) {
      type Info = (p: Record<string, unknown>) => Promise<unknown>;
      const info = (
        id.type === "model" ? hub.modelInfo : id.type === "dataset" ? hub.datasetInfo : hub.spaceInfo
      ) as Info;
      const res = (await info({
        name: id.name,
        revision,
        hubUrl,
        accessToken: opts.accessToken,
        fetch: opts.fetch,
        additionalFields: ["sha"],
      })) as { sha: string };
      commit = res.sha;
      const fs = await import("node:fs/promises");
      await fs.mkdir(join(storage, "refs"), { recursive: true });
      await fs.writeFile(join(storage, "refs", revision), commit);
    }
    return await hub.downloadFileToCacheDir({
      repo: id,
      path: opts.path,
      revision: commit,
      cacheDir,
      hubUrl,
      accessToken: opts.accessToken,
      fetch: opts.fetch,
    });
  } catch (e) {
    throw new HubDownloadError(`${opts.repo}@${revision}: ${opts.path}: download failed: ${(e as Error).message}`);
  }
}

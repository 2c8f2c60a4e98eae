import { existsSync, lstatSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  HubDownloadError,
  ShardedSafetensors,
  convertLlama2cToHf,
  downloadRepoFile,
  downloadSnapshot,
  readRepoConfigs,
  resolveCachedSnapshot,
  SafetensorsFile,
  httpSource,
  parseSafetensors,
  verifyManifest,
  writeManifest,
} from "../src/index.js";
import { tempDir } from "./helpers.js";
import { type FakeRepo, startHubServer } from "./hub-server.js";

const tmp = tempDir();
const converted = convertLlama2cToHf(
  new Uint8Array(readFileSync(new URL("../../models/data/stories260K/stories260K.bin", import.meta.url))),
  new Uint8Array(readFileSync(new URL("../../models/data/stories260K/tok512.bin", import.meta.url))),
);
const enc = (s: string | Uint8Array) => (typeof s === "string" ? new TextEncoder().encode(s) : s);
const files = new Map([...converted.files].map(([k, v]) => [k, enc(v)]));
const OLD = "1".repeat(40);
const NEW = "2".repeat(40);
const oldFiles = new Map(files);
oldFiles.set("README.md", enc("---\nlicense: mit\n---\nold\n"));
files.set("README.md", enc("---\nlicense: mit\n---\nnew\n"));
const repo: FakeRepo = {
  name: "kiln-test/stories260K",
  refs: { main: NEW, v1: OLD },
  commits: [
    { sha: OLD, files: oldFiles },
    { sha: NEW, files },
  ],
  lfs: (p) => p.endsWith(".safetensors"),
};
let server: Awaited<ReturnType<typeof startHubServer>>;
beforeAll(async () => {
  // @huggingface/hub logs every download with console.debug.
  vi.spyOn(console, "debug").mockImplementation(() => {});
  server = await startHubServer(repo);
});
afterAll(async () => {
  await server.close();
  tmp.cleanup();
});

describe("hub download through @huggingface/hub against a local server", () => {
  const cacheDir = join(tmp.dir, "hub-cache");

  it("downloads a snapshot into the HF cache layout (blobs, refs, snapshots)", async () => {
    const snap = await downloadSnapshot({ repo: repo.name, hubUrl: server.url, cacheDir });
    const storage = join(cacheDir, "models--kiln-test--stories260K");
    expect(snap).toBe(join(storage, "snapshots", NEW));
    expect(readFileSync(join(storage, "refs", "main"), "utf8")).toBe(NEW);
    expect(readdirSync(snap).sort()).toEqual([...files.keys()].sort());
    expect(lstatSync(join(snap, "model.safetensors")).isSymbolicLink()).toBe(true);
    for (const [name, bytes] of files) expect(readFileSync(join(snap, name)).equals(bytes), name).toBe(true);
    // The downloaded directory loads like any local model directory.
    const cfg = await readRepoConfigs(snap);
    expect(cfg.config.model_type).toBe("llama");
    const weights = await ShardedSafetensors.open(snap);
    expect(weights.info("model.embed_tokens.weight").shape).toEqual([512, 64]);
    await weights.close();
    expect(server.requests.some((r) => r.startsWith("GET /api/models/kiln-test/stories260K/revision/main"))).toBe(true);
    // A manifest of the snapshot follows its symlinks into blobs/.
    const entries = await writeManifest(snap);
    expect(entries.map((e) => e.path).sort()).toEqual([...files.keys()].sort());
    expect((await verifyManifest(snap)).ok).toBe(true);
  });

  it("resolves tags and commit revisions; downloads single files", async () => {
    const p = await downloadRepoFile({
      repo: repo.name,
      path: "README.md",
      revision: "v1",
      hubUrl: server.url,
      cacheDir,
    });
    expect(p).toBe(join(cacheDir, "models--kiln-test--stories260K", "snapshots", OLD, "README.md"));
    expect(readFileSync(p, "utf8")).toContain("old");
    expect(readFileSync(join(cacheDir, "models--kiln-test--stories260K", "refs", "v1"), "utf8")).toBe(OLD);
    const q = await downloadRepoFile({
      repo: repo.name,
      path: "README.md",
      revision: NEW,
      hubUrl: server.url,
      cacheDir,
    });
    expect(readFileSync(q, "utf8")).toContain("new");
  });

  it("offline mode answers from the cache without any request, and says what is missing", async () => {
    const before = server.requests.length;
    const snap = await downloadSnapshot({ repo: repo.name, cacheDir, offline: true });
    expect(snap.endsWith(NEW)).toBe(true);
    const readme = await downloadRepoFile({
      repo: repo.name,
      path: "README.md",
      revision: "v1",
      cacheDir,
      offline: true,
    });
    expect(readFileSync(readme, "utf8")).toContain("old");
    expect(await resolveCachedSnapshot({ repo: repo.name, revision: OLD, cacheDir })).toContain(OLD);
    expect(server.requests.length).toBe(before);
    await expect(downloadSnapshot({ repo: repo.name, revision: "v2", cacheDir, offline: true })).rejects.toThrow(
      HubDownloadError,
    );
    await expect(
      downloadRepoFile({ repo: repo.name, path: "config.json", revision: "v1", cacheDir, offline: true }),
    ).rejects.toThrow(/config.json is not in the cache/);
    await expect(downloadSnapshot({ repo: "kiln-test/absent", cacheDir, offline: true })).rejects.toThrow(
      /not in the cache/,
    );
  });

  it("reads one tensor of a hub file lazily over HTTP ranges (browser path)", async () => {
    const url = `${server.url}/${repo.name}/resolve/main/model.safetensors`;
    const before = server.requests.length;
    const f = await SafetensorsFile.open(await httpSource(url));
    const norm = await f.readFloat32("model.norm.weight");
    expect(norm.length).toBe(64);
    const local = parseSafetensors(files.get("model.safetensors")!);
    expect(
      Buffer.from(norm.buffer, norm.byteOffset, norm.byteLength).equals(local.tensors.get("model.norm.weight")!.data),
    ).toBe(true);
    expect(server.requests.length - before).toBe(4); // probe, size prefix, header, one tensor
    await expect(httpSource(`${server.url}/nope`)).rejects.toThrow(/Range/);
    const g = await SafetensorsFile.open(url); // a URL string works too
    expect(g.keys().length).toBe(47);
  });

  it("reports hub errors as HubDownloadError", async () => {
    await expect(
      downloadSnapshot({ repo: repo.name, revision: "nope", hubUrl: server.url, cacheDir: join(tmp.dir, "c2") }),
    ).rejects.toThrow(HubDownloadError);
    expect(existsSync(join(tmp.dir, "c2", "models--kiln-test--stories260K", "snapshots"))).toBe(false);
  });
});

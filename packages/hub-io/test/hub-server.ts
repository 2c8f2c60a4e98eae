// A local stand-in for the Hub's HTTP API, serving the routes @huggingface/hub calls for downloads:
//   GET  /api/models/{repo}/revision/{rev}        model info (sha)
//   GET  /api/models/{repo}/tree/{rev}?recursive   file listing
//   POST /api/models/{repo}/paths-info/{rev}      per-file oid / lfs / lastCommit
//   GET  /{repo}/resolve/{rev}/{path}             file bytes, with Range support and ETag
import { createHash } from "node:crypto";
import { type Server, createServer } from "node:http";
import type { AddressInfo } from "node:net";

export interface FakeCommit {
  sha: string;
  files: Map<string, Uint8Array>;
}

export interface FakeRepo {
  name: string;
  /** Branch or tag → commit sha. */
  refs: Record<string, string>;
  commits: FakeCommit[];
  /** Files served as LFS (oid = sha256), as the Hub does for weights. */
  lfs: (path: string) => boolean;
}

const gitOid = (b: Uint8Array) => createHash("sha1").update(`blob ${b.byteLength}\0`).update(b).digest("hex");
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

export async function startHubServer(
  repo: FakeRepo,
): Promise<{ url: string; requests: string[]; close: () => Promise<void> }> {
  const requests: string[] = [];
  const commitOf = (rev: string) => repo.commits.find((c) => c.sha === (repo.refs[rev] ?? rev));
  const entry = (c: FakeCommit, path: string, b: Uint8Array) => ({
    type: "file",
    path,
    oid: gitOid(b),
    size: b.byteLength,
    ...(repo.lfs(path) ? { lfs: { oid: sha256(b), size: b.byteLength, pointerSize: 134 } } : {}),
    lastCommit: { id: c.sha, title: "commit", date: "2026-11-30T00:00:00.000Z" },
  });
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    requests.push(`${req.method} ${url.pathname}`);
    if (process.env.HUB_SERVER_DEBUG)
      console.error(Date.now() % 100000, req.method, url.pathname, req.headers.range ?? "");
    const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { "content-type": "application/json", ...headers });
      res.end(typeof body === "string" ? body : JSON.stringify(body));
    };
    const api = new RegExp(`^/api/models/${repo.name}/(revision|tree|paths-info)/([^/]+)$`).exec(url.pathname);
    if (api) {
      const c = commitOf(decodeURIComponent(api[2]));
      if (!c) return send(404, { error: "Revision not found" }, { "x-error-code": "RevisionNotFound" });
      if (api[1] === "revision") {
        return send(200, {
          _id: "0".repeat(24),
          id: repo.name,
          sha: c.sha,
          private: false,
          downloads: 0,
          likes: 0,
          gated: false,
          lastModified: "2026-11-30T00:00:00.000Z",
          siblings: [...c.files.keys()].map((rfilename) => ({ rfilename })),
        });
      }
      if (api[1] === "tree")
        return send(
          200,
          [...c.files].map(([p, b]) => entry(c, p, b)),
        );
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        const { paths } = JSON.parse(body) as { paths: string[] };
        send(
          200,
          paths.filter((p) => c.files.has(p)).map((p) => entry(c, p, c.files.get(p)!)),
        );
      });
      return;
    }
    const dl = new RegExp(`^/${repo.name}/resolve/([^/]+)/(.+)$`).exec(url.pathname);
    if (dl && req.method === "GET") {
      const c = commitOf(decodeURIComponent(dl[1]));
      const b = c?.files.get(decodeURIComponent(dl[2]));
      if (!c || !b) return send(404, { error: "Entry not found" }, { "x-error-code": "EntryNotFound" });
      const etag = `"${repo.lfs(dl[2]) ? sha256(b) : gitOid(b)}"`;
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? "");
      if (range) {
        const start = Number(range[1]);
        const end = range[2] === "" ? b.byteLength - 1 : Math.min(Number(range[2]), b.byteLength - 1);
        res.writeHead(206, {
          "content-range": `bytes ${start}-${end}/${b.byteLength}`,
          "content-length": String(end - start + 1),
          etag,
          "x-repo-commit": c.sha,
        });
        return res.end(b.subarray(start, end + 1));
      }
      res.writeHead(200, { "content-length": String(b.byteLength), etag, "x-repo-commit": c.sha });
      return res.end(b);
    }
    send(404, { error: `no route ${url.pathname}` });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

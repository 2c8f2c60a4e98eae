// Shared by the browser suite (test/browser/), the browser example (examples/browser-finetune/) and the
// packaging test: bundle for browsers with esbuild, serve a directory with the headers that make a page
// cross-origin isolated (SharedArrayBuffer, so the wasm backend's worker threads), start headless Chromium.
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire, isBuiltin } from "node:module";
import { tmpdir } from "node:os";
import { dirname, extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

/** esbuild as installed with tsup (no separate dependency). */
export function loadEsbuild() {
  const fromRoot = createRequire(join(repoRoot, "package.json"));
  return createRequire(fromRoot.resolve("tsup"))("esbuild");
}

/** Every workspace package name → its TypeScript entry, so pages bundle the sources without a build. */
export function workspaceSourceAliases() {
  const aliases = {};
  for (const dir of ["tensor", "hub-io", "models", "lora", "losses", "rollout", "benchmarks", "kit"]) {
    const manifestPath = join(repoRoot, "packages", dir, "package.json");
    if (!existsSync(manifestPath)) continue;
    const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
    for (const [sub, entry] of Object.entries(manifest.exports ?? {})) {
      if (typeof entry !== "object" || !entry.source) continue;
      aliases[sub === "." ? manifest.name : `${manifest.name}/${sub.slice(2)}`] = join(
        repoRoot,
        "packages",
        dir,
        entry.source,
      );
    }
  }
  return aliases;
}

/**
 * Node built-ins that ended up in a browser bundle (esbuild marks them external only when told to;
 * with platform "browser" an unmapped one is a build error, which this also reports).
 */
export async function bundleForBrowser({ entryPoints, outdir, stdin, sourceAliases = false, minify = false }) {
  const esbuild = loadEsbuild();
  const result = await esbuild.build({
    entryPoints,
    stdin,
    outdir,
    write: Boolean(outdir),
    bundle: true,
    platform: "browser",
    format: "esm",
    target: "es2022",
    minify,
    sourcemap: outdir ? "linked" : false,
    metafile: true,
    logLevel: "silent",
    alias: sourceAliases ? workspaceSourceAliases() : undefined,
  });
  // Inputs named like a built-in ("node:fs", "fs") were left external; "(disabled):node:fs" are the
  // empty modules of a package.json "browser" mapping, which is what browsers should get.
  const builtins = Object.keys(result.metafile.inputs).filter((input) => isBuiltin(input));
  return { result, builtins };
}

/** The embedded llama2.c stories260K files (checkpoint + tokenizer), wherever the repo keeps them. */
export function stories260KDir() {
  for (const pkg of ["models", "kit"]) {
    const dir = join(repoRoot, "packages", pkg, "data", "stories260K");
    if (existsSync(join(dir, "stories260K.bin"))) return dir;
  }
  throw new Error("stories260K.bin not found under packages/{models,kit}/data/stories260K");
}

const MIME = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".map": "application/json",
  ".json": "application/json",
  ".css": "text/css",
  ".png": "image/png",
  ".wasm": "application/wasm",
  ".safetensors": "application/octet-stream",
  ".bin": "application/octet-stream",
  ".txt": "text/plain; charset=utf-8",
};

/**
 * Serves `roots` (URL prefix → directory) on 127.0.0.1 with COOP/COEP, so `crossOriginIsolated` is true
 * and SharedArrayBuffer / shared WebAssembly.Memory exist (the wasm backend's threads need them).
 * `isolated: false` leaves the headers out (to test what a page without them gets).
 */
export async function serveStatic(roots, { port = 0, host = "127.0.0.1", isolated = true } = {}) {
  const mounts = Object.entries(roots).sort((a, b) => b[0].length - a[0].length);
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    let pathname = decodeURIComponent(url.pathname);
    if (pathname.endsWith("/")) pathname += "index.html";
    const mount = mounts.find(([prefix]) => pathname.startsWith(prefix));
    const headers = isolated
      ? {
          "Cross-Origin-Opener-Policy": "same-origin",
          "Cross-Origin-Embedder-Policy": "require-corp",
          "Cross-Origin-Resource-Policy": "same-origin",
          "Cache-Control": "no-store",
        }
      : { "Cache-Control": "no-store" };
    if (!mount) {
      res.writeHead(404, headers).end("not found");
      return;
    }
    const base = resolve(mount[1]);
    const file = normalize(join(base, pathname.slice(mount[0].length)));
    if (file !== base && !file.startsWith(base + sep)) {
      res.writeHead(403, headers).end("forbidden");
      return;
    }
    if (!existsSync(file) || !statSync(file).isFile()) {
      res.writeHead(404, headers).end("not found");
      return;
    }
    res.writeHead(200, { ...headers, "Content-Type": MIME[extname(file)] ?? "application/octet-stream" });
    res.end(readFileSync(file));
  });
  await new Promise((ok, fail) => {
    server.once("error", fail);
    server.listen(port, host, ok);
  });
  const address = server.address();
  return {
    url: `http://${host}:${address.port}/`,
    // Idle keep-alive sockets of a still-running browser would hold close() open.
    close: () =>
      new Promise((ok) => {
        server.close(() => ok());
        server.closeAllConnections();
      }),
  };
}

// KILN_CHROMIUM, when set, is the only candidate (a browser elsewhere, or a path that does not exist to
// see what a machine without Chromium reports).
const CHROMIUM_CANDIDATES = process.env.KILN_CHROMIUM
  ? [process.env.KILN_CHROMIUM]
  : ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];

export const CHROMIUM_INSTALL = "apt-get install -y chromium (Debian/Ubuntu), or set KILN_CHROMIUM=/path/to/chrome";

/** The Chromium binary and playwright-core, or the reason they are missing. */
export function findBrowser() {
  const executablePath = CHROMIUM_CANDIDATES.find((p) => existsSync(p));
  if (!executablePath) return { ok: false, why: `no Chromium found (looked at ${CHROMIUM_CANDIDATES.join(", ")})` };
  let playwright;
  try {
    playwright = createRequire(join(repoRoot, "packages", "tensor", "package.json"))("playwright-core");
  } catch (err) {
    return { ok: false, why: `playwright-core is not installed (${err.message}); run pnpm install` };
  }
  return { ok: true, executablePath, playwright };
}

/** Headless Chromium with WebGPU enabled (SwiftShader's adapter on a machine without a GPU). */
export async function launchChromium({ executablePath, playwright }) {
  const userDataDir = mkdtempSync(join(tmpdir(), "kiln-chromium-"));
  const context = await playwright.chromium.launchPersistentContext(userDataDir, {
    executablePath,
    headless: true,
    args: [
      "--headless=new",
      "--no-sandbox",
      "--enable-unsafe-webgpu",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--no-first-run",
      "--disable-quic",
    ],
    viewport: { width: 1100, height: 900 },
  });
  return {
    context,
    close: async () => {
      await context.close();
      rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

/** The packages a browser page may import (everything kiln needs to train in a tab). */
export const BROWSER_PACKAGES = ["@kiln/tensor", "@kiln/losses", "@kiln/models", "@kiln/lora", "@kiln/hub-io"];

/**
 * Bundles each browser-facing package for the browser from `resolveDir` (a project where they are
 * installed, or with `sourceAliases` the repo's sources) and throws naming every package that fails
 * or pulls in a Node built-in.
 */
export async function checkBrowserBundles({ resolveDir = repoRoot, sourceAliases = false, log = console.log } = {}) {
  const failures = [];
  for (const name of BROWSER_PACKAGES) {
    try {
      const { result, builtins } = await bundleForBrowser({
        stdin: { contents: `export * from "${name}";`, resolveDir, sourcefile: "entry.js", loader: "js" },
        sourceAliases,
      });
      if (builtins.length > 0) failures.push(`${name}: bundles Node built-ins ${builtins.join(", ")}`);
      else {
        const bytes = result.outputFiles?.[0]?.contents.length ?? 0;
        log(`browser bundle ok: ${name} (${(bytes / 1024).toFixed(0)} KB, esbuild --platform=browser)`);
      }
    } catch (err) {
      const errors = err?.errors?.map((e) => `${e.text}${e.location ? ` (${e.location.file})` : ""}`) ?? [String(err)];
      failures.push(`${name}: esbuild --platform=browser failed:\n    ${errors.join("\n    ")}`);
    }
  }
  if (failures.length > 0) throw new Error(`browser bundles:\n  ${failures.join("\n  ")}`);
}
